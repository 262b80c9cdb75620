package gpuctx_test

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/easyscale/easyscale-slurm/spank/gpuctx"
)

// Discover the GPU a task got (here from go-nvml's DGX A100 mock) and print
// the variables the SPANK plugin exports.
func ExampleDiscover() {
	srv := dgxa100.New()
	for _, d := range srv.Devices { // the mock panics on clock calls unless set
		d.(*server.Device).GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
	}
	cvd := "1"
	c, err := gpuctx.Discover(srv, gpuctx.Options{VisibleDevices: &cvd, Accessible: func(int) bool { return true }})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kv := range c.Environ() {
		if !strings.HasPrefix(kv, "EASYSCALE_GPU_UUID=") { // random in the mock
			fmt.Println(kv)
		}
	}
	// Output:
	// EASYSCALE_GPU_COUNT=1
	// EASYSCALE_GPU_INDEX=1
	// EASYSCALE_GPU_MODEL=Mock NVIDIA A100-SXM4-40GB
	// EASYSCALE_GPU_MEMORY_BYTES=42949672960
	// EASYSCALE_GPU_COMPUTE_CAPABILITY=8.0
	// EASYSCALE_GPU_RELATIVE_SPEED=1.24
	// EASYSCALE_GPU_PCI_BUS_ID=
	// EASYSCALE_GPU_MAX_SM_CLOCK_MHZ=
	// EASYSCALE_GPU_DRIVER_VERSION=550.54.15
}
