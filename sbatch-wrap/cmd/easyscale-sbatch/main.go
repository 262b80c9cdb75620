// Command easyscale-sbatch is a drop-in for sbatch that understands the
// EasyScale options --elastic, --logical-workers, --determinism and --speeds (also as
// #SBATCH directives), validates them, submits the job at its minimum size (or at its -N within the range)
// and records the request in the job comment. See package sbatch-wrap/submit.
package main

import (
	"context"
	"io"
	"os"

	"github.com/easyscale/easyscale-slurm/sbatch-wrap/submit"
)

func main() {
	in := submit.Input{
		Lookup:   os.LookupEnv,
		ReadFile: os.ReadFile,
		Stdin:    func() ([]byte, error) { return io.ReadAll(os.Stdin) },
	}
	stdio := submit.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	os.Exit(submit.Main(context.Background(), os.Args[1:], in, stdio))
}
