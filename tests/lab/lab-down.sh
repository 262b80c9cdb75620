#!/usr/bin/env bash
# lab-down.sh - stop the lab cluster started by lab-up.sh. Stops only the PIDs that
# lab-up.sh recorded in $EASYSCALE_LAB_DIR/run/lab.pids, after checking that each still
# runs the program it started (a reused PID is left alone), plus slurmstepd processes of
# the lab's slurmds (recognised by the lab's slurmd log they hold open). Idempotent.
# Keeps configs, logs and the MariaDB datadir; EASYSCALE_LAB_PURGE=1 deletes the lab dir.
set -Eeuo pipefail
LAB_SCRIPT=lab-down
# shellcheck source=tests/lab/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root"
if [ ! -d "$LAB_DIR" ]; then
	log "no lab at $LAB_DIR"
	exit 0
fi
lab_lock
export SLURM_CONF=$CONF
# the current lab: its daemons' clients are in the Debian 13 root (current-lib.sh)
if [ "$LAB_CURRENT" = 1 ] && ! in_current_root; then current_lab_down; fi

# stop NAME PID [NAME PID...]: SIGTERM, wait up to 10 s, then SIGKILL what is left
stop() {
	local sent=() i
	while [ $# -ge 2 ]; do
		if alive "$1" "$2"; then
			kill -TERM "$2" 2>/dev/null || true
			sent+=("$1" "$2")
		elif [ -e "/proc/$2" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$2/status" 2>/dev/null; then
			log "pid $2 is not $1 any more: left alone"
		fi
		shift 2
	done
	[ ${#sent[@]} -gt 0 ] || return 0
	for _ in $(seq 100); do
		local left=0
		for ((i = 0; i < ${#sent[@]}; i += 2)); do alive "${sent[i]}" "${sent[i + 1]}" && left=1; done
		[ "$left" = 1 ] || break
		sleep 0.1
	done
	for ((i = 0; i < ${#sent[@]}; i += 2)); do
		if alive "${sent[i]}" "${sent[i + 1]}"; then
			log "${sent[i]} (${sent[i + 1]}) ignored SIGTERM for 10 s: SIGKILL"
			kill -KILL "${sent[i + 1]}" 2>/dev/null || true
		else
			log "stopped ${sent[i]} (${sent[i + 1]})"
		fi
	done
}

if [ -s "$PIDS" ]; then
	# cancel jobs first so that slurmstepds end cleanly
	if [ -f "$CONF" ] && ctld_up; then
		jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true)
		if [ -n "${jobs// /}" ]; then
			log "cancelling jobs: $jobs"
			# shellcheck disable=SC2086
			timeout 10 scancel $jobs 2>/dev/null || true
			sleep 0.5
		fi
	fi
	# order: every slurmd together, then slurmctld, slurmdbd, mariadbd, munged
	for group in 'slurmd-*' slurmctld slurmdbd mariadbd munged; do
		args=()
		while read -r name pid; do
			# shellcheck disable=SC2254
			case "$name" in $group) args+=("$name" "$pid") ;; esac
		done <"$PIDS"
		[ ${#args[@]} -eq 0 ] || stop "${args[@]}"
	done
	: >"$PIDS"
else
	log "nothing recorded in $PIDS"
fi

# left-over slurmstepd of this lab: it keeps its node's $LOG/slurmd-nN.log open
for d in /proc/[0-9]*; do
	[ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
	if ls -l "$d/fd/" 2>/dev/null | grep -q -- "-> $LOG/slurmd-"; then
		log "killing stray slurmstepd ${d#/proc/}"
		kill -KILL "${d#/proc/}" 2>/dev/null || true
	fi
done
rm -f "$RUN/owner"

if [ "${EASYSCALE_LAB_PURGE:-0}" = 1 ]; then
	flock -u 9
	rm -rf "${LAB_DIR:?}"
	log "purged $LAB_DIR"
fi
log "lab down"
