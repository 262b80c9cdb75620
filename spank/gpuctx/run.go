package gpuctx

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
)

// Environment variables read by Run.
const (
	EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"
	EnvSpeeds         = "EASYSCALE_GPU_SPEEDS"
)

// Version is stamped at build time with -ldflags "-X …/spank/gpuctx.Version=…".
var Version = "dev"

const usageHead = `Usage: easyscale-gpuctx [flags]

Prints the GPU context of the calling Slurm task as KEY=VALUE lines
(EASYSCALE_GPU_*), for the easyscale SPANK plugin to export into the task
environment. Without an NVIDIA driver it says so on stderr, prints
EASYSCALE_GPU_COUNT=0 and exits 0.

Environment:
  CUDA_VISIBLE_DEVICES   GPUs of the task (ordinals or GPU- UUIDs); unset: all
  EASYSCALE_GPU_SPEEDS   speed overrides, same syntax as --speeds (the flag wins)

Flags:
`

// Run is the helper's main: it parses args (pflag), discovers the GPUs
// through lib and writes the context to stdout. lookup reads the environment
// (os.LookupEnv). Exit status: 0 on success or when there is no driver, 1 when
// NVML fails, 2 on bad flags or speed settings.
func Run(args []string, lookup func(string) (string, bool), lib nvml.Interface, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("easyscale-gpuctx", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	speeds := fs.String("speeds", "", "relative speed overrides MODEL=SPEED[,…], V100 = 1 (env "+EnvSpeeds+"); built in: "+strings.ReplaceAll(DefaultSpeeds.String(), ",", ", "))
	listSpeeds := fs.Bool("list-speeds", false, "print the effective speed table and exit")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(stderr, usageHead+cmdline.FlagTable(fs)) }
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if *version {
		fmt.Fprintln(stdout, "easyscale-gpuctx", Version)
		return 0
	}
	table, err := speedTable(*speeds, fs.Changed("speeds"), lookup)
	if err != nil {
		fmt.Fprintf(stderr, "easyscale-gpuctx: %v\n", err)
		return 2
	}
	if *listSpeeds {
		fmt.Fprintln(stdout, table)
		return 0
	}
	return report(lib, options(lookup, table), stdout, stderr)
}

func speedTable(flag string, changed bool, lookup func(string) (string, bool)) (SpeedTable, error) {
	src, origin := flag, "--speeds"
	if !changed {
		src, _ = lookup(EnvSpeeds)
		origin = EnvSpeeds
	}
	over, err := ParseSpeeds(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", origin, err)
	}
	return DefaultSpeeds.With(over), nil
}

func options(lookup func(string) (string, bool), table SpeedTable) Options {
	o := Options{Speeds: table}
	if v, ok := lookup(EnvVisibleDevices); ok {
		o.VisibleDevices = &v
	}
	return o
}

func report(lib nvml.Interface, o Options, stdout, stderr io.Writer) int {
	c, err := Discover(lib, o)
	switch {
	case errors.Is(err, ErrNoDriver):
		fmt.Fprintf(stderr, "easyscale-gpuctx: %v: no GPU context, the task runs CPU workers\n", err)
		fmt.Fprintln(stdout, "EASYSCALE_GPU_COUNT=0")
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "easyscale-gpuctx: discover GPUs: %v\n", err)
		return 1
	}
	for _, g := range c.GPUs {
		if _, known := o.Speeds.Lookup(g.Model); !known {
			fmt.Fprintf(stderr, "easyscale-gpuctx: no speed for model %q, using %g (set %s)\n", g.Model, UnknownSpeed, EnvSpeeds)
		}
	}
	for _, kv := range c.Environ() {
		fmt.Fprintln(stdout, kv)
	}
	return 0
}
