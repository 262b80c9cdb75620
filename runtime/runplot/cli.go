package runplot

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
)

// Main is the easyscale-plot command: it reads the runs in the state
// directories args names (ReadRun) and writes their picture (SVG) to
// --output, or to stdout. It returns the exit status: 0 drawn, 1 a run
// cannot be read or the runs are of different jobs, 2 bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("easyscale-plot", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	output := fs.StringP("output", "o", "", "write the SVG to `FILE` (default: stdout)")
	labels := fs.StringArray("label", nil, "legend `NAME` of each state directory in order (default: its base name); repeat per directory")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: easyscale-plot [--output FILE.svg] [--label NAME]... STATE_DIR [STATE_DIR...]\n\n"+
			"Draws the training loss and the physical workers per step of each run (reallocations and redone steps\n"+
			"marked), overlaid, and says whether their parameters agree at every common step.\n\nFlags:\n%s", cmdline.FlagTable(fs))
	}
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "easyscale-plot: give one or more state directories: easyscale-plot --output run.svg DIR [DIR...]")
		return 2
	}
	if len(*labels) > fs.NArg() {
		fmt.Fprintf(stderr, "easyscale-plot: %d --label for %d state directories; give at most one per directory\n", len(*labels), fs.NArg())
		return 2
	}
	runs := make([]Run, fs.NArg())
	for i, dir := range fs.Args() {
		r, err := ReadRun(dir)
		if err != nil {
			fmt.Fprintf(stderr, "easyscale-plot: %v\n", err)
			return 1
		}
		if i < len(*labels) {
			r.Label = (*labels)[i]
		}
		runs[i] = r
	}
	svg, err := SVG(runs)
	if err != nil {
		fmt.Fprintf(stderr, "easyscale-plot: %v\n", err)
		return 1
	}
	if *output == "" {
		if _, err := stdout.Write(svg); err != nil {
			fmt.Fprintf(stderr, "easyscale-plot: writing the SVG to stdout: %v\n", err)
			return 1
		}
		return 0
	}
	if err := os.WriteFile(*output, svg, 0o644); err != nil {
		fmt.Fprintf(stderr, "easyscale-plot: writing the SVG: %v\n", err)
		return 1
	}
	return 0
}
