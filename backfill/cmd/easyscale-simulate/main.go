// Command easyscale-simulate replays a GPU-cluster job trace through a
// Slurm-like FIFO + backfill scheduler and the backfill planner that
// easyscale-backfilld runs, and writes the metrics as JSON. It is its own
// command so that bin/easyscale, which runs on every compute node, does not
// link the simulator and its plotting library. See package
// backfill/simulator and `easyscale-simulate --help`.
package main

import (
	"os"

	"github.com/easyscale/easyscale-slurm/backfill/simulator"
)

func main() {
	os.Exit(simulator.Main(os.Args[1:], os.Stdout, os.Stderr))
}
