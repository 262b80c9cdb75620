package submit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// EnvSbatch names the real sbatch binary (default "sbatch" from PATH); tests
// point it at a fake.
const EnvSbatch = "SBATCH"

// Main runs the wrapper: prepare, then run sbatch with the plan and return
// its exit status (1 for the wrapper's own errors, printed as
// "easyscale-sbatch: error: …" on stderr like sbatch's). With -h/--help it
// prints Usage on stdout and exits 0 whether or not sbatch works, then
// appends sbatch's own --help output when sbatch gives it (see help).
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
	if plan.Help {
		help(ctx, sbatch, plan, io.Out)
		return 0
	}
	code, err := run(ctx, sbatch, plan, io)
	if err != nil {
		fmt.Fprintf(io.Err, "easyscale-sbatch: error: %v\n", err)
		return 1
	}
	return code
}

// sbatchHelpTimeout bounds the `sbatch --help` that help runs: a misconfigured
// Slurm must not hang the wrapper's own help.
const sbatchHelpTimeout = 10 * time.Second

// help writes Usage to out, then runs sbatch with the plan's arguments (which
// hold --help) and appends its stdout when it exits 0; otherwise one line
// says sbatch's help is unavailable and why (sbatch missing, or Slurm
// unconfigured), without sbatch's own error output.
func help(ctx context.Context, sbatch string, p Plan, out io.Writer) {
	fmt.Fprint(out, Usage())
	ctx, cancel := context.WithTimeout(ctx, sbatchHelpTimeout)
	defer cancel()
	var sout, serr bytes.Buffer
	code, err := run(ctx, sbatch, p, Stdio{In: bytes.NewReader(nil), Out: &sout, Err: &serr})
	switch {
	case err == nil && code == 0 && sout.Len() > 0:
		fmt.Fprintf(out, "\nsbatch's own options (from %s --help):\n\n", sbatch)
		out.Write(sout.Bytes())
	default:
		why := firstLine(serr.String())
		if err != nil {
			why = err.Error()
		} else if why == "" {
			why = fmt.Sprintf("exit status %d", code)
		}
		fmt.Fprintf(out, "\n(%s --help is not available here: %s; sbatch(1) lists sbatch's options.)\n", sbatch, why)
	}
}

// firstLine returns s up to its first newline, trimmed.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
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

// Usage is the wrapper's help: what it does, its options with their
// environment twins and precedence, the job comment it writes, what it
// refuses, and its own environment. Main prints it for -h/--help.
func Usage() string {
	fs := pflag.NewFlagSet("easyscale-sbatch", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String(elastic.OptionElastic, "", "run the job elastically on MIN to MAX nodes, MIN[-MAX] (MAX defaults to MIN); env "+elastic.EnvElastic)
	fs.String(elastic.OptionLogicalWorkers, "", "logical workers (EasyScaleThreads, ESTs), at least MAX; env "+elastic.EnvLogicalWorkers+" (default: set at the first start)")
	fs.String(elastic.OptionDeterminism, string(elastic.DefaultDeterminism), "d1: bitwise-identical results on one GPU type; d2: also across GPU types; env "+elastic.EnvDeterminism)
	fs.String(elastic.OptionSpeeds, "", "the job's throughput per GPU type relative to the reference type, TYPE:SPEED[,TYPE:SPEED...], e.g. t4:0.4,v100:1; easyscale-backfilld prefers it to the site's [speeds] table; env "+elastic.EnvSpeeds+" (default: the site's table)")
	return `Usage: easyscale-sbatch [EASYSCALE OPTIONS] [SBATCH OPTIONS] [SCRIPT [ARGS...]]

A drop-in for sbatch that submits EasyScale jobs: elastic, accuracy-consistent training whose
result does not depend on how many physical workers run it. It takes four options of its own,
validates them, and passes every other argument to the real sbatch unchanged and in order;
sbatch's output and exit status are the wrapper's. A job without EasyScale options is passed
through untouched.

EasyScale options, also accepted as #SBATCH directives in the script and as environment
variables (the command line wins over a directive, a directive over the environment):
` + cmdline.FlagTable(fs) + `
For an EasyScale job the wrapper adds, before your arguments:
  --nodes=MIN        elastic jobs start at their minimum, unless you give -N/--nodes with one count
                     from MIN to MAX, the size to start at; the backfill daemon grows them
  --no-kill          elastic jobs only, unless you set -k/--no-kill or SBATCH_NO_KILL: when a
                     node fails Slurm removes it from the job instead of requeuing the job
  --comment=REQUEST  the request, for the backfill daemon, encoded as
                       es-req min=MIN max=MAX lw=L d1|d2
                     (min= and max= only for --elastic, lw= only when given), e.g.
                       es-req min=1 max=4 lw=8 d1
and sets the ` + elastic.EnvElastic + `, ` + elastic.EnvLogicalWorkers + ` and ` + elastic.EnvDeterminism + ` twins in
sbatch's environment, and for an elastic job ` + EnvStepNoKill + `=` + stepNoKillOn + ` unless it is set or you turned
--no-kill off (--no-kill=off, SBATCH_NO_KILL=off or the directive: then a node failure ends the job) (srun --no-kill: the
step's tasks on the other nodes survive a node failure, which the job treats as a shrink). Its own #SBATCH lines are hidden from sbatch in a private copy of the
script ("# easyscale-sbatch: ..."), removed when sbatch exits. It refuses --nodes/-N outside the --elastic range, --comment,
heterogeneous jobs, and #SBATCH lines mixing its options with sbatch's.

Environment:
  ` + EnvSbatch + `   path of the real sbatch (default: sbatch from PATH)

Exit status: sbatch's, or 1 when the wrapper refuses the request or cannot run sbatch; 0 for --help.
`
}
