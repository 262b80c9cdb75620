package submit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// EnvSbatch names the real sbatch binary (default "sbatch" from PATH); tests
// point it at a fake.
const EnvSbatch = "SBATCH"

// Main runs the wrapper: prepare, then run sbatch with the plan and return
// its exit status (1 for the wrapper's own errors, printed as
// "easyscale-sbatch: error: …" on stderr like sbatch's).
func Main(ctx context.Context, args []string, in Input, io Stdio) int {
	plan, err := Prepare(args, in)
	if err != nil {
		fmt.Fprintf(io.Err, "easyscale-sbatch: error: %v\n", err)
		return 1
	}
	sbatch := "sbatch"
	if v, ok := in.Lookup(EnvSbatch); ok && v != "" {
		sbatch = v
	}
	code, err := run(ctx, sbatch, plan, io)
	if err != nil {
		fmt.Fprintf(io.Err, "easyscale-sbatch: error: %v\n", err)
		return 1
	}
	if plan.Help {
		fmt.Fprint(io.Out, Usage())
	}
	return code
}

func run(ctx context.Context, sbatch string, p Plan, stdio Stdio) (int, error) {
	args := append([]string(nil), p.Args...)
	if p.Script != nil {
		path, cleanup, err := writeScriptCopy(args[p.ScriptAt], p.Script)
		if err != nil {
			return 0, err
		}
		defer cleanup()
		args[p.ScriptAt] = path
	}
	cmd := exec.CommandContext(ctx, sbatch, args...)
	cmd.Env = mergeEnv(os.Environ(), p.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.In, stdio.Out, stdio.Err
	if p.Stdin != nil {
		cmd.Stdin = bytes.NewReader(p.Stdin)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", sbatch, err)
	}
	stop := forwardSignals(cmd.Process)
	defer stop()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode(), nil
	case err != nil:
		return 0, fmt.Errorf("run %s: %w", sbatch, err)
	}
	return 0, nil
}

// forwardSignals passes SIGINT, SIGTERM and SIGHUP on to sbatch (which
// matters with --wait) until stop is called.
func forwardSignals(p *os.Process) (stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				_ = p.Signal(s)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// mergeEnv returns base with the KEY=VALUE entries of over replacing or
// added to those of base.
func mergeEnv(base, over []string) []string {
	keys := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// Usage is the wrapper's section appended to sbatch's --help output.
func Usage() string {
	fs := pflag.NewFlagSet("easyscale-sbatch", pflag.ContinueOnError)
	fs.String(elastic.OptionElastic, "", "EasyScale elastic job: run on MIN to MAX nodes, MIN[-MAX] (env "+elastic.EnvElastic+")")
	fs.String(elastic.OptionLogicalWorkers, "", "EasyScale logical workers (ESTs), >= MAX (env "+elastic.EnvLogicalWorkers+"; default: set at the first start)")
	fs.String(elastic.OptionDeterminism, string(elastic.DefaultDeterminism), "d1: same results on one GPU type; d2: also across GPU types (env "+elastic.EnvDeterminism+")")
	return "\neasyscale-sbatch options (also as #SBATCH directives; command line > directive > environment):\n" +
		fs.FlagUsages() +
		"\nEnvironment:\n  " + EnvSbatch + "   path of the real sbatch (default: sbatch from PATH)\n" +
		"\nAn elastic job is submitted with --nodes=MIN and --comment='es-req min=… max=… lw=… d1'.\n"
}
