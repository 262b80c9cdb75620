#!/bin/sh
# fake-sbatch.sh - stands in for sbatch in unit tests. It records its argv
# (one "ARG <value>" line each), the EasyScale environment twins and SLURM_NO_KILL, every
# argument that names a readable file ("FILE <path>" then the content) and its
# stdin when FAKE_SBATCH_STDIN=1, into $FAKE_SBATCH_LOG; then prints what
# sbatch prints on success (the first line of its help for --help or -h), or fails
# like sbatch when FAKE_SBATCH_FAIL is set.
log=${FAKE_SBATCH_LOG:?}
parsable=0
help=0
for a in "$@"; do
	printf 'ARG %s\n' "$a" >>"$log"
	[ "$a" = --parsable ] && parsable=1
	case $a in --help | -h) help=1 ;; esac
	if [ -f "$a" ]; then printf 'FILE %s\n' "$a" >>"$log"; cat "$a" >>"$log"; fi
done
env | grep -E '^(EASYSCALE_|SLURM_NO_KILL=)' | sort | sed 's/^/ENV /' >>"$log"
if [ "${FAKE_SBATCH_STDIN:-0}" = 1 ]; then echo STDIN >>"$log"; cat >>"$log"; fi
if [ -n "${FAKE_SBATCH_FAIL:-}" ]; then
	echo "sbatch: error: $FAKE_SBATCH_FAIL" >&2
	exit 1
fi
if [ $help = 1 ]; then echo 'Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]'; exit 0; fi
if [ $parsable = 1 ]; then echo 42; else echo "Submitted batch job 42"; fi
