// Package cli implements the `easyscale` command: its subcommands parse
// flags with spf13/pflag (internal/cmdline), log with hashicorp/go-hclog
// and return a process exit code (0 success, 1 failure, 2 bad usage).
//
// The runtime's log keys mean one thing each: job_id is the job's id, its
// spec digest cut short (jobspec.Spec.ShortID), which the coordinator's
// logger carries on every line; job_name is the job file's name;
// slurm_job_id is Slurm's id of the job; node is a machine (a Slurm node,
// or a joiner's host name); peer a connection's remote address; step,
// rank and world_size as in the trainer.
package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
)

// Version is stamped at build time with -ldflags "-X .../runtime/cli.Version=...".
var Version = "dev"

// Env is what a subcommand may touch of its process.
type Env struct {
	Stdout, Stderr io.Writer
	// StderrIsTerminal enables the one-line progress display.
	StderrIsTerminal bool
	// Slurm runs the Slurm client commands `status JOBID` asks; the zero
	// Runner runs those on PATH with the process's environment.
	Slurm slurmcli.Runner
}

// command is one subcommand.
type command struct {
	name, summary string
	run           func(args []string, env Env) int
}

func commands() []command {
	return []command{
		{"run", "train a job on a (changing) set of physical workers", runCmd},
		{"worker", "join a coordinator as a physical worker process", workerCmd},
		{"check", "run a torch job's consistency self-check (exit 0 only when it passes)", checkCmd},
		{"verify", "compare the step ledgers of two state directories", verifyCmd},
		{"status", "show a job's state directory: allocations, ledger tail, checkpoints", statusCmd},
		{"version", "print the version", func(_ []string, env Env) int { fmt.Fprintln(env.Stdout, Version); return 0 }},
	}
}

// Main dispatches args (without the program name) to a subcommand and
// returns the exit code.
func Main(args []string, env Env) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-v") {
		args = []string{"version"}
	}
	if len(args) == 2 && args[0] == "help" {
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], env)
		}
	}
	if args[0] == "simulate" {
		return simulateCmd(args[1:], env)
	}
	fmt.Fprintf(env.Stderr, "easyscale: unknown command %q\n\n", args[0])
	usage(env.Stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: easyscale COMMAND [flags]\n\nElastic, accuracy-consistent training (EasyScale on Slurm).\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'easyscale COMMAND --help' for a command's flags.\n")
}

// logFlags are the logging flags every long-running subcommand takes.
type logFlags struct {
	level string
	json  bool
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.level, "log-level", envOr("EASYSCALE_LOG_LEVEL", "info"), "log level: trace, debug, info, warn, error (env EASYSCALE_LOG_LEVEL)")
	fs.BoolVar(&l.json, "log-json", os.Getenv("EASYSCALE_LOG_JSON") == "1", "log JSON lines instead of text (env EASYSCALE_LOG_JSON=1)")
}

func (l *logFlags) logger(name string, w io.Writer) (hclog.Logger, error) {
	lvl := hclog.LevelFromString(l.level)
	if lvl == hclog.NoLevel {
		return nil, fmt.Errorf("--log-level %q: use trace, debug, info, warn or error", l.level)
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: lvl, Output: w, JSONFormat: l.json}), nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// newFlagSet returns the flag set of the subcommand name, named
// "easyscale NAME" (the prefix of its errors, cmdline.BadUsage), that
// reports errors instead of exiting; cmdline.Parse parses it.
func newFlagSet(name, usageLine string, env Env) *pflag.FlagSet {
	fs := pflag.NewFlagSet("easyscale "+name, pflag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: easyscale %s\n\nFlags:\n%s", usageLine, cmdline.FlagTable(fs))
	}
	return fs
}
