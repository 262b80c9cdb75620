package cli

import "github.com/easyscale/easyscale-slurm/backfill/simulator"

// simulateCmd is `easyscale simulate`, implemented by backfill/simulator.
func simulateCmd(args []string, env Env) int {
	return simulator.Main(args, env.Stdout, env.Stderr)
}
