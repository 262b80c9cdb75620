#!/usr/bin/env bash
# Cross-architecture bit-equality checks for the deterministic engine.
#
# The golden-bits tests of runtime/detmath and runtime/engine hash results
# over fixed inputs and compare with testdata/ files produced on amd64. This
# script runs them as amd64 GOAMD64=v1, amd64 GOAMD64=v3 (AVX2+FMA code
# generation: catches any multiply-add the compiler could fuse) and arm64
# under qemu user emulation (arm64 always fuses x*y+z unless a conversion
# rounds the product). It also scans the compiled code of these packages (and
# runtime/vecf32, the reduction kernels) for
# fused multiply-add instructions.
#
# Usage: tests/crossarch/run.sh [check|fma|golden|build-arm64]...
#   check        fma + golden (the default; what CI runs)
#   fma          fail if detmath or engine compile to FMADD/FMSUB/VFMADD…
#   golden       run -run Golden under amd64 v1, amd64 v3 and emulated arm64
#   build-arm64  cross-build the cgo binaries ./runtime/cmd/... into
#                bin/arm64/ (see build_arm64 below for how to run them)
#
# Needs Debian's qemu-user-static and gcc-aarch64-linux-gnu; installs them
# with apt-get when missing (as root, or through sudo).
set -euo pipefail

cd "$(dirname "$0")/../.."
PKGS=(./runtime/detmath/ ./runtime/engine/ ./runtime/vecf32/)

log() { echo "crossarch: $*" >&2; }

ensure_packages() {
	local missing=()
	command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
	command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	log "installing ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# check_fma fails when the compiler emitted a fused multiply-add anywhere in
# the deterministic packages, for arm64 or for amd64 v3.
check_fma() {
	local arm amd out
	arm=$(CGO_ENABLED=0 GOARCH=arm64 go build -gcflags=-S "${PKGS[@]}" 2>&1)
	amd=$(CGO_ENABLED=0 GOARCH=amd64 GOAMD64=v3 go build -gcflags=-S "${PKGS[@]}" 2>&1)
	# The listing must contain float multiplies, or the scan would pass vacuously.
	if ! grep -qE '\sFMUL[SD]\s' <<<"$arm" || ! grep -qE '\sMULS[SD]\s' <<<"$amd"; then
		log "fma: no assembly listing from go build -gcflags=-S"
		return 1
	fi
	out=$(grep -E '\s(FN?M(ADD|SUB)[SD])\s' <<<"$arm" || true)
	out+=$'\n'$(grep -E '\sVFN?M(ADD|SUB)[0-9]*[SP][SD]\s' <<<"$amd" || true)
	if [ -n "${out//[[:space:]]/}" ]; then
		log "fused multiply-add found (wrap the product in float32(...)/float64(...)):"
		echo "$out" >&2
		return 1
	fi
	log "fma: no fused multiply-add in ${PKGS[*]} (arm64, amd64 v3)"
}

cpu_has_v3() { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo; }

run_golden() {
	log "golden: amd64 GOAMD64=v1"
	CGO_ENABLED=0 GOARCH=amd64 GOAMD64=v1 go test -count=1 "${PKGS[@]}" -run Golden
	if cpu_has_v3; then
		log "golden: amd64 GOAMD64=v3"
		CGO_ENABLED=0 GOARCH=amd64 GOAMD64=v3 go test -count=1 "${PKGS[@]}" -run Golden
	else
		log "golden: skipping GOAMD64=v3, this CPU lacks AVX2/FMA/BMI2"
	fi
	log "golden: arm64 under qemu-aarch64-static"
	CGO_ENABLED=0 GOARCH=arm64 go test -count=1 -exec qemu-aarch64-static "${PKGS[@]}" -run Golden
}

# build_arm64 cross-builds the cgo binaries (go-sqlite3 needs cgo) for
# arm64 into bin/arm64/. Run one on amd64 with the arm64 C library:
#   QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64-static bin/arm64/easyscale run --config examples/mnist/job.toml --steps 5
# (binfmt_misc is not needed: qemu-aarch64-static is called directly).
build_arm64() {
	mkdir -p bin/arm64
	CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc GOOS=linux GOARCH=arm64 go build -o bin/arm64/ ./runtime/cmd/...
	log "built $(ls bin/arm64 | tr '\n' ' ')into bin/arm64/"
}

main() {
	[ $# -gt 0 ] || set -- check
	ensure_packages
	for step in "$@"; do
		case "$step" in
		check) check_fma && run_golden ;;
		fma) check_fma ;;
		golden) run_golden ;;
		build-arm64) build_arm64 ;;
		*)
			log "unknown step '$step' (want check, fma, golden or build-arm64)"
			exit 2
			;;
		esac
	done
}

main "$@"
