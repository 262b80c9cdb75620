# spank.mk - build rules for the easyscale SPANK plugin and its GPU-context
# helper. The top-level Makefile includes this file; `make build` runs
# spank-plugin when spank.h is installed.
#
# The plugin is plain C (no libslurm link: slurm_* and spank_* symbols resolve
# from the srun/sbatch/slurmstepd process at dlopen time); it needs spank.h
# from Debian's libslurm-dev. It must be rebuilt for every Slurm release
# (plugin_version is SLURM_VERSION_NUMBER).
#
# Hardening, as Debian's dpkg-buildflags and pyxis build a plugin that runs
# inside root's slurmstepd: stack protector, FORTIFY_SOURCE=2 (needs -O2),
# full RELRO and immediate binding, position-independent code, and a linker
# version script (spank/plugin/easyscale_spank.map) so that only the SPANK
# symbols are exported. spank/plugintest checks the built file for each.
# Next to the plugin, easyscale_spank.slurm-version records the Slurm version
# of the spank.h it was built against (e.g. 24.11.5), for make deb.
# SPANK_CFLAGS (keep -O2: FORTIFY_SOURCE needs optimisation) and SPANK_LDFLAGS
# may be overridden; the hardening flags and the version script are always added.

CC ?= cc
GO ?= go
BIN ?= bin
SPANK_CFLAGS ?= -O2 -g -Wall -Wextra -Werror
SPANK_LDFLAGS ?=
SPANK_HARDEN_CFLAGS := -fPIC -fvisibility=hidden -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
	-Wformat -Wformat-security
SPANK_HARDEN_LDFLAGS := -shared -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,--no-undefined-version \
	-Wl,--version-script=spank/plugin/easyscale_spank.map
SPANK_SRC := $(wildcard spank/plugin/*.c)
SPANK_HDR := $(wildcard spank/plugin/*.h)

.PHONY: spank spank-plugin spank-helper

spank: spank-plugin spank-helper

spank-plugin: $(BIN)/easyscale_spank.so

spank-helper: $(BIN)/easyscale-gpuctx

$(BIN)/easyscale_spank.so: $(SPANK_SRC) $(SPANK_HDR) spank/plugin/easyscale_spank.map spank/spank.mk
	@test -f /usr/include/slurm/spank.h || { echo "spank.h missing: apt-get install -y --no-install-recommends libslurm-dev" >&2; exit 1; }
	@mkdir -p $(BIN)
	$(CC) $(SPANK_CFLAGS) $(SPANK_HARDEN_CFLAGS) $(SPANK_HARDEN_LDFLAGS) $(SPANK_LDFLAGS) -o $@ $(SPANK_SRC)
	@num=$$(awk '$$2 == "SLURM_VERSION_NUMBER" {print $$3}' /usr/include/slurm/slurm_version.h); \
	printf '%d.%02d.%d\n' $$((num >> 16 & 255)) $$((num >> 8 & 255)) $$((num & 255)) >$(BIN)/easyscale_spank.slurm-version

$(BIN)/easyscale-gpuctx: FORCE_SPANK
	@mkdir -p $(BIN)
	$(GO) build -o $@ ./spank/cmd/easyscale-gpuctx

.PHONY: FORCE_SPANK
FORCE_SPANK:
