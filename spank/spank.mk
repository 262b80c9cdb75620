# spank.mk - build rules for the easyscale SPANK plugin and its GPU-context
# helper. The top-level Makefile includes this file and makes `build` depend
# on `spank`:
#
#   include spank/spank.mk
#   build: spank
#
# The plugin is plain C (no libslurm link: slurm_* and spank_* symbols resolve
# from the srun/sbatch/slurmstepd process at dlopen time); it needs spank.h
# from Debian's libslurm-dev. It must be rebuilt for every Slurm release
# (plugin_version is SLURM_VERSION_NUMBER).

CC ?= cc
GO ?= go
SPANK_CFLAGS ?= -O2 -Wall -Wextra -Werror
SPANK_SRC := $(wildcard spank/plugin/*.c)
SPANK_HDR := $(wildcard spank/plugin/*.h)

.PHONY: spank spank-plugin spank-helper

spank: spank-plugin spank-helper

spank-plugin: bin/easyscale_spank.so

spank-helper: bin/easyscale-gpuctx

bin/easyscale_spank.so: $(SPANK_SRC) $(SPANK_HDR)
	@test -f /usr/include/slurm/spank.h || { echo "spank.h missing: apt-get install -y --no-install-recommends libslurm-dev" >&2; exit 1; }
	@mkdir -p bin
	$(CC) -shared -fPIC $(SPANK_CFLAGS) -fvisibility=hidden -o $@ $(SPANK_SRC)

bin/easyscale-gpuctx: FORCE_SPANK
	@mkdir -p bin
	$(GO) build -o $@ ./spank/cmd/easyscale-gpuctx

.PHONY: FORCE_SPANK
FORCE_SPANK:
