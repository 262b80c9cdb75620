#!/usr/bin/env bash
# The whole test suite (make test; .ci/run). Installs what it needs, then:
# build, vet, every Go test (unit, end-to-end, real Slurm lab: the lab tests
# start the lab themselves), and the arm64 golden-bit and binary cross-checks.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }

step "installing Debian packages"
bash .ci/install-deps.sh
step "downloading Go modules"
go mod download
step "building"
make build data
step "go vet"
go vet ./...
step "go test"
go test -count=1 -timeout 40m ./...
step "arm64 cross-check"
bash tests/crossarch/run.sh
bash tests/crossarch/binary.sh
step "done"
