// Package gpuctx finds the GPUs a Slurm task may use and describes them as
// EASYSCALE_* environment variables. It backs the easyscale-gpuctx helper,
// which the SPANK plugin runs as a separate process in each task's
// slurm_spank_task_init and whose KEY=VALUE output it copies into the task
// environment. This package is the only one that imports go-nvml.
//
// # Which GPUs
//
// CUDA_VISIBLE_DEVICES is read as CUDA reads it: a comma-separated list of
// ordinals or UUIDs (GPU-…, a unique prefix is enough); the list ends at the
// first entry that is invalid, out of range or repeated; unset means every
// device; empty means none. Ordinals count the devices this process can open
// in PCI bus order (the plugin sets CUDA_DEVICE_ORDER=PCI_BUS_ID). NVML lists
// every GPU of the node, also those a device cgroup hides (Slurm's
// ConstrainDevices=yes renumbers CUDA_VISIBLE_DEVICES from 0 inside the
// cgroup), so a GPU counts as visible only if its /dev/nvidiaN opens; this
// keeps --gpus-per-task numbering right with and without cgroups. MIG
// devices (MIG-…) are not supported and end the list.
//
// # Output (in this order; lists in CUDA ordinal order, comma separated)
//
//	EASYSCALE_GPU_COUNT                 number of GPUs (0: CPU workers)
//	EASYSCALE_GPU_INDEX                 NVML indices, e.g. 2,3
//	EASYSCALE_GPU_UUID                  GPU-… UUIDs
//	EASYSCALE_GPU_MODEL                 NVML names (commas replaced by spaces)
//	EASYSCALE_GPU_MEMORY_BYTES          total memory in bytes
//	EASYSCALE_GPU_COMPUTE_CAPABILITY    CUDA compute capability, e.g. 8.0
//	EASYSCALE_GPU_RELATIVE_SPEED        speed relative to a V100 (see SpeedTable)
//	EASYSCALE_GPU_PCI_BUS_ID            PCI bus ids ("" where NVML has none)
//	EASYSCALE_GPU_MAX_SM_CLOCK_MHZ      maximum SM clock ("" where not supported)
//	EASYSCALE_GPU_DRIVER_VERSION        driver version (one value)
//
// Without an NVIDIA driver (libnvidia-ml.so.1 missing or the kernel module
// not loaded) Discover returns an error wrapping ErrNoDriver; the helper
// then says so on stderr, prints EASYSCALE_GPU_COUNT=0 and exits 0.
package gpuctx
