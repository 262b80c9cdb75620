#!/bin/bash
# first-node-loss.sh NAME [easyscale-sbatch args...] - the experiment of docs/first-node-loss.md, on a lab
# that is up (eval "$(tests/lab/lab-up.sh)" first, with the lab's SLURM_CONF and EASYSCALE_LAB_DIR exported).
# It submits examples/slurm/mnist.sbatch at epochs = 10 (2340 steps) on 3 nodes with easyscale-sbatch
# --elastic=3-4, makes the batch host fail at step >= 20 as a crashed machine does (SIGKILL of its slurmd,
# the slurmstepds holding its log open and every process below them, all stopped first, as internal/slurmlab
# KillNode does)
# and writes the job's and the node's state, each time it changes (polled every second), with the time
# since the kill, into /tmp/first-node-loss/NAME/timeline; MAXWAIT (default 300) seconds at most.
# The node stays down: resume it with lab-up.sh (which restarts the lab with empty state and accounting: read
# sacct first) and `scontrol update NodeName=n1 State=RESUME`.
# SUBMIT=sbatch submits with plain sbatch (the SPANK plugin reads --elastic; no --no-kill) instead of
# easyscale-sbatch; the extra arguments (e.g. --requeue) go to either. SCRIPT=examples/slurm/torch-mnist.sbatch
# runs the torch example instead (its own job file, 234 steps; EASYSCALE_STEPS as set in the environment).
# KILLSTEP=N kills at ledger step N instead of 20 (the kill itself takes seconds on a loaded machine: it lands
# later). ELASTIC=RANGE replaces --elastic=3-4.
set -u
name=$1; shift
: "${SLURM_CONF:?run eval \"\$(tests/lab/lab-up.sh)\" first}" "${EASYSCALE_LAB_DIR:?}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"; export PATH=$root/bin:$PATH
out=/tmp/first-node-loss/$name; mkdir -p "$out"
killnode() { # killnode NODE
	local n=$1 lab=$EASYSCALE_LAB_DIR pids d fd
	roots=$(awk -v k="slurmd-$n" '$1==k{print $2}' "$lab/run/lab.pids")
	# a stopped process forks no more: stop each before listing its children
	desc() { local p; for p in $(cat /proc/$1/task/*/children 2>/dev/null); do kill -STOP "$p"; echo "$p"; desc "$p"; done; }
	for d in /proc/[0-9]*; do
		[ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
		for fd in "$d"/fd/*; do
			if [ "$(readlink "$fd" 2>/dev/null)" = "$lab/log/slurmd-$n.log" ]; then roots="$roots ${d#/proc/}"; break; fi
		done
	done
	# all at once, as KillNode does: stopped first, then killed, so that no process (srun's shepherd)
	# acts on another's death (docs/first-node-loss.md); killed children first (the list reversed), so that
	# no stopped process group is orphaned, which the kernel wakes with SIGHUP and SIGCONT
	kill -STOP $roots; pids="$roots $(for r in $roots; do desc "$r"; done)"
	kill -9 $(printf '%s\n' $pids | tac) && echo "killed $n:" $pids
}
sed 's/^epochs = 1 .*/epochs = 10/' examples/mnist/job.toml > "$out/job.toml"
script=${SCRIPT:-examples/slurm/mnist.sbatch}
id=$(EASYSCALE_CONFIG=$out/job.toml EASYSCALE_SUMMARY=$out/summary.json "${SUBMIT:-easyscale-sbatch}" --parsable "$@" --elastic="${ELASTIC:-3-4}" --time=8 "$script")
echo "job $id of $script submitted by ${SUBMIT:-easyscale-sbatch} args: $*" > "$out/timeline"
st=.easyscale/$id/state
# read-only, and only once the job made it: sqlite3 would create a missing database, owned by whoever runs this,
# which a job of another user then cannot write (a tester's job as alice FAILED so)
step() { [ -f "$st/state.db" ] && sqlite3 -readonly "$st/state.db" 'select max(step) from ledger' 2>/dev/null; }
bh=""
until [ -n "$bh" ] && [ "$(step)" -ge "${KILLSTEP:-20}" ] 2>/dev/null; do
	sleep 0.2; bh=$(scontrol show job -o "$id" | grep -o 'BatchHost=[^ ]*' | cut -d= -f2)
done
echo "step $(step) batch host $bh nodes $(squeue -h -j "$id" -o %N)" >> "$out/timeline"
tk=$EPOCHREALTIME; killnode "$bh" >> "$out/timeline"
last="" seen=""
while :; do
	el=$(echo "$EPOCHREALTIME - $tk" | bc)
	j=$(scontrol show job -o "$id" 2>/dev/null | grep -o ' JobState=[^ ]*\| Reason=[^ ]*\| EligibleTime=[^ ]*\| Restarts=[^ ]*\| NodeList=[^ ]*' | tr -d '\n')
	cur="$j node:$(scontrol show node "$bh" | grep -o 'State=[^ ]*' | head -1)"
	[ "$cur" != "$last" ] && { printf '%6.1fs %s step=%s\n' "$el" "$cur" "$(step)" >> "$out/timeline"; last=$cur; }
	if [ -z "$seen" ] && [ -f ".easyscale/$id/takeover" ]; then
		seen=1; printf '%6.1fs takeover: %s\n' "$el" "$(head -1 ".easyscale/$id/takeover")" >> "$out/timeline"
	fi
	case $j in *JobState=COMPLETED*|*JobState=FAILED*|*JobState=TIMEOUT*|*JobState=CANCELLED*|*JobState=NODE_FAIL*|"") break ;; esac
	(( ${el%%.*} > ${MAXWAIT:-300} )) && { echo "gave up after $el s" >> "$out/timeline"; break; }
	sleep 1
done
sacct -D -X -j "$id" -o JobID,State,ExitCode,Start,End,NodeList >> "$out/timeline" 2>&1
grep -h "JobId=$id[ .]" "$EASYSCALE_LAB_DIR/log/slurmctld.log" | grep -v comment | tail -30 > "$out/slurmctld.log"
cp es-*-"$id.out" "$out/" 2>/dev/null
scancel "$id"
cat "$out/timeline"
