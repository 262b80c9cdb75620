# current-lib.sh - the current lab (EASYSCALE_LAB_CURRENT=1): lab-up.sh and lab-down.sh run
# themselves again inside a Debian 13 root (current-root.sh: Slurm 24.11, MariaDB 11.8,
# Python 3.13, torch 2.6), so the lab's configs and daemons come from the same code as the
# 22.05 lab's. Sourced by lib.sh, not run.
#
# The root is entered through a private mount namespace held by one process, the holder
# (`sleep infinity`, chrooted into the root; its PID, the root it sees and the cached root in
# $RUN/root.pid). In that namespace, and only there, the cached root is the lower layer of an
# overlay whose upper layer is this lab's ($LAB_DIR/root/<cached root's name>/upper, kept
# until a purge): what the lab writes in the root (the easyscale package that
# lab-current-smoke installs, the daemons' files) stays in this lab, and the cached root,
# which other labs and work trees run on at the same time, is never written. The overlay is a
# mount point, as ip netns needs, and gets /proc, /sys, /dev, a /run of its own, the host's
# /tmp and /etc/hosts, the lab dir and this work tree at their own paths: the lab's paths
# (SLURM_CONF, EASYSCALE_LAB_DIR, the SPANK plugin) are the same inside and outside, and
# nothing is mounted on the host, so no lab-down or rm -rf can reach the host's /tmp or the
# cached root through a bind mount. The namespace ends when the holder and every daemon in it
# have exited. The daemons share the host's network and PID namespaces: they listen on
# 127.0.0.1 like the 22.05 lab's, and lab-down stops them by PID from either side.
#
#   $EASYSCALE_LAB_DIR/bin/lab-exec CMD...   runs CMD in the root (the 24.11 clients: sinfo,
#                                            squeue, sbatch, ...; test binaries built on the
#                                            host) with the lab's SLURM_CONF

ROOT_PIDFILE=$RUN/root.pid
# PATH inside the root: Debian's, no host toolchains
ROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# in_current_root: this script already runs inside the root
in_current_root() { [ "${_EASYSCALE_LAB_IN_ROOT:-}" = 1 ]; }

# current_holder [ROOT]: print the holder's PID when it runs (on the cached root ROOT, when given)
current_holder() {
	local pid root lower
	[ -s "$ROOT_PIDFILE" ] || return 1
	read -r pid root lower <"$ROOT_PIDFILE"
	[ -n "$pid" ] && [ -n "$lower" ] && [ -r "/proc/$pid/status" ] || return 1
	grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] || return 1
	[ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] || return 1
	[ -z "${1:-}" ] || [ "$lower" = "$1" ] || return 1
	echo "$pid"
}

# current_overlay ROOT: print the directory of this lab's overlay of the cached root ROOT
# (upper/, work/, merged/), removing those of other cached roots (an older package list)
current_overlay() {
	local base=$LAB_DIR/root dir
	dir=$base/$(basename "$1")
	mkdir -p "$dir/upper" "$dir/work" "$dir/merged"
	for old in "$base"/*; do
		[ "$old" = "$dir" ] || rm -rf --one-file-system "$old"
	done
	echo "$dir"
}

# current_holder_start ROOT: start the holder (setting up the namespace's mounts: this
# lab's overlay on the cached root ROOT) and wait until it has chrooted into the overlay
current_holder_start() {
	local lower=$1 ovl root pid
	mkdir -p "$RUN" "$LOG"
	ovl=$(current_overlay "$lower")
	root=$ovl/merged
	# shellcheck disable=SC2016
	setsid unshare --mount --propagation private -- bash -c '
		set -eu
		root=$1 lab=$2 repo=$3 lower=$4 ovl=$5
		# the overlay is the root, and a mount point: "ip netns exec" and "ip -n" (tests/e2e)
		# remount "/" as a slave in a new mount namespace, which fails with EINVAL when "/" is no
		# mount point
		mount -t overlay overlay -o "lowerdir=$lower,upperdir=$ovl/upper,workdir=$ovl/work" "$root"
		mount -t proc proc "$root/proc"
		mount --rbind /sys "$root/sys"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs -o mode=0755 tmpfs "$root/run"
		mount --bind /tmp "$root/tmp"
		[ ! -f "$root/etc/hosts" ] || mount --bind /etc/hosts "$root/etc/hosts"
		for d in "$lab" "$repo"; do
			case "$d" in /tmp/*) continue ;; esac
			mkdir -p "$root$d"
			mount --bind "$d" "$root$d"
		done
		exec chroot "$root" /bin/sleep infinity
	' holder "$root" "$LAB_DIR" "$LAB_ROOT" "$lower" "$ovl" </dev/null >>"$LOG/root-holder.out" 2>&1 9>&- &
	pid=$!
	echo "$pid $root $lower" >"$ROOT_PIDFILE"
	local end=$((SECONDS + 10))
	until current_holder "$lower" >/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 5 "$LOG/root-holder.out" >&2 || true
			die "the root's namespace holder (pid $pid) died"
		fi
		[ "$SECONDS" -lt "$end" ] || die "the root's namespace holder (pid $pid) not ready in 10 s"
		sleep 0.05
	done
	log "root namespace held by pid $pid (this lab's overlay $root of $lower)"
}

# current_holder_stop: end the holder (the namespace goes when the last daemon in it has gone)
current_holder_stop() {
	local pid
	if pid=$(current_holder); then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do current_holder >/dev/null || break; sleep 0.1; done
		log "stopped the root's namespace holder ($pid)"
	fi
	rm -f "$ROOT_PIDFILE"
}

# current_enter PID CMD...: run CMD in PID's namespace and root, in the caller's working
# directory when the root has it (else /), with the root's PATH and the lab lock (fd 9)
current_enter() {
	local pid=$1
	shift
	nsenter --target "$pid" --mount --root --wd -- /usr/bin/env -u LD_LIBRARY_PATH -u LD_PRELOAD \
		PATH="$ROOT_PATH" /bin/bash -c 'cd -- "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@"
}

# current_write_lab_exec: $BIN/lab-exec, the way into the running lab's root from the host
current_write_lab_exec() {
	mkdir -p "$BIN"
	cat >"$BIN/lab-exec.tmp" <<EOF
#!/bin/sh
# generated by tests/lab/lab-up.sh (EASYSCALE_LAB_CURRENT=1): run a command in the current
# lab's Debian 13 root (Slurm 24.11 clients) with the lab's SLURM_CONF, e.g. lab-exec sinfo;
# EASYSCALE_LAB_CURRENT=1 and _EASYSCALE_LAB_IN_ROOT=1 tell a test binary (internal/slurmlab)
# and tests/lab's scripts that they run in the root
[ \$# -gt 0 ] || { echo "usage: \$0 CMD [ARG...]" >&2; exit 2; }
read -r pid root _ <"$ROOT_PIDFILE" || { echo "lab-exec: the current lab at $LAB_DIR is not up" >&2; exit 1; }
[ "\$(readlink "/proc/\$pid/root" 2>/dev/null)" = "\$root" ] || { echo "lab-exec: the current lab at $LAB_DIR is not up" >&2; exit 1; }
exec nsenter --target "\$pid" --mount --root --wd -- /usr/bin/env -u LD_LIBRARY_PATH -u LD_PRELOAD \\
	PATH="$ROOT_PATH" SLURM_CONF="$CONF" EASYSCALE_LAB_DIR="$LAB_DIR" EASYSCALE_LAB_PORT_BASE="$LAB_PORT_BASE" \\
	EASYSCALE_LAB_CURRENT=1 _EASYSCALE_LAB_IN_ROOT=1 \\
	/bin/sh -c 'cd -- "\$0" 2>/dev/null || cd /; exec "\$@"' "\$PWD" "\$@"
EOF
	chmod 755 "$BIN/lab-exec.tmp"
	mv "$BIN/lab-exec.tmp" "$BIN/lab-exec"
}

# current_lab_up: from the host: make or find the root, hold its namespace, and run
# lab-up.sh again inside it, holding the lab lock throughout. Does not return.
current_lab_up() {
	local root pid
	root=$(bash "$LAB_ROOT/tests/lab/current-root.sh")
	if ! pid=$(current_holder "$root"); then
		if [ -s "$PIDS" ]; then
			[ "${EASYSCALE_LAB_JOIN:-0}" != 1 ] ||
				die "the current lab at $LAB_DIR is in use by other test processes (EASYSCALE_LAB_JOIN=1) but its root's namespace is gone: not restarting it under them"
			log "the root's namespace is gone or the root changed: restarting"
			_EASYSCALE_LAB_LOCKED=$LAB_DIR EASYSCALE_LAB_PURGE=0 EASYSCALE_LAB_DIR=$LAB_DIR \
				EASYSCALE_LAB_CURRENT=1 "$LAB_ROOT/tests/lab/lab-down.sh"
		fi
		current_holder_stop
		current_holder_start "$root"
		pid=$(current_holder "$root")
	fi
	current_write_lab_exec
	_EASYSCALE_LAB_IN_ROOT=1 _EASYSCALE_LAB_LOCKED=$LAB_DIR EASYSCALE_LAB_INSTALL=0 \
		EASYSCALE_LAB_DIR=$LAB_DIR EASYSCALE_LAB_PORT_BASE=$LAB_PORT_BASE \
		current_enter "$pid" bash "$LAB_ROOT/tests/lab/lab-up.sh"
	exit $?
}

# current_lab_down: from the host: run lab-down.sh inside the root while its namespace
# lives (the daemons' clients are there), then end the holder; the caller goes on with
# what is left (nothing recorded; stray slurmstepds; the purge).
current_lab_down() {
	local pid name
	if ! pid=$(current_holder); then
		# the holder is gone but daemons may live: their namespace is as good
		pid=
		if [ -s "$PIDS" ]; then
			while read -r name pid; do
				alive "$name" "$pid" && break
				pid=
			done <"$PIDS"
		fi
	fi
	if [ -n "$pid" ]; then
		_EASYSCALE_LAB_IN_ROOT=1 _EASYSCALE_LAB_LOCKED=$LAB_DIR EASYSCALE_LAB_PURGE=0 \
			EASYSCALE_LAB_DIR=$LAB_DIR EASYSCALE_LAB_PORT_BASE=$LAB_PORT_BASE \
			current_enter "$pid" bash "$LAB_ROOT/tests/lab/lab-down.sh" || log "lab-down inside the root failed"
	fi
	current_holder_stop
}
