#!/usr/bin/env bash
# The current-package suites (make test-current; .ci/run beside make test's, .ci/test-all.sh): the Slurm-facing
# Go tests on the current lab, Slurm 24.11 with Python 3.13 and torch 2.6 in a cached Debian
# 13 root (tests/lab/README.md, "The current lab"), and the torch engine's tests on that
# Python and torch. Installs what it needs on the host (debootstrap, the C toolchain cgo
# needs), makes or finds the root, builds bin/ and the test binaries here (the root has no
# Go toolchain; the binaries need only glibc, and the root's is newer), brings the current
# lab up, and runs each test binary in the root with the lab's lab-exec, in its package's
# directory, as `go test` would. Prints "slurm X.Y" and "torch X.Y" as found in the root.
# Exits 0 only when every suite passed.
#
#   bash .ci/test-current.sh               # every suite below
#   bash .ci/test-current.sh slurm e2e     # only these (names from SUITES)
#   EASYSCALE_CURRENT_E2E_RUN=PATTERN ...   tests/e2e's -test.run (default ^TestTorch); CI's short
#                                           form is tests/lab/README.md's (make test-current)
#   EASYSCALE_CURRENT_SLURM_RUN=PATTERN ... tests/slurm's -test.run (default: every test)
#   EASYSCALE_CURRENT_BACKFILL_RUN=PATTERN  tests/backfill's -test.run (default: every test)
#   EASYSCALE_CURRENT_TORCHENGINE_RUN=PATTERN runtime/torchengine's -test.run (default: the Python
#                                           package's unittests and the fork server's test under torch 2.x)
#
# EASYSCALE_CI_STAGE=prepare stops after the installs, the root and the builds; =tests runs only
# the lab and the suites (what prepare left must be there): .ci/test-all.sh runs the tests so,
# beside .ci/test.sh's. Unset: both.
#
# EASYSCALE_LAB=1 turns the lab tests on, as in make test; CI set makes a lab that cannot
# start fail them. A lab that was down is taken down at the end; one that was up (make
# lab-up) is left up. Runs next to the 22.05 lab of make test (own directory and ports).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
export EASYSCALE_LAB=1 EASYSCALE_LAB_CURRENT=1
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }

# name, package, test binary flags: each runs in the root, in the package's directory, one
# after the other, but slurm: it runs beside them on a current lab of its own
# (EASYSCALE_LAB_CURRENT_SLURM_DIR, default /tmp/easyscale-lab-current-slurm, port base
# EASYSCALE_LAB_CURRENT_SLURM_PORT_BASE, default 17900), as make test's tests/slurm does: it
# kills nodes, and on one lab the suites took each other's nodes (measured: the admit test's
# job never got both nodes, n3 drained under the hostile-job test). The last, package, is a
# script run on the host: make lab-current-smoke's checks, the Debian package (make deb for
# 24.11) installed with apt-get in the root included (docs/deploy.md); it comes last because
# it points the lab's plugstack line at the installed plugin.
SUITES=(
	"slurmlab ./internal/slurmlab"
	"spank ./spank/plugintest"
	"slurm ./tests/slurm -test.run ${EASYSCALE_CURRENT_SLURM_RUN:-.}"
	"backfill ./tests/backfill -test.run ${EASYSCALE_CURRENT_BACKFILL_RUN:-.}"
	"e2e ./tests/e2e -test.run ${EASYSCALE_CURRENT_E2E_RUN:-^TestTorch}"
	"torchengine ./runtime/torchengine -test.run ${EASYSCALE_CURRENT_TORCHENGINE_RUN:-^(TestPythonPackage|TestWorkersAreForksOfOneServerAndItsLossEndsThem)$}"
	"package tests/lab/current-smoke.sh"
)
want=("$@")
selected() {
	[ ${#want[@]} -eq 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

stage=${EASYSCALE_CI_STAGE:-all}
case "$stage" in all | prepare | tests) ;; *) echo "EASYSCALE_CI_STAGE must be prepare or tests, not $stage" >&2; exit 2 ;; esac
TB=bin/test-current
if [ "$stage" != tests ]; then
	step "installing host packages"
	# only what this needs on the host: the root (debootstrap), cgo (gcc), make, nsenter/unshare/flock
	bash .ci/install-deps.sh debootstrap debian-archive-keyring util-linux gcc libc6-dev make
	step "the Debian 13 root"
	bash tests/lab/current-root.sh >/dev/null
	step "downloading Go modules"
	go mod download
	step "building on the host"
	make -s build data
	mkdir -p "$TB"
	for s in "${SUITES[@]}"; do
		read -r name pkg _ <<<"$s"
		selected "$name" || continue
		[ "${pkg%.sh}" = "$pkg" ] || continue # a script
		go test -c -o "$TB/$name.test" "$pkg"
	done
fi
[ "$stage" != prepare ] || { step "prepared"; exit 0; }

# labup DIR PORT_BASE FD: brings the current lab at DIR up (one that was down is taken down at
# exit) and holds its users.lock shared on file descriptor FD while the suites run, so that no
# test process takes it down under the next suite. Sets X to the lab's lab-exec.
# At exit (the suites done, or a failure or signal before), a tests/slurm still running in the
# background is stopped with every process below it before the labs go down under it.
downs=()
slurm_pid=
killtree() {
	local c
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do killtree "$c"; done
	kill -TERM "$1" 2>/dev/null || true
}
finish() {
	local d
	if [ -n "$slurm_pid" ] && kill -0 "$slurm_pid" 2>/dev/null; then
		killtree "$slurm_pid"
		wait "$slurm_pid" 2>/dev/null || true
	fi
	[ -z "${slurm_log:-}" ] || rm -f "$slurm_log"
	for d in ${downs[@]+"${downs[@]}"}; do EASYSCALE_LAB_DIR=$d bash tests/lab/lab-down.sh || true; done
}
trap finish EXIT
labup() {
	local dir=$1 base=$2 fd=$3 exports
	# not eval "$(...)": its status would hide a lab-up that failed
	exports=$(EASYSCALE_LAB_DIR=$dir EASYSCALE_LAB_PORT_BASE=$base EASYSCALE_LAB_OWNER=harness bash tests/lab/lab-up.sh)
	eval "$exports"
	[ "$EASYSCALE_LAB_DIR" = "$dir" ] || { echo "lab-up of $dir gave EASYSCALE_LAB_DIR=$EASYSCALE_LAB_DIR" >&2; return 1; }
	X=$EASYSCALE_LAB_DIR/bin/lab-exec
	eval "exec $fd>\"\$EASYSCALE_LAB_DIR/users.lock\""
	flock -s "$fd"
}
main_lab=${EASYSCALE_LAB_DIR:-/tmp/easyscale-lab-current}
slurm_lab=${EASYSCALE_LAB_CURRENT_SLURM_DIR:-/tmp/easyscale-lab-current-slurm}
for d in "$main_lab" "$slurm_lab"; do [ -s "$d/run/lab.pids" ] || downs+=("$d"); done

# run_suite NAME PKG FLAGS: runs one suite (a test binary in the root with $X, or a script on
# the host) and prints its ok or FAIL line; returns its status.
run_suite() {
	local name=$1 pkg=$2 flags=$3 t0=$SECONDS
	if [ "${pkg%.sh}" != "$pkg" ]; then
		step "bash $pkg"
		if bash "$pkg"; then echo "ok   $pkg $((SECONDS - t0))s"; return 0; fi
		echo "FAIL $pkg $((SECONDS - t0))s"
		return 1
	fi
	step "go test $pkg in the root${flags:+ ($flags)}"
	# the root has no Go: the binary under test, and the data sets that on the host are found
	# in the Go module cache and GOROOT (runtime/datasets), are named
	# shellcheck disable=SC2086 # flags are words
	if (cd "$pkg" && "$X" env EASYSCALE_E2E_BINARY="$REPO/bin/easyscale" \
		EASYSCALE_MNIST_DIR="$REPO/data/mnist" EASYSCALE_CHARLM_DIR="$REPO/data/charlm" \
		"$REPO/$TB/$name.test" -test.count=1 -test.timeout=30m $flags); then
		echo "ok   $pkg $((SECONDS - t0))s"
		return 0
	fi
	echo "FAIL $pkg $((SECONDS - t0))s"
	return 1
}

step "the current lab"
labup "$main_lab" "${EASYSCALE_LAB_PORT_BASE:-17800}" 7
# the SPANK plugin built against the root's spank.h; lab-up hooks it (read by every srun/sbatch)
slurm_series=$("$X" scontrol --version | awk '{print $2}' | cut -d. -f1,2)
"$X" make -s BIN="bin/slurm-$slurm_series" spank-plugin
# and its helper next to it, where the plugin looks first (built here: the root has no Go)
make -s BIN="bin/slurm-$slurm_series" spank-helper
labup "$main_lab" "${EASYSCALE_LAB_PORT_BASE:-17800}" 7

passed=() failed=()
if selected slurm; then
	step "tests/slurm on a current lab of its own, beside the other suites"
	slurm_log=$(mktemp)
	for s in "${SUITES[@]}"; do
		read -r name pkg flags <<<"$s"
		[ "$name" = slurm ] || continue
		(
			exec 7>&- # the main lab's users.lock stays with this script, not the other lab's daemons
			trap - EXIT
			labup "$slurm_lab" "${EASYSCALE_LAB_CURRENT_SLURM_PORT_BASE:-17900}" 8
			run_suite "$name" "$pkg" "$flags"
		) >"$slurm_log" 2>&1 &
		slurm_pid=$!
	done
fi

slurm=$("$X" scontrol --version | awk '{print $2}')
torch=$("$X" python3 -c 'import torch; print(torch.__version__)')
python=$("$X" python3 -c 'import platform; print(platform.python_version())')
echo "slurm ${slurm%.*} ($slurm)"
echo "torch $(cut -d. -f1,2 <<<"$torch") ($torch, python $python)"

for s in "${SUITES[@]}"; do
	read -r name pkg flags <<<"$s"
	selected "$name" && [ "$name" != slurm ] || continue
	if run_suite "$name" "$pkg" "$flags"; then passed+=("$name"); else failed+=("$name"); fi
done
if [ -n "$slurm_pid" ]; then
	slurm_rc=0
	wait "$slurm_pid" || slurm_rc=$?
	step "tests/slurm on its own current lab exited $slurm_rc"
	slurm_pid=
	cat "$slurm_log"
	if [ "$slurm_rc" = 0 ]; then passed+=(slurm); else failed+=(slurm); fi
fi

step "done"
echo "slurm ${slurm%.*} torch $(cut -d. -f1,2 <<<"$torch"): ${#passed[@]} suites passed (${passed[*]}), ${#failed[@]} failed${failed[*]:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
