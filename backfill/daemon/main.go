package daemon

import (
	"context"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Version is stamped by the build (-ldflags -X).
var Version = "dev"

// Main is easyscale-backfilld's command line:
//
//	easyscale-backfilld [--config FILE] [--dry-run] [--once [--record FILE]] [--check-config] [--version]
//
// It loads the config (default /etc/easyscale/backfill.toml), opens the
// state database, and runs until ctx is done (--once: one cycle, logged in
// one line at info, whatever it did). A dry run (--dry-run or dry_run) has no
// side effect but its logs: it never calls sbatch, scancel or scontrol update and works on an
// in-memory copy of state_db (backfillstore.OpenDryRun), creating nothing
// on disk. --record FILE (with --once) writes the cycle's planner snapshot
// and decisions to FILE as a [Recording]. --check-config only loads the
// config: it prints the settings that do nothing (Config.Warnings), one a
// line, and "FILE: configuration OK", and contacts neither Slurm nor the
// state database. It returns the exit code: 0, 1 for a runtime error, 2
// for bad flags or config.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	return mainWith(ctx, args, stderr, slurmcli.Runner{})
}

// mainWith is Main with the Slurm runner to use.
func mainWith(ctx context.Context, args []string, stderr io.Writer, slurm slurmcli.Runner) int {
	fs := pflag.NewFlagSet("easyscale-backfilld", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: easyscale-backfilld [--config FILE] [--dry-run] [--once [--record FILE]] [--check-config]\n\nGrows, shrinks and starts small the elastic jobs of a Slurm cluster.\n\nThe EasyScale backfill daemon runs as root beside slurmctld: it grows elastic\njobs into idle GPUs until reserved starts, shrinks them to admit waiting jobs,\nand starts waiting elastic jobs small.\n\nEvery configuration key is in the annotated example contrib/backfill.toml,\ninstalled as PREFIX/share/easyscale/backfill.toml by make install; the Debian\npackage installs it as /etc/easyscale/backfill.toml, also in\n/usr/share/doc/easyscale/examples/.\n\nFlags:\n%s", cmdline.FlagTable(fs))
	}
	path := fs.String("config", config.DefaultPath, "admin configuration (TOML)")
	dryRun := fs.Bool("dry-run", false, "log and record decisions, never call sbatch, scancel or scontrol update (overrides dry_run)")
	once := fs.Bool("once", false, "run one cycle and exit")
	version := fs.Bool("version", false, "print the version and exit")
	record := fs.String("record", "", "with --once: write the cycle's planner snapshot and decisions to this file as JSON (for simulator.Replay)")
	check := fs.Bool("check-config", false, "load the configuration, print the settings that do nothing, and exit: 0 when it is valid, 2 when not (contacts neither Slurm nor the state database)")
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if *version {
		fmt.Fprintln(stderr, "easyscale-backfilld", Version)
		return 0
	}
	if *record != "" && !*once {
		fmt.Fprintln(stderr, "easyscale-backfilld: --record needs --once (it records one cycle)")
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "easyscale-backfilld: %v\n", err)
		return 2
	}
	if *check {
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "easyscale-backfilld: %s: warning: %s\n", *path, w)
		}
		fmt.Fprintf(stderr, "easyscale-backfilld: %s: configuration OK\n", *path)
		return 0
	}
	cfg.DryRun = cfg.DryRun || *dryRun
	log := NewLogger(cfg.Log, stderr)
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "path", *path, "warning", w)
	}
	open := backfillstore.Open
	if cfg.DryRun {
		open = backfillstore.OpenDryRun
	}
	db, err := open(cfg.StateDB)
	if err != nil {
		log.Error("opening state database", "error", err)
		return 1
	}
	defer db.Close()
	d, err := New(Options{Config: cfg, DB: db, Logger: log, Slurm: slurm})
	if err != nil {
		log.Error("starting", "error", err)
		return 1
	}
	if *once {
		r, err := d.Cycle(ctx)
		if err != nil {
			log.Error("cycle failed", "error", err)
			return 1
		}
		if !log.IsDebug() { // at debug level the cycle logged the same line itself
			log.Info("cycle done", r.fields(cfg.DryRun)...)
		}
		if *record != "" {
			if err := WriteRecording(*record, "recorded by easyscale-backfilld --once", r); err != nil {
				log.Error("recording the cycle", "error", err)
				return 1
			}
		}
		return 0
	}
	if err := d.Run(ctx); err != nil {
		log.Error("stopped", "error", err)
		return 1
	}
	return 0
}

// NewLogger returns the daemon's hclog logger named easyscale-backfilld,
// at the configured level, as JSON lines when c.JSON.
func NewLogger(c config.Log, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "easyscale-backfilld", Level: hclog.LevelFromString(c.Level),
		JSONFormat: c.JSON, Output: w, TimeFormat: "2006-01-02T15:04:05.000Z07:00"})
}
