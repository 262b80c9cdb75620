// Command easyscale-plot draws training runs from their state directories
// as SVG: loss and physical workers per step, reallocations and redone
// steps marked, several runs of one job overlaid. See package
// runtime/runplot.
package main

import (
	"os"

	"github.com/easyscale/easyscale-slurm/runtime/runplot"
)

func main() {
	os.Exit(runplot.Main(os.Args[1:], os.Stdout, os.Stderr))
}
