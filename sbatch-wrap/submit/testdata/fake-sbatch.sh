#!/bin/sh
# fake-sbatch.sh - stands in for sbatch in unit tests. It records its argv
# (one "ARG <value>" line each), the EasyScale environment twins, every
# argument that names a readable file ("FILE <path>" then the content) and its
# stdin when FAKE_SBATCH_STDIN=1, into $FAKE_SBATCH_LOG; then prints what
# sbatch prints on success, or fails like sbatch when FAKE_SBATCH_FAIL is set.
log=${FAKE_SBATCH_LOG:?}
parsable=0
for a in "$@"; do
	printf 'ARG %s\n' "$a" >>"$log"
	[ "$a" = --parsable ] && parsable=1
	if [ -f "$a" ]; then printf 'FILE %s\n' "$a" >>"$log"; cat "$a" >>"$log"; fi
done
env | grep '^EASYSCALE_' | sort | sed 's/^/ENV /' >>"$log"
if [ "${FAKE_SBATCH_STDIN:-0}" = 1 ]; then echo STDIN >>"$log"; cat >>"$log"; fi
if [ -n "${FAKE_SBATCH_FAIL:-}" ]; then
	echo "sbatch: error: $FAKE_SBATCH_FAIL" >&2
	exit 1
fi
if [ $parsable = 1 ]; then echo 42; else echo "Submitted batch job 42"; fi
