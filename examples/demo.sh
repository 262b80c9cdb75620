#!/usr/bin/env bash
# make demo / make demo-charlm: train a job twice — on the fixed allocation
# (one physical worker per logical worker) and on an allocation that changes
# several times, with heterogeneous speeds — then show that both models are
# bit-identical, and draw both (loss and workers per step) with easyscale-plot.
# Usage: examples/demo.sh JOB_FILE SCHEDULE
# EASYSCALE_STEPS=N shortens both runs (the LR schedule is unchanged).
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:?usage: examples/demo.sh JOB_FILE SCHEDULE}
changing=${2:?usage: examples/demo.sh JOB_FILE SCHEDULE}
out=$(mktemp -d /tmp/easyscale-demo.XXXXXX)
steps=()
[ -n "${EASYSCALE_STEPS:-}" ] && steps=(--steps "$EASYSCALE_STEPS")

echo "== 1/2: fixed allocation, one physical worker per logical worker ($job)"
bin/easyscale run --config "$job" "${steps[@]}" --state "$out/fixed" --summary "$out/fixed.json" | tee "$out/fixed.txt"
echo
echo "== 2/2: changing allocation --workers $changing"
bin/easyscale run --config "$job" "${steps[@]}" --workers "$changing" --state "$out/elastic" --summary "$out/elastic.json" | tee "$out/elastic.txt"
echo
echo "== step-by-step comparison of the two ledgers"
bin/easyscale verify "$out/fixed" "$out/elastic"
d1=$(grep -o 'sha256:[0-9a-f]*' "$out/fixed.txt")
d2=$(grep -o 'sha256:[0-9a-f]*' "$out/elastic.txt")
echo
echo "fixed    digest $d1  $(grep -o 'test_accuracy [0-9.]*' "$out/fixed.txt")"
echo "changing digest $d2  $(grep -o 'test_accuracy [0-9.]*' "$out/elastic.txt")"
if [ "$d1" != "$d2" ]; then
	echo "MISMATCH: the two runs differ" >&2
	exit 1
fi
bin/easyscale-plot --output "$out/fixed-vs-changing.svg" --label fixed --label changing "$out/fixed" "$out/elastic"
echo "bit-identical. State directories and summaries are in $out; the picture is $out/fixed-vs-changing.svg"
