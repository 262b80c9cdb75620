package gpuctx

import (
	"strconv"
	"strings"
)

// Environ renders the context as KEY=VALUE lines in the order of the package
// documentation. With no GPU only EASYSCALE_GPU_COUNT=0 is returned (plus the
// driver version when known).
func (c Context) Environ() []string {
	env := []string{"EASYSCALE_GPU_COUNT=" + strconv.Itoa(len(c.GPUs))}
	if len(c.GPUs) > 0 {
		env = append(env,
			list("INDEX", c.GPUs, func(g GPU) string { return strconv.Itoa(g.Index) }),
			list("UUID", c.GPUs, func(g GPU) string { return g.UUID }),
			list("MODEL", c.GPUs, func(g GPU) string { return clean(g.Model) }),
			list("MEMORY_BYTES", c.GPUs, func(g GPU) string { return strconv.FormatUint(g.MemoryBytes, 10) }),
			list("COMPUTE_CAPABILITY", c.GPUs, func(g GPU) string {
				return strconv.Itoa(g.CCMajor) + "." + strconv.Itoa(g.CCMinor)
			}),
			list("RELATIVE_SPEED", c.GPUs, func(g GPU) string { return strconv.FormatFloat(g.RelativeSpeed, 'g', -1, 64) }),
			list("PCI_BUS_ID", c.GPUs, func(g GPU) string { return clean(g.PCIBusID) }),
			list("MAX_SM_CLOCK_MHZ", c.GPUs, func(g GPU) string {
				if g.MaxSMClockMHz == 0 {
					return ""
				}
				return strconv.FormatUint(uint64(g.MaxSMClockMHz), 10)
			}),
		)
	}
	if c.DriverVersion != "" {
		env = append(env, "EASYSCALE_GPU_DRIVER_VERSION="+clean(c.DriverVersion))
	}
	return env
}

func list(key string, gpus []GPU, f func(GPU) string) string {
	vals := make([]string, len(gpus))
	for i, g := range gpus {
		vals[i] = f(g)
	}
	return "EASYSCALE_GPU_" + key + "=" + strings.Join(vals, ",")
}

// clean keeps a value on one line and free of the list separator.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ',' || r == '\n' || r == '\r' || r == 0 {
			return ' '
		}
		return r
	}, s)
}
