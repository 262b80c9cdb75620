// Command easyscale-backfilld grows EasyScale elastic jobs into GPUs Slurm
// leaves idle and shrinks them before a reserved start. See package
// backfill/daemon and contrib/backfill.toml.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/easyscale/easyscale-slurm/backfill/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := daemon.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
