package gpuctx

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver is wrapped by Discover's error when NVML is not there
// (libnvidia-ml.so.1 missing or the driver not loaded).
var ErrNoDriver = errors.New("no NVIDIA driver")

// GPU describes one GPU a task may use.
type GPU struct {
	Index         int     // NVML index (PCI bus order over the whole node)
	UUID          string  // "GPU-…"
	Model         string  // NVML name, e.g. "NVIDIA A100-SXM4-40GB"
	MemoryBytes   uint64  // total memory, bytes
	CCMajor       int     // CUDA compute capability, major
	CCMinor       int     // CUDA compute capability, minor
	RelativeSpeed float64 // from the SpeedTable, V100 = 1.0
	PCIBusID      string  // e.g. "00000000:07:00.0"; "" when NVML gives none
	MaxSMClockMHz uint32  // 0 when not supported
}

// Context is what Discover found: the driver and the task's GPUs in CUDA
// ordinal order.
type Context struct {
	DriverVersion string
	GPUs          []GPU
}

// Options select and describe the GPUs.
type Options struct {
	// VisibleDevices is CUDA_VISIBLE_DEVICES; nil when the variable is unset.
	VisibleDevices *string
	// Speeds gives EASYSCALE_GPU_RELATIVE_SPEED; nil means DefaultSpeeds.
	Speeds SpeedTable
	// Accessible reports whether the device with this minor number can be
	// opened by the task; nil means DeviceFileAccessible.
	Accessible func(minor int) bool
}

// DeviceFileAccessible reports whether /dev/nvidia<minor> opens for reading.
// A missing file counts as accessible (containers without device files);
// only a permission error (a device cgroup or file mode) hides the GPU.
func DeviceFileAccessible(minor int) bool {
	f, err := os.Open("/dev/nvidia" + strconv.Itoa(minor))
	if err != nil {
		return !errors.Is(err, os.ErrPermission)
	}
	f.Close()
	return true
}

// Discover initialises NVML through lib, selects the GPUs the options name
// and queries them; it shuts NVML down before returning. Errors wrap
// ErrNoDriver when NVML is absent, or name the NVML call that failed.
func Discover(lib nvml.Interface, o Options) (Context, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return Context{}, fmt.Errorf("%w (NVML init: %v)", ErrNoDriver, ret)
	default:
		return Context{}, fmt.Errorf("NVML init: %w", ret)
	}
	defer lib.Shutdown()
	var c Context
	var err error
	if c.DriverVersion, err = call(lib.SystemGetDriverVersion, "driver version"); err != nil {
		return Context{}, err
	}
	visible, err := visibleDevices(lib, o.accessible())
	if err != nil {
		return Context{}, err
	}
	for _, d := range selectDevices(visible, o.VisibleDevices) {
		g, err := describe(d, o.speeds())
		if err != nil {
			return Context{}, err
		}
		c.GPUs = append(c.GPUs, g)
	}
	return c, nil
}

func (o Options) accessible() func(int) bool {
	if o.Accessible == nil {
		return DeviceFileAccessible
	}
	return o.Accessible
}

func (o Options) speeds() SpeedTable {
	if o.Speeds == nil {
		return DefaultSpeeds
	}
	return o.Speeds
}

// nvmlDevice pairs a handle with its NVML index and UUID.
type nvmlDevice struct {
	index  int
	uuid   string
	handle nvml.Device
}

// visibleDevices lists, in NVML index order, the devices this process can open.
func visibleDevices(lib nvml.Interface, accessible func(int) bool) ([]nvmlDevice, error) {
	n, err := call(lib.DeviceGetCount, "device count")
	if err != nil {
		return nil, err
	}
	var out []nvmlDevice
	for i := 0; i < n; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d handle: %w", i, ret)
		}
		minor, ret := h.GetMinorNumber()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d minor number: %w", i, ret)
		}
		if !accessible(minor) {
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d UUID: %w", i, ret)
		}
		out = append(out, nvmlDevice{index: i, uuid: uuid, handle: h})
	}
	return out, nil
}

// selectDevices applies CUDA_VISIBLE_DEVICES (see the package doc).
func selectDevices(visible []nvmlDevice, cvd *string) []nvmlDevice {
	if cvd == nil {
		return visible
	}
	var out []nvmlDevice
	taken := map[int]bool{}
	for _, ref := range ParseVisibleDevices(*cvd) {
		i := resolve(visible, ref)
		if i < 0 || taken[i] {
			break
		}
		taken[i] = true
		out = append(out, visible[i])
	}
	return out
}

// resolve returns the position in visible that ref names, or -1.
func resolve(visible []nvmlDevice, ref DeviceRef) int {
	if ref.UUID == "" {
		if ref.Ordinal < len(visible) {
			return ref.Ordinal
		}
		return -1
	}
	found := -1
	for i, d := range visible {
		if strings.HasPrefix(d.uuid, ref.UUID) {
			if found >= 0 {
				return -1 // ambiguous prefix
			}
			found = i
		}
	}
	return found
}

func describe(d nvmlDevice, speeds SpeedTable) (GPU, error) {
	g := GPU{Index: d.index, UUID: d.uuid}
	var ret nvml.Return
	wrap := func(what string) error { return fmt.Errorf("NVML device %d %s: %w", d.index, what, ret) }
	if g.Model, ret = d.handle.GetName(); ret != nvml.SUCCESS {
		return GPU{}, wrap("name")
	}
	mem, ret := d.handle.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, wrap("memory info")
	}
	g.MemoryBytes = mem.Total
	if g.CCMajor, g.CCMinor, ret = d.handle.GetCudaComputeCapability(); ret != nvml.SUCCESS {
		return GPU{}, wrap("compute capability")
	}
	g.RelativeSpeed, _ = speeds.Lookup(g.Model)
	if pci, ret := d.handle.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(pci.BusId[:])
	}
	if mhz, ret := d.handle.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		g.MaxSMClockMHz = mhz
	}
	return g, nil
}

// cString converts NVML's NUL-terminated int8 array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func call[T any](f func() (T, nvml.Return), what string) (T, error) {
	v, ret := f()
	if ret != nvml.SUCCESS {
		var zero T
		return zero, fmt.Errorf("NVML %s: %w", what, ret)
	}
	return v, nil
}
