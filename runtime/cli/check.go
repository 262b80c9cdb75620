package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

// checkCmd runs a torch job's consistency self-check from its start: one
// Python process takes every logical worker, saves and loads every
// registered object, and runs a few steps of the training loop twice under
// two placements, comparing parameters, buffers, optimizer and scheduler
// state bit for bit (python/easyscale/selfcheck.py). Exit 0 only when it
// passed; 1 when it failed (the cause on stderr: the first tensor or
// attribute that differed and the likely cause) or the job cannot load;
// 2 on bad usage. `easyscale run` runs the same check before a job's first
// step unless --no-self-check.
func checkCmd(args []string, env Env) int {
	fs := newFlagSet("check", "check JOBFILE", env)
	var log logFlags
	log.register(fs)
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "easyscale check: give one job file: easyscale check JOBFILE")
		return cmdline.ExitUsage
	}
	spec, err := jobspec.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale check: %v\n", err)
		return cmdline.ExitUsage
	}
	if spec.Engine != jobspec.EngineTorch {
		fmt.Fprintf(env.Stderr, "easyscale check: %s is a native job: its engine keeps the bits by construction; the self-check is for torch jobs\n", fs.Arg(0))
		return cmdline.ExitUsage
	}
	logger, err := log.logger("easyscale", env.Stderr)
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale check: %v\n", err)
		return cmdline.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng, err := torchengine.New(ctx, torchengine.Options{Spec: spec, Stderr: env.Stderr, Logger: logger})
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale check: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	defer eng.Close()
	res, err := eng.Check(ctx)
	var refused *torchengine.SelfCheckError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintf(env.Stderr, "easyscale check: %s: %s\n", fs.Arg(0), refused.Message)
		return 1
	case err != nil:
		fmt.Fprintf(env.Stderr, "easyscale check: %s: %v\n", fs.Arg(0), err)
		return 1
	case res.Result != "passed":
		fmt.Fprintf(env.Stderr, "easyscale check: %s: not checked: %s\n", fs.Arg(0), res.Message)
		return 1
	}
	fmt.Fprintf(env.Stdout, "PASSED %s: registered state saved and loaded back; %s (%.2f s)\n", fs.Arg(0), res.Message, res.Seconds)
	return 0
}
