#!/usr/bin/env bash
# make test-all (.ci/run): make test's suite (Debian 12: Slurm 22.05, torch 1.13) and make
# test-current's (Slurm 24.11, torch 2.6 in the Debian 13 root; tests/e2e's torch tests in the
# short form CURRENT_E2E_RUN names) side by side.
#
# First both prepare, one after the other (apt-get, the root, make build and the test binaries
# must not race), then their tests run at once: the two labs share nothing (their own
# directories, ports and job ids: tests/lab/lab-up.sh), and much of each lab suite waits on
# Slurm (a lost node's SlurmdTimeout, job starts, the daemon's rounds), which the other half's
# work fills. The current half's lines are prefixed "[24.11] "; its summary is printed again at
# the end. Exits 0 only when both passed.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${CURRENT_E2E_RUN:?set CURRENT_E2E_RUN to the -test.run pattern of tests/e2e in the current lab, as the Makefile does}"
start=$SECONDS
note() { printf '\n=== test-all: %s (%ds)\n' "$*" $((SECONDS - start)); }

note "preparing make test"
EASYSCALE_CI_STAGE=prepare bash .ci/test.sh || exit 1
note "preparing make test-current"
EASYSCALE_CI_STAGE=prepare EASYSCALE_CURRENT_E2E_RUN="$CURRENT_E2E_RUN" bash .ci/test-current.sh || exit 1

note "both suites' tests, side by side"
log=$(mktemp)
rcfile=$(mktemp)
racefile=$(mktemp)
trap 'rm -f "$log" "$rcfile" "$racefile"' EXIT
# RACE_PACKAGES run under the race detector on the host once the current half is done, while
# make test's tests/slurm waits on Slurm (its CPU is mostly idle then): the all-reduce ring,
# whose operations a context may end from another goroutine (a race the detector found there).
RACE_PACKAGES="./runtime/collective"
{
	EASYSCALE_CI_STAGE=tests EASYSCALE_CURRENT_E2E_RUN="$CURRENT_E2E_RUN" bash .ci/test-current.sh
	echo $? >"$rcfile"
	printf '\n== go test -race %s (on the host, beside make test'"'"'s tests/slurm)\n' "$RACE_PACKAGES"
	go test -race -count=1 $RACE_PACKAGES
	echo $? >"$racefile"
} 2>&1 | tee "$log" | sed -u 's/^/[24.11] /' &
current=$!
# The torch lab test of a d1 job moved and started over runs in the current half only (on torch
# 2.6, the one place start-over runs on it; torch 1.13's start-over is tests/e2e's), for the CPU
# its torch runs take (BENCHMARKS.md, "The suite's time").
EASYSCALE_CI_STAGE=tests EASYSCALE_TEST_SKIP='^TestAD1TorchJobThatStartsOverIsMovedToAnotherTypeAndEndsWithItsFixedRun$' bash .ci/test.sh
rc_test=$?
note "make test's tests exited $rc_test; waiting for make test-current's"
wait "$current"
rc_current=$(cat "$rcfile" 2>/dev/null)
rc_current=${rc_current:-1}
rc_race=$(cat "$racefile" 2>/dev/null)
rc_race=${rc_race:-1}

note "done"
echo "make test (Slurm 22.05, torch 1.13): $([ "$rc_test" = 0 ] && echo passed || echo "FAILED (exit $rc_test)")"
echo "make test-current: $(grep -E '^slurm [0-9.]+ torch .*suites passed' "$log" || echo "no summary (exit $rc_current)")"
echo "go test -race $RACE_PACKAGES: $([ "$rc_race" = 0 ] && echo passed || echo "FAILED (exit $rc_race)")"
[ "$rc_test" = 0 ] && [ "$rc_current" = 0 ] && [ "$rc_race" = 0 ]
