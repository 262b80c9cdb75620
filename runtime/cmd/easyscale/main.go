// Command easyscale trains jobs elastically with bit-identical results
// (`easyscale run`), joins a job as a worker (`worker`), compares runs
// (`verify`) and shows a job's state (`status`). It runs on every compute
// node; the trace simulator is its own command, easyscale-simulate. See the
// README and `easyscale --help`.
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
