#!/usr/bin/env bash
# build.sh - make the easyscale Debian package with dpkg-deb (make deb; docs/deploy.md).
#
#   bash contrib/deb/build.sh --bin DIR --spank DIR --version V --out DIR
#
# --bin    the programs built with PREFIX=/usr (make build BIN=DIR PREFIX=/usr) and their
#          man pages in DIR/man (internal/manpage/mkman)
# --spank  the SPANK plugin built against the target Slurm's spank.h: DIR/easyscale_spank.so
#          and DIR/easyscale_spank.slurm-version (spank/spank.mk writes both); the package
#          depends on that Slurm series, for Slurm loads a plugin only on its own version
# --version the upstream version; the package's is V+slurmMAJOR.MINOR-1
# DEB_MAINTAINER  "Name <address>" for the control file and changelog (default: git's
#          user.name and user.email, as dch takes DEBEMAIL)
# --out    where easyscale_VERSION_ARCH.deb is written (its path is printed)
#
# The package holds the programs, the plugin and its plugstack.conf.d line, the daemon's
# systemd unit, its configuration (conffile), man pages, the Python package (the torch
# side, importable by python3), examples, and a copyright file naming every Go module
# linked into the programs with its licence text. Files are owned by root (dpkg-deb
# --root-owner-group): no fakeroot. Checks as lintian would: every program in --bin is
# placed and has a man page, every ELF file links only libc (Depends: libc6 (>= the newest
# GLIBC_ symbol version any of them needs)), every linked module has a licence file.
set -Eeuo pipefail
die() { echo "contrib/deb/build.sh: $*" >&2; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$PWD

BIN= SPANK= VERSION= OUT=
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN=$2; shift 2 ;;
	--spank) SPANK=$2; shift 2 ;;
	--version) VERSION=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) die "unknown argument $1" ;;
	esac
done
[ -n "$BIN" ] && [ -n "$SPANK" ] && [ -n "$VERSION" ] && [ -n "$OUT" ] || die "usage: --bin DIR --spank DIR --version V --out DIR"
[ -f "$SPANK/easyscale_spank.so" ] || die "no $SPANK/easyscale_spank.so: build the plugin against the target Slurm (make spank-plugin)"
[ -s "$SPANK/easyscale_spank.slurm-version" ] || die "no $SPANK/easyscale_spank.slurm-version (written by make spank-plugin)"
slurm=$(cat "$SPANK/easyscale_spank.slurm-version")
series=$(cut -d. -f1,2 <<<"$slurm")
[[ $series =~ ^[0-9]+\.[0-9]+$ ]] || die "cannot read the Slurm series from $SPANK/easyscale_spank.slurm-version ($slurm)"
major=${series%.*} minor=$((10#${series#*.}))
# the next series, the first the plugin cannot load on: 24.11 -> 24.12, 22.05 -> 22.06
next="$major.$(printf '%02d' $((minor + 1)))"

ARCH=$(dpkg --print-architecture)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
SPANKDIR=/usr/lib/$MULTIARCH/slurm-wlm
# a Debian revision: built from the upstream tree by this script, not a native package
DEBVERSION=$VERSION+slurm$series-1
[[ $DEBVERSION =~ ^[0-9][A-Za-z0-9.+~]*-1$ ]] || die "not a Debian version: $DEBVERSION"
MAINTAINER=${DEB_MAINTAINER:-$(git config user.name) <$(git config user.email)>}
[[ $MAINTAINER =~ ^[^\<]+\ \<[^@\>]+@[^\>]+\>$ ]] || die "DEB_MAINTAINER (or git's user.name and user.email) must read 'Name <address>', not '$MAINTAINER'"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/easyscale-deb.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
R=$STAGE/root
umask 022
inst() { # inst MODE SRC DEST
	install -D -m "$1" "$2" "$R$3"
}

# ---------------------------------------------------------------- programs
declare -A place=(
	[easyscale]=/usr/bin [easyscale-plot]=/usr/bin [easyscale-sbatch]=/usr/bin
	[easyscale-simulate]=/usr/bin [easyscale-backfilld]=/usr/sbin
	[easyscale-gpuctx]=/usr/libexec/easyscale
)
for f in "$BIN"/easyscale*; do
	[ -f "$f" ] && [ -x "$f" ] && [[ $f != *.so ]] || continue
	name=$(basename "$f")
	[ -n "${place[$name]:-}" ] || die "$f: no place in the package for it (add it to build.sh's place table)"
done
for name in "${!place[@]}"; do
	[ -x "$BIN/$name" ] || die "$BIN/$name missing (make build BIN=$BIN PREFIX=/usr)"
	inst 0755 "$BIN/$name" "${place[$name]}/$name"
	# the runtime looks for data sets under the prefix stamped at build time
	if [ "$name" = easyscale ] && ! grep -aq /usr/share/easyscale/data "$BIN/$name"; then
		die "$BIN/easyscale was not built with PREFIX=/usr (its data set directory is not /usr/share/easyscale/data)"
	fi
done
inst 0644 "$SPANK/easyscale_spank.so" "$SPANKDIR/easyscale_spank.so"

# ---------------------------------------------------------------- configuration
sed "s|@SPANKDIR@|$SPANKDIR|" contrib/deb/plugstack.conf >"$STAGE/plugstack.conf"
inst 0644 "$STAGE/plugstack.conf" /etc/slurm/plugstack.conf.d/easyscale.conf
inst 0644 contrib/backfill.toml /etc/easyscale/backfill.toml
sed 's|/usr/local/bin/easyscale-backfilld|/usr/sbin/easyscale-backfilld|' \
	contrib/systemd/easyscale-backfilld.service >"$STAGE/unit"
grep -q '^ExecStart=/usr/sbin/easyscale-backfilld ' "$STAGE/unit" || die "the unit's ExecStart was not rewritten"
inst 0644 "$STAGE/unit" /usr/lib/systemd/system/easyscale-backfilld.service

# ---------------------------------------------------------------- man pages
for page in "$BIN"/man/man[18]/*.[18] contrib/man/easyscale-spank.8; do
	[ -f "$page" ] || die "no man pages in $BIN/man (go run ./internal/manpage/mkman)"
	sec=${page##*.}
	install -d "$R/usr/share/man/man$sec"
	gzip -9n <"$page" >"$R/usr/share/man/man$sec/$(basename "$page").gz"
	chmod 0644 "$R/usr/share/man/man$sec/$(basename "$page").gz"
done
for name in "${!place[@]}"; do
	ls "$R"/usr/share/man/man[18]/"$name".[18].gz >/dev/null 2>&1 || die "no man page for $name"
done

# ---------------------------------------------------------------- Python package
PY=/usr/lib/python3/dist-packages/easyscale
for f in runtime/torchengine/python/easyscale/*.py; do inst 0644 "$f" "$PY/$(basename "$f")"; done

# ---------------------------------------------------------------- documentation
DOC=/usr/share/doc/easyscale
inst 0644 docs/deploy.md $DOC/deploy.md
for f in contrib/backfill.toml contrib/slurm/slurm.conf.fragment contrib/slurm/gres.conf.fragment; do
	inst 0644 "$f" "$DOC/examples/$(basename "$f")"
done
inst 0644 "$STAGE/plugstack.conf" $DOC/examples/plugstack.conf
{
	echo "easyscale ($DEBVERSION) unstable; urgency=medium"
	echo
	echo "  * Built from $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo 'an unknown commit') for Slurm $series"
	echo "    (the SPANK plugin was built against Slurm $slurm's spank.h)."
	echo
	echo " -- $MAINTAINER  $(date -R -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}")"
} | gzip -9n >"$R$DOC/changelog.Debian.gz"
chmod 0644 "$R$DOC/changelog.Debian.gz"
bash contrib/deb/copyright.sh "$BIN" >"$R$DOC/copyright"
chmod 0644 "$R$DOC/copyright"

# ---------------------------------------------------------------- what it links
# ELF files stripped as dh_strip does (Go keeps its build information, which go version
# -m reads, in a section of its own), then their libraries and glibc versions read
glibc=
while IFS= read -r -d '' f; do
	[ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
	strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
	needed=$(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}')
	for n in $needed; do
		case "$n" in libc.so.6 | ld-linux*) ;; *) die "$f links $n: add its package to Depends" ;; esac
	done
	v=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n1)
	glibc=$(printf '%s\n%s\n' "$glibc" "$v" | sed '/^$/d' | sort -V | tail -n1)
done < <(find "$R" -type f -print0)
[ -n "$glibc" ] || die "no GLIBC_ symbol version found in the programs"

# ---------------------------------------------------------------- control
install -d -m 0755 "$R/DEBIAN"
size=$(du -sk --apparent-size "$R" | cut -f1)
cat >"$R/DEBIAN/control" <<CONTROL
Package: easyscale
Version: $DEBVERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $size
Depends: libc6 (>= $glibc), python3, slurm-wlm-basic-plugins (>= $series~), slurm-wlm-basic-plugins (<< $next~)
Recommends: slurm-client, python3-torch
Suggests: slurmd, slurmctld
Section: science
Priority: optional
Homepage: https://arxiv.org/abs/2208.14228
Description: elastic, accuracy-consistent deep-learning training on Slurm
 EasyScale runs a training job with a fixed number of logical workers on
 however many GPUs or CPU slots Slurm lends it, from its minimum to its
 maximum, and the trained model is bit-identical to the run with one
 physical worker per logical worker.
 .
 This package holds the runtime (easyscale), the sbatch wrapper
 (easyscale-sbatch), the SPANK plugin for Slurm $series (srun/sbatch
 --elastic) and its GPU helper, the backfill daemon that lends idle GPUs to
 elastic jobs (easyscale-backfilld, a systemd unit, not enabled), the trace
 simulator, and the Python package easyscale for PyTorch jobs.
CONTROL
printf '%s\n' /etc/easyscale/backfill.toml /etc/slurm/plugstack.conf.d/easyscale.conf >"$R/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "contrib/deb/$s" "$R/DEBIAN/$s"; done
(cd "$R" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$R/DEBIAN/md5sums"
chmod 0644 "$R/DEBIAN/control" "$R/DEBIAN/conffiles" "$R/DEBIAN/md5sums"

mkdir -p "$OUT"
deb=$OUT/easyscale_${DEBVERSION}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$R" "$deb" >/dev/null
echo "$deb"
