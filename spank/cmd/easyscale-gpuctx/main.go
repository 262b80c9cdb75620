// Command easyscale-gpuctx prints the GPU context of a Slurm task as
// EASYSCALE_GPU_*=VALUE lines; the easyscale SPANK plugin runs it in each
// task and exports what it prints. See package spank/gpuctx.
package main

import (
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/easyscale/easyscale-slurm/spank/gpuctx"
)

func main() {
	os.Exit(gpuctx.Run(os.Args[1:], os.LookupEnv, nvml.New(), os.Stdout, os.Stderr))
}
