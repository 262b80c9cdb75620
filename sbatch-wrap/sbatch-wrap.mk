# sbatch-wrap.mk - build rule for easyscale-sbatch. The top-level Makefile:
#
#   include sbatch-wrap/sbatch-wrap.mk
#   build: sbatch-wrap

GO ?= go

.PHONY: sbatch-wrap
sbatch-wrap:
	@mkdir -p bin
	$(GO) build -o bin/easyscale-sbatch ./sbatch-wrap/cmd/easyscale-sbatch
