#!/usr/bin/env bash
# current-root.sh - make (once) and print the path of a Debian 13 "trixie" root with the
# current packages the second lab runs on: Slurm 24.11 (daemons, clients, slurmdbd,
# libslurm-dev for the SPANK header), munge, MariaDB, Python 3.13 with torch 2.6, and the
# build tools for the SPANK plugin. tests/lab/lab-up.sh runs the lab inside it when
# EASYSCALE_LAB_CURRENT=1 (tests/lab/README.md, "The current lab").
#
#   root=$(tests/lab/current-root.sh)     # stdout: the root's path; progress on stderr
#
# The root is cached outside the work tree, under $EASYSCALE_LAB_CACHE (default
# /var/cache/easyscale), in a folder named for a hash of everything that goes into it
# (suite, mirror, package list, the setup steps' version): changing the list makes a new
# root next to the old one; `EASYSCALE_LAB_CACHE_KEEP=0` (the default) removes older roots
# once the new one is complete. Built into a temporary folder and renamed when complete,
# under a lock, so an interrupted build is never used and two callers build once.
# Settings (environment), all optional:
#   EASYSCALE_LAB_CACHE        /var/cache/easyscale   where roots are kept
#   EASYSCALE_LAB_MIRROR       http://deb.debian.org/debian
#   EASYSCALE_LAB_CACHE_KEEP   0                      1: keep roots of older package lists
set -Eeuo pipefail
LAB_SCRIPT=current-root
T0=$EPOCHREALTIME
elapsed() {
	local now=${EPOCHREALTIME/[.,]/} t0=${T0/[.,]/}
	local us=$((now - t0))
	printf '%d.%02d' $((us / 1000000)) $((us % 1000000 / 10000))
}
log() { printf '[%s %5.2fs] %s\n' "$LAB_SCRIPT" "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

SUITE=trixie
MIRROR=${EASYSCALE_LAB_MIRROR:-http://deb.debian.org/debian}
CACHE=${EASYSCALE_LAB_CACHE:-/var/cache/easyscale}
# Bump when a setup step below changes what the root holds (the hash then changes).
SETUP_VERSION=1
# What the current lab and its tests need inside the root. Always --no-install-recommends
# (slurm-wlm's recommends pull hundreds of MB). Changing this list rebuilds the root.
PKGS=(
	# Slurm 24.11: daemons, clients, accounting, SPANK header (slurm/spank.h)
	slurmctld slurmd slurm-client slurmdbd libslurm-dev
	# auth and the accounting database
	munge mariadb-server mariadb-client
	# lab-up.sh: setpriv, flock, mknod, hostname, ps
	util-linux coreutils hostname procps
	# the SPANK plugin is built against 24.11's headers with gcc
	gcc libc6-dev make
	# the torch engine: Python 3.13, torch 2.6 (CPU), nothing from PyPI
	python3 python3-torch python3-torchvision python3-numpy
	# tests/e2e: sqlite3 shell, network namespaces
	sqlite3 iproute2
	ca-certificates
)

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
key=$(printf '%s\n' "$SUITE" "$MIRROR" "$SETUP_VERSION" "${PKGS[@]}" | sha256sum | cut -c1-12)
ROOT=$CACHE/$SUITE-$key
if [ -f "$ROOT/.easyscale-root-complete" ]; then
	log "cached: $ROOT"
	echo "$ROOT"
	exit 0
fi

mkdir -p "$CACHE"
exec 8>"$CACHE/.$SUITE.lock"
flock -w 3600 8 || die "could not lock $CACHE/.$SUITE.lock within an hour"
if [ -f "$ROOT/.easyscale-root-complete" ]; then
	log "built by another caller meanwhile: $ROOT"
	echo "$ROOT"
	exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1 || [ ! -e "/usr/share/debootstrap/scripts/$SUITE" ]; then
	log "installing debootstrap on the host"
	APTLOG=$CACHE/apt-host.log bash "$(dirname "${BASH_SOURCE[0]}")/../../.ci/install-deps.sh" debootstrap debian-archive-keyring
fi

TMP=$ROOT.tmp
# a build interrupted earlier: its mounts first (only our own, below $TMP), then the files
umount_below() {
	local m
	for m in $(awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}
umount_below "$TMP"
rm -rf --one-file-system "$TMP"
mkdir -p "$TMP"
trap 'umount_below "$TMP"' EXIT

log "debootstrap $SUITE (minbase) into $TMP"
debootstrap --variant=minbase "$SUITE" "$TMP" "$MIRROR" >"$CACHE/debootstrap-$key.log" 2>&1 ||
	{ tail -n 20 "$CACHE/debootstrap-$key.log" >&2; die "debootstrap failed, see $CACHE/debootstrap-$key.log"; }
log "debootstrap done"

# package scripts must not start daemons (the lab starts its own); no docs or man pages
printf '#!/bin/sh\nexit 101\n' >"$TMP/usr/sbin/policy-rc.d"
chmod 755 "$TMP/usr/sbin/policy-rc.d"
cat >"$TMP/etc/dpkg/dpkg.cfg.d/01-easyscale-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cp /etc/resolv.conf "$TMP/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$TMP/proc"
mount --rbind /dev "$TMP/dev"
mount --make-rslave "$TMP/dev"
in_root() { chroot "$TMP" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
log "installing ${#PKGS[@]} packages in the root"
in_root apt-get -q update >"$CACHE/apt-$key.log" 2>&1 &&
	in_root apt-get -q install -y --no-install-recommends "${PKGS[@]}" >>"$CACHE/apt-$key.log" 2>&1 ||
	{ tail -n 30 "$CACHE/apt-$key.log" >&2; die "apt-get in the root failed, see $CACHE/apt-$key.log"; }
in_root apt-get clean
[ -s "$TMP/etc/munge/munge.key" ] || in_root mungekey --create --keyfile=/etc/munge/munge.key
chown "$(in_root id -u munge):$(in_root id -g munge)" "$TMP/etc/munge/munge.key"
chmod 0600 "$TMP/etc/munge/munge.key"
umount_below "$TMP"
trap - EXIT

in_root dpkg-query -W -f='${Package} ${Version}\n' >"$TMP/.easyscale-packages"
log "$(grep -E '^(slurmctld|slurmdbd|mariadb-server|munge|python3|python3-torch) ' "$TMP/.easyscale-packages" | tr '\n' ' ')"
du -sh "$TMP" 2>/dev/null | awk '{print "size " $1}' | while read -r l; do log "$l"; done
date -u +%FT%TZ >"$TMP/.easyscale-root-complete"
mv "$TMP" "$ROOT"
if [ "${EASYSCALE_LAB_CACHE_KEEP:-0}" != 1 ]; then
	for old in "$CACHE/$SUITE"-*; do
		[ "$old" != "$ROOT" ] && [ -d "$old" ] || continue
		# a root a running lab still uses (a process chrooted into it, or a lab's overlay on it
		# in some mount namespace): leave it
		in_use=0
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/root" 2>/dev/null)" != "$old" ] || { in_use=1; break; }
			! grep -qF "lowerdir=$old," "$p/mountinfo" 2>/dev/null || { in_use=1; break; }
		done
		[ "$in_use" = 0 ] || { log "older root still in use, kept: $old"; continue; }
		log "removing the root of an older package list: $old"
		rm -rf --one-file-system "$old"
	done
fi
log "root ready: $ROOT"
echo "$ROOT"
