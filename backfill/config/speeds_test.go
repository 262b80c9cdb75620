package config

import (
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/spank/gpuctx"
)

// The daemon's default speeds are spank/gpuctx's table (the one source); a
// test, not an import, keeps go-nvml out of the daemon's binary.
func TestDefaultSpeedsAreTheGPUHelpersTable(t *testing.T) {
	for typ, speed := range DefaultSpeeds {
		t.Run(typ, func(t *testing.T) {
			want, known := gpuctx.DefaultSpeeds.Lookup(strings.ToUpper(typ))
			if !known || want != speed {
				t.Fatalf("DefaultSpeeds[%q] = %v, gpuctx says %v (known %v)", typ, speed, want, known)
			}
		})
	}
	for model, speed := range gpuctx.DefaultSpeeds {
		typ := strings.ToLower(model)
		if strings.Contains(typ, " ") {
			continue // no GRES type has a space ("H100 PCIe")
		}
		if DefaultSpeeds[typ] != speed {
			t.Errorf("gpuctx has %s = %v, DefaultSpeeds[%q] = %v", model, speed, typ, DefaultSpeeds[typ])
		}
	}
}
