# lib.sh - settings and helpers shared by lab-up.sh and lab-down.sh. Sourced, not run.
#
# Settings (environment), all optional:
#   EASYSCALE_LAB_CURRENT    0                   1: the current lab, Slurm 24.11 in a Debian 13 root
#                                                (current-root.sh, current-lib.sh); its own defaults below
#   EASYSCALE_LAB_DIR        /tmp/easyscale-lab  configs, state, logs, pidfiles of the lab
#                            (current lab: /tmp/easyscale-lab-current)
#   EASYSCALE_LAB_NODES      4                   slurmd instances n1..nN (one Port each)
#   EASYSCALE_LAB_GPUS       4                   emulated GPUs per node (character devices)
#   EASYSCALE_LAB_GPU_TYPES  "v100 v100 t4 t4"   GPU type per node, cycled
#   EASYSCALE_LAB_CPUS       8                   CPUs each node advertises
#   EASYSCALE_LAB_PORT_BASE  16800               slurmctld=+0 slurmdbd=+1 mariadb=+2 node nI=+10+I
#                            (current lab: 17800, so that both labs can run at once)
#   EASYSCALE_LAB_TIMEOUT    60                  seconds to wait for each daemon
#   EASYSCALE_LAB_SLURMD_DEBUG info              SlurmdDebug (debug: slurmstepd logs each task's exit
#                                                status or signal and the requests it handles)
#   EASYSCALE_LAB_SLURMCTLD_DEBUG info           SlurmctldDebug (debug: slurmctld logs each RPC it
#                                                handles, e.g. who asked to signal a step)
#   EASYSCALE_LAB_DEBUG_FLAGS ""                 DebugFlags of slurm.conf (e.g. Steps)
#   EASYSCALE_LAB_INSTALL    1                   0: never run apt-get (fail when packages are missing)
#   EASYSCALE_SPANK_SO       <repo>/bin/easyscale_spank.so   SPANK plugin loaded if the file exists
#   EASYSCALE_SPANK_ARGS     ""                  arguments after the plugin path in plugstack.conf
#   EASYSCALE_LAB_OWNER      manual              who asks: "harness" (Go tests) or "manual" (make lab-up)
#   EASYSCALE_LAB_JOIN       0                   1: other test processes use the lab (internal/slurmlab
#                                                sets it for all but the first): never restart it
#
# Everything the lab starts is private to it: its own munged socket, its own MariaDB
# datadir, socket and TCP port, its own ports for every Slurm daemon. So the lab can
# run next to another Slurm or munged on the same machine, and lab-down.sh stops only
# what lab-up.sh started.

LAB_CURRENT=${EASYSCALE_LAB_CURRENT:-0}
[[ "$LAB_CURRENT" =~ ^[01]$ ]] || { echo "EASYSCALE_LAB_CURRENT must be 0 or 1, not $LAB_CURRENT" >&2; exit 1; }
if [ "$LAB_CURRENT" = 1 ]; then
	LAB_DIR=${EASYSCALE_LAB_DIR:-/tmp/easyscale-lab-current}
	LAB_PORT_BASE=${EASYSCALE_LAB_PORT_BASE:-17800}
else
	LAB_DIR=${EASYSCALE_LAB_DIR:-/tmp/easyscale-lab}
	LAB_PORT_BASE=${EASYSCALE_LAB_PORT_BASE:-16800}
fi
LAB_NODES=${EASYSCALE_LAB_NODES:-4}
LAB_GPUS=${EASYSCALE_LAB_GPUS:-4}
LAB_GPU_TYPES=${EASYSCALE_LAB_GPU_TYPES:-"v100 v100 t4 t4"}
LAB_CPUS=${EASYSCALE_LAB_CPUS:-8}
LAB_TIMEOUT=${EASYSCALE_LAB_TIMEOUT:-60}
LAB_SLURMD_DEBUG=${EASYSCALE_LAB_SLURMD_DEBUG:-info}
LAB_SLURMCTLD_DEBUG=${EASYSCALE_LAB_SLURMCTLD_DEBUG:-info}
LAB_DEBUG_FLAGS=${EASYSCALE_LAB_DEBUG_FLAGS:-}
LAB_INSTALL=${EASYSCALE_LAB_INSTALL:-1}
LAB_OWNER=${EASYSCALE_LAB_OWNER:-manual}

LAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ETC=$LAB_DIR/etc RUN=$LAB_DIR/run LOG=$LAB_DIR/log BIN=$LAB_DIR/bin
MUNGE_DIR=$LAB_DIR/munge
DB_DIR=$LAB_DIR/mysql
CONF=$ETC/slurm.conf
PIDS=$RUN/lab.pids
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
DB_SOCKET=$DB_DIR/mysqld.sock
CTLD_PORT=$LAB_PORT_BASE
DBD_PORT=$((LAB_PORT_BASE + 1))
DB_PORT=$((LAB_PORT_BASE + 2))
CLUSTER=eslab

T0=$EPOCHREALTIME
log() { printf '[%s %5.2fs] %s\n' "$LAB_SCRIPT" "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# elapsed: seconds since the script started, from bash's own clock (no bc needed)
elapsed() {
	local now=${EPOCHREALTIME/[.,]/} t0=${T0/[.,]/}
	local us=$((now - t0))
	printf '%d.%02d' $((us / 1000000)) $((us % 1000000 / 10000))
}

# lab_lock: serialise lab-up/lab-down (several test packages may start the lab at once).
# lab-up runs lab-down while it holds the lock: it passes the lock on as fd 9 with
# _EASYSCALE_LAB_LOCKED set to the lab dir, and lab-down then uses that lock as is.
lab_lock() {
	mkdir -p "$LAB_DIR"
	if [ "${_EASYSCALE_LAB_LOCKED:-}" = "$LAB_DIR" ] && { true >&9; } 2>/dev/null; then
		return 0
	fi
	exec 9>"$LAB_DIR/lab.lock"
	flock -w 300 9 || die "could not lock $LAB_DIR/lab.lock within 300 s"
}

# comm_for NAME: the /proc/PID/comm a recorded daemon must have (guards against PID reuse)
comm_for() {
	case "$1" in
		slurmd-*) echo slurmd ;;
		*) echo "$1" ;;
	esac
}
# alive NAME PID: PID runs the expected program and is not a zombie (PID 1 here reaps late)
alive() {
	local pid=$2
	[ -n "$pid" ] && [ -r "/proc/$pid/status" ] || return 1
	grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(comm_for "$1")" ]
}
# starting PID: PID is still exec'ing its way to the daemon, not a zombie: spawn forks bash
# (redirections), which execs setsid, which execs setpriv, which execs the daemon, and
# /proc/PID/comm names each in turn (CI once caught munged's PID still as bash, 0.4 s in)
starting() {
	local pid=$1
	[ -n "$pid" ] && [ -r "/proc/$pid/status" ] || return 1
	grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && return 1
	case "$(cat "/proc/$pid/comm" 2>/dev/null)" in bash | setsid | setpriv) return 0 ;; esac
	return 1
}
all_alive() {
	[ -s "$PIDS" ] || return 1
	local name pid
	while read -r name pid; do alive "$name" "$pid" || starting "$pid" || return 1; done <"$PIDS"
}
ctld_up() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }
# nodes_in STATE-REGEX: how many nodes sinfo shows in a state matching the regex
nodes_in() {
	timeout 10 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | awk -v re="$1" '$2 ~ re {c++} END {print c+0}'
}

# The current lab's root and mount namespace (EASYSCALE_LAB_CURRENT=1): see current-lib.sh.
# shellcheck source=tests/lab/current-lib.sh
[ "$LAB_CURRENT" != 1 ] || . "$LAB_ROOT/tests/lab/current-lib.sh"
