// Command easyscale trains jobs elastically with bit-identical results
// (`easyscale run`), compares runs (`verify`), shows a job's state
// (`status`) and replays cluster traces through the elastic planner
// (`simulate`). See the README and `easyscale --help`.
package main

import (
	"os"

	"github.com/mattn/go-isatty"

	"github.com/easyscale/easyscale-slurm/runtime/cli"
)

func main() {
	env := cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, StderrIsTerminal: isatty.IsTerminal(os.Stderr.Fd())}
	os.Exit(cli.Main(os.Args[1:], env))
}
