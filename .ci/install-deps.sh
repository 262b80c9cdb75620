#!/usr/bin/env bash
# install-deps.sh - install the Debian packages the test suite needs. Idempotent and
# quiet: packages already installed are skipped, `apt-get update` runs only when
# something is missing, and apt's output goes to a log that is printed on failure.
#
#   bash .ci/install-deps.sh            # the whole suite's packages (as root; CI runs as root)
#   bash .ci/install-deps.sh PKG...     # only these (tests/lab/lab-up.sh uses this)
#
# Add a package by appending it to PKGS with a comment saying who needs it.
# Always --no-install-recommends: slurm-wlm's recommends drag in hundreds of MB.
# Never add slurm-wlm-emulator: it flips /usr/sbin/slurmd and slurmctld to a
# front-end build that cannot run the lab (shared/slurm-lab/NOTES.md §1, §3a).
set -Eeuo pipefail

PKGS=(
	# tests/lab (real Slurm 22.05 lab cluster): daemons, clients, SPANK header, auth
	slurmctld slurmd slurm-client munge libslurm-dev
	# tests/lab accounting (repeated resizes and comment updates need slurmdbd)
	slurmdbd mariadb-server
	# tests/lab: setpriv, flock, mknod
	util-linux coreutils
	# the C SPANK plugin is built with gcc
	gcc libc6-dev
	# tests/e2e: two nodes as network namespaces (ip netns, veth)
	iproute2
	# tests/e2e: the sqlite3 shell changes state.db rows behind easyscale's back
	sqlite3
	# tests/crossarch: arm64 emulation and the arm64 C toolchain for the cgo binary
	qemu-user-static gcc-aarch64-linux-gnu libc6-dev-arm64-cross
	# make (the README's commands)
	make
	# the PyTorch engine (runtime/torchengine): torch 1.13 for /usr/bin/python3, nothing from PyPI
	python3-torch python3-torchvision python3-numpy
	# make test-current: the current lab's Debian 13 root (tests/lab/current-root.sh)
	debootstrap debian-archive-keyring
)

if [ $# -gt 0 ]; then PKGS=("$@"); fi

log() { printf '[install-deps] %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
	log "not root: cannot install; checking only"
fi

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
[ "$(id -u)" = 0 ] || { log "missing packages: ${missing[*]} (run as root)"; exit 1; }

APTLOG=${APTLOG:-$(mktemp /tmp/install-deps.XXXXXX.log)}
# Keep package maintainer scripts from starting daemons (there is no init system
# here; the lab starts its own). Only add the policy file if none exists.
made_policy=0
cleanup() { if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	made_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
# other engineers / jobs may run apt at the same time: wait for the dpkg lock
APT=(apt-get -q -o DPkg::Lock::Timeout=300)
log "installing: ${missing[*]}"
# update only when a package is unknown or its candidate cannot be fetched
if ! "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >"$APTLOG" 2>&1; then
	"${APT[@]}" update >>"$APTLOG" 2>&1 || { log "apt-get update failed:"; tail -n 20 "$APTLOG" >&2; exit 1; }
	if ! "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >>"$APTLOG" 2>&1; then
		log "apt-get install failed:"
		tail -n 30 "$APTLOG" >&2
		exit 1
	fi
fi
log "installed ${#missing[@]} package(s); log: $APTLOG"
