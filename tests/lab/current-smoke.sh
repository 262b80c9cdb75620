#!/usr/bin/env bash
# current-smoke.sh - `make lab-current-smoke`: bring the current lab up (Slurm 24.11 in a
# Debian 13 root, EASYSCALE_LAB_CURRENT=1) and check what the project relies on: the
# versions (prints "slurm 24.11" and "torch 2.6"), 4 nodes with typed GPU GRES (v100 on n1,
# n2; t4 on n3, n4), a GPU job's CUDA_VISIBLE_DEVICES, a shrink with
# `scontrol update JobId=X NumNodes=1`, a second shrink and a comment update (slurmdbd),
# a reservation that `squeue --start` shows for a job that must wait, and the SPANK plugin
# built against 24.11's spank.h (bin/slurm-24.11) loaded by sbatch and srun.
# Ends with "N passed, M failed"; exit status 1 when a check failed. A lab that was down
# is taken down again at the end; one that was up is left up (its jobs are not touched,
# the checks cancel only their own).
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export EASYSCALE_LAB_CURRENT=1
t0=$SECONDS
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
check() { # check NAME CMD...: pass when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}

was_up=0
if [ -s "${EASYSCALE_LAB_DIR:-/tmp/easyscale-lab-current}/run/lab.pids" ]; then was_up=1; fi
exports=$(bash tests/lab/lab-up.sh)
eval "$exports"
echo "$exports"
X=$EASYSCALE_LAB_DIR/bin/lab-exec
ids=()
finish() {
	[ ${#ids[@]} -eq 0 ] || "$X" scancel "${ids[@]}" 2>/dev/null || true
	if [ "$was_up" = 0 ]; then bash tests/lab/lab-down.sh; fi
}
trap finish EXIT

# ---------------------------------------------------------------- versions
slurm=$("$X" scontrol --version | awk '{print $2}')
torch=$("$X" python3 -c 'import torch; print(torch.__version__)')
python=$("$X" python3 -c 'import platform; print(platform.python_version())')
echo "slurm ${slurm%.*} ($slurm)"
echo "torch ${torch%.*} ($torch, python $python)"
check "scontrol --version is 24.11" [ "${slurm%.*}" = 24.11 ]
check "sinfo --version is 24.11" [ "$("$X" sinfo --version | awk '{print $2}')" = "$slurm" ]
check "torch is 2.6" [ "${torch%.*}" = 2.6 ]

# ---------------------------------------------------------------- the SPANK plugin
# built against 24.11's spank.h in the root (bin/slurm-24.11, the current lab's default
# plugin path), then hooked by lab-up (plugstack.conf is read anew by every srun/sbatch)
so=bin/slurm-24.11/easyscale_spank.so
if "$X" make -s BIN=bin/slurm-24.11 spank-plugin >/dev/null && bash tests/lab/lab-up.sh >/dev/null 2>&1; then
	check "sbatch --help lists --elastic (the plugin built against 24.11 is loaded)" \
		grep -q -- '--elastic' <("$X" sbatch --help)
	check "srun runs a step with the plugin loaded" [ "$("$X" srun -N1 -t 1 echo ok 2>&1)" = ok ]
else
	bad "building $so in the root"
fi

# ---------------------------------------------------------------- nodes and GRES
nodes=$("$X" sinfo -h -N -o '%N %G %T' | sort -u)
echo "$nodes" | sed 's/^/     /'
check "4 nodes" [ "$(echo "$nodes" | wc -l)" = 4 ]
check "n1, n2 have gpu:v100:4; n3, n4 gpu:t4:4" [ "$(echo "$nodes" | awk '{print $1, $2}' | tr '\n' ' ')" = "n1 gpu:v100:4 n2 gpu:v100:4 n3 gpu:t4:4 n4 gpu:t4:4 " ]

# wait_state ID STATE: until squeue shows the job in STATE (30 s)
wait_state() {
	for _ in $(seq 300); do
		[ "$("$X" squeue -h -j "$1" -o %T 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------- a GPU job
out=$EASYSCALE_LAB_DIR/smoke-gpu.out
rm -f "$out"
id=$("$X" sbatch --parsable -J smoke-gpu --gres=gpu:v100:2 -t 2 -o "$out" \
	--wrap 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=$SLURM_JOB_GPUS node=$SLURMD_NODENAME"')
ids+=("$id")
for _ in $(seq 300); do [ -s "$out" ] && break; sleep 0.1; done
echo "     job $id: $(cat "$out" 2>/dev/null)"
check "a GPU job sees CUDA_VISIBLE_DEVICES" grep -qE '^CUDA_VISIBLE_DEVICES=[0-3],[0-3] ' "$out"

# ---------------------------------------------------------------- shrink
id=$("$X" sbatch --parsable -J smoke-shrink -N3 --gres=gpu:1 -t 5 -o /dev/null --wrap 'sleep 120')
ids+=("$id")
check "a 3-node job runs" wait_state "$id" RUNNING
"$X" scontrol update JobId="$id" NumNodes=2 >/dev/null 2>&1 || true
check "scontrol update NumNodes=2 shrinks it" [ "$("$X" squeue -h -j "$id" -o %D)" = 2 ]
"$X" scontrol update JobId="$id" NumNodes=1 >/dev/null 2>&1 || true
check "a second update NumNodes=1 shrinks it again" [ "$("$X" squeue -h -j "$id" -o %D)" = 1 ]
"$X" scontrol update JobId="$id" Comment="es smoke" >/dev/null 2>&1 || true
check "its comment can be updated after two resizes" [ "$("$X" squeue -h -j "$id" -o %k)" = "es smoke" ]

# ---------------------------------------------------------------- squeue --start
# n1 runs the shrunk job: a job that needs all 4 nodes waits for it, and backfill plans it
id=$("$X" sbatch --parsable -J smoke-wait -N4 --exclusive -t 5 -o /dev/null --wrap 'true')
ids+=("$id")
start=
for _ in $(seq 100); do
	start=$("$X" squeue -h --start -j "$id" -o '%S %Y' 2>/dev/null || true)
	case "$start" in 20[0-9][0-9]-*\ n*) break ;; esac
	sleep 0.1
done
echo "     job $id: start, planned nodes: $start"
check "squeue --start shows a planned start and nodes for a waiting job" grep -qE '^20[0-9]{2}-[0-9-]+T[0-9:]+ n' <<<"$start"

echo "slurm ${slurm%.*} torch ${torch%.*}: $((SECONDS - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
