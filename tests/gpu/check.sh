#!/usr/bin/env bash
# tests/gpu/check.sh - the checks that need a real NVIDIA GPU, as one prepared run (about 5 minutes on
# one H200). CI has no GPU; run this on a GPU machine with bin/ built (make build) and data/mnist (make data):
#
#   tests/gpu/check.sh                 # DEVICE=cuda
#   DEVICE=cpu tests/gpu/check.sh      # the same runs on the CPU (checks the script; skips NVML)
#   RESNET=0 tests/gpu/check.sh        # without step 3
#
# 1. easyscale-gpuctx (go-nvml, the SPANK plugin's helper) against the real driver: all GPUs, an ordinal,
#    an empty CUDA_VISIBLE_DEVICES.
# 2. The torch engine through `easyscale run` with device = "cuda" (examples/torch-mnist, a module, and
#    examples/torch-ddp, the user's own loop): 12 steps on one process, and on the schedule
#    0:1,4:3,8:2 (1, then 3, then 2 processes on the one GPU, the chain reduction staged through the host):
#    the digests must be equal.
# 3. examples/torch-resnet/gpu_check.sh: ResNet-18, run to run and 1 vs 2 processes, the EST overhead.
# Prints `name value unit` lines; the engines' logs go to $OUT/*.log. Exits 1 when a digest differs.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-$(mktemp -d)}
# The interpreter with torch: python3 on PATH (the GPU machine's), else Debian's.
if [ -z "${EASYSCALE_PYTHON:-}" ]; then
  EASYSCALE_PYTHON=$(command -v python3)
  "$EASYSCALE_PYTHON" -c 'import torch' 2>/dev/null || EASYSCALE_PYTHON=/usr/bin/python3
fi
export EASYSCALE_PYTHON
export EASYSCALE_MNIST_DIR=${EASYSCALE_MNIST_DIR:-$PWD/data/mnist}
fail=0
start=$(date +%s)
say() { printf '== %s (%ss)\n' "$*" "$(($(date +%s) - start))"; }

if [ "$DEVICE" = cuda ]; then
  say "nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  say "easyscale-gpuctx (go-nvml)"
  for v in unset 0 empty; do
    case $v in
      unset) out=$(env -u CUDA_VISIBLE_DEVICES bin/easyscale-gpuctx 2>&1) ;;
      empty) out=$(CUDA_VISIBLE_DEVICES= bin/easyscale-gpuctx 2>&1) ;;
      *) out=$(CUDA_VISIBLE_DEVICES=$v bin/easyscale-gpuctx 2>&1) ;;
    esac
    printf 'CUDA_VISIBLE_DEVICES=%s:\n%s\n' "$v" "$out"
    n=$(sed -n 's/^EASYSCALE_GPU_COUNT=//p' <<<"$out")
    want=1
    [ "$v" = empty ] && want=0
    [ "$v" = unset ] && want=$(nvidia-smi -L | grep -c '^GPU ')
    echo "gpuctx_count_${v} ${n:-none} gpus (want $want)"
    [ "${n:-x}" = "$want" ] || fail=1
  done
fi

# run_job EXAMPLE SCHEDULE NAME: 12 steps of examples/EXAMPLE on DEVICE; prints its lines (also to
# $OUT/lines) and returns non-zero when the run failed.
run_job() {
  local ex=$1 sched=$2 name=$3 cfg t0 rc
  cfg=examples/$ex/job-$DEVICE-check.toml # beside the job file: its module and script are relative to it
  # device = DEVICE in [torch]; a script job (torch-ddp) also gets --device DEVICE on its command line.
  sed -e '/^device *=/d' -e "s/^\[torch\]\$/[torch]\ndevice = \"$DEVICE\"/" \
    -e "s/^args = \[/args = [\"--device\", \"$DEVICE\", /" "examples/$ex/job.toml" >"$cfg"
  # The edit relies on the examples' layout ([torch] alone on its line, `args = [` at a line's start).
  if ! grep -qx "device = \"$DEVICE\"" "$cfg" || { grep -q '^script *=' "$cfg" && ! grep -q "^args = \[\"--device\", \"$DEVICE\"" "$cfg"; }; then
    echo "check.sh: could not set device $DEVICE in $cfg (examples/$ex/job.toml's layout changed)" | tee -a "$OUT/lines"
    rm -f "$cfg"
    return 1
  fi
  rm -f "$OUT/$name.json"
  t0=$(date +%s.%N)
  timeout 150 bin/easyscale run --config "$cfg" --steps 12 --workers "$sched" --no-eval --quiet \
    --summary "$OUT/$name.json" >"$OUT/$name.log" 2>&1
  rc=$?
  rm -f "$cfg"
  python3 - "$OUT/$name.json" "$rc" "$name" "$t0" <<'EOF2' | tee -a "$OUT/lines"
import json, sys, time
path, rc, name, t0 = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
try:
    s = json.load(open(path))
except (OSError, ValueError):
    s = {}
print(f"{name}_rc {rc} exit")
print(f"{name}_wall_s {time.time() - t0:.1f} s")
print(f"{name}_digest {s.get('digest', 'none') if rc == 0 else 'none'} sha256")
print(f"{name}_self_check {s.get('self_check', 'none')} -")
EOF2
  [ "$rc" = 0 ] || tail -20 "$OUT/$name.log"
  return "$rc"
}
digest() { sed -n "s/^$1_digest \(.*\) sha256\$/\1/p" "$OUT/lines"; }

: >"$OUT/lines"
for ex in torch-mnist torch-ddp; do
  key=${ex//-/_}
  say "$ex on $DEVICE: 1 process, then 0:1,4:3,8:2"
  run_job "$ex" 1 "${key}_1" || fail=1
  run_job "$ex" 0:1,4:3,8:2 "${key}_sched" || fail=1
  a=$(digest "${key}_1") b=$(digest "${key}_sched")
  eq=0
  [ -n "$a" ] && [ "$a" != none ] && [ "$a" = "$b" ] && eq=1
  echo "${key}_${DEVICE}_1v_sched_equal $eq bool"
  [ $eq = 1 ] || fail=1
done

if [ "${RESNET:-1}" = 0 ]; then say "done (RESNET=0: no ResNet check), fail=$fail"; exit $fail; fi
say "examples/torch-resnet/gpu_check.sh"
DEVICE=$DEVICE PYTHON=$EASYSCALE_PYTHON MNIST_DIR=$EASYSCALE_MNIST_DIR timeout 330 \
  examples/torch-resnet/gpu_check.sh 2>"$OUT/resnet.log" || { fail=1; tail -20 "$OUT/resnet.log"; }
say "done, fail=$fail"
exit $fail
