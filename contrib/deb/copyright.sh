#!/usr/bin/env bash
# copyright.sh BIN - print the package's copyright file (Debian's machine-readable format,
# https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/): the project, the Go
# standard library, and every Go module linked into the programs in BIN (as `go version -m`
# lists them), each with the full text of the licence files its module ships. A linked module
# whose licence file cannot be found in the module cache is an error. Run by build.sh.
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=$1
die() { echo "contrib/deb/copyright.sh: $*" >&2; exit 1; }

# text FILE: the file as a copyright-format text field (one space in; blank lines " ."),
# in UTF-8 (a file that is not, such as freetype's ftl.txt, is read as Latin-1)
text() {
	if iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1; then cat "$1"; else iconv -f LATIN1 -t UTF-8 "$1"; fi |
		sed -e 's/[[:space:]]*$//' -e 's/^$/./' -e 's/^/ /'
}

# licence FILES...: a short name for the licence of a module whose licence files are FILES
# (the first is its main one: LICENSE sorts before LICENSE-SIL and licenses/), as the format
# spells it; "other" when none of these (the full text follows anyway)
licence() {
	local main name
	main=$(cat "$1")
	case "$main" in
	*"FreeType License"*) name="FTL or GPL-2+" ;;
	*"Apache License"*"Version 2.0"*) name=Apache-2.0 ;;
	*"Mozilla Public License"*"2.0"*) name=MPL-2.0 ;;
	*"Creative Commons Attribution 4.0"*) name=CC-BY-4.0 ;;
	*"Permission is hereby granted, free of charge"*) name=Expat ;;
	*"Redistribution and use in source and binary forms"*"Neither the name"* | \
		*"Redistribution and use in source and binary forms"*"names of its contributors"*) name=BSD-3-clause ;;
	*"Redistribution and use in source and binary forms"*) name=BSD-2-clause ;;
	*) name=other ;;
	esac
	if [ $# -gt 1 ] && grep -qi 'SIL OPEN FONT LICENSE' "${@:2}"; then name="$name and OFL-1.1"; fi
	echo "$name"
}

# common_licence FILE: print the name under /usr/share/common-licenses of a licence FILE
# holds verbatim (Debian policy 12.5: those are referred to, not copied); fails otherwise
common_licence() {
	if grep -q 'Apache License' "$1" && grep -q 'Version 2.0, January 2004' "$1" &&
		grep -q 'TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION' "$1"; then
		echo Apache-2.0
	elif grep -q 'GNU GENERAL PUBLIC LICENSE' "$1" && grep -q 'Version 2, June 1991' "$1"; then
		echo GPL-2
	else
		return 1
	fi
}

cat <<'HEAD'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: easyscale-slurm
Comment: The programs are statically linked Go binaries: besides the project's own
 code they hold the Go standard library and the Go modules listed below, at the
 versions given, each under the licence its module ships (reproduced in full).

Files: *
Copyright: the EasyScale for Slurm authors
License: other
 The source repository states no licence. Ask the authors before
 redistributing this package.

HEAD
goroot=$(go env GOROOT)
echo "Files: Go standard library ($(go env GOVERSION)), linked into every program"
echo "Copyright: The Go Authors"
echo "License: $(licence "$goroot/LICENSE")"
text "$goroot/LICENSE"
echo

declare -A dir
while read -r path version d; do
	[ -n "$d" ] && dir["$path@$version"]=$d
done < <(go list -m -f '{{.Path}} {{.Version}} {{.Dir}}' all)

mods=$(for f in "$BIN"/easyscale*; do
	[ -f "$f" ] && [[ $f != *.so ]] || continue
	go version -m "$f" 2>/dev/null | awk '$1 == "dep" {print $2 "@" $3}'
done | sort -u)
[ -n "$mods" ] || die "no Go module found in $BIN's programs (go version -m)"
for m in $mods; do
	d=${dir[$m]:-}
	[ -n "$d" ] || die "$m: not in the module cache (go mod download)"
	mapfile -t files < <(find "$d" -maxdepth 2 -type f \( -iname 'LICENSE*' -o -iname 'COPYING*' -o -iname 'NOTICE*' -o -path "$d/licenses/*" \) | LC_ALL=C sort)
	[ ${#files[@]} -gt 0 ] || die "$m: no licence file in $d"
	echo "Files: Go module ${m%@*} ${m#*@}"
	echo "Copyright: see the licence text"
	echo "License: $(licence "${files[@]}")"
	if [ "${m%@*}" = github.com/mattn/go-sqlite3 ]; then
		echo " The module embeds the SQLite amalgamation (sqlite3-binding.c), which is in the public domain."
		echo " ."
	fi
	for f in "${files[@]}"; do
		echo " ${f#"$d"/}:"
		echo " ."
		if common=$(common_licence "$f"); then
			echo " The $common licence; on Debian systems its full text is in"
			echo " /usr/share/common-licenses/$common."
		else
			text "$f"
		fi
		echo " ."
	done
	echo
done
