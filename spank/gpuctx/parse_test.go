package gpuctx

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseVisibleDevicesFollowsCUDA(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ordinals", "0,2", "[{0 } {2 }]"},
		{"spaces around entries are ignored", " 1 , 3", "[{1 } {3 }]"},
		{"UUIDs", "GPU-abc,1", "[{-1 GPU-abc} {1 }]"},
		{"an invalid entry ends the list", "0,x,1", "[{0 }]"},
		{"a negative ordinal ends the list", "-1,0", "[]"},
		{"a repeated entry ends the list", "1,1,2", "[{1 }]"},
		{"an empty value is no device", "", "[]"},
		{"a bare GPU- prefix is invalid", "GPU-", "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(ParseVisibleDevices(tc.in)); got != tc.want && !(got == "[]" && tc.want == "[]") {
				t.Errorf("ParseVisibleDevices(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestSpeedLookupPrefersTheLongestKey(t *testing.T) {
	tests := []struct {
		model string
		want  float64
		known bool
	}{
		{"NVIDIA H100 PCIe", 3.25, true},
		{"NVIDIA H100 80GB HBM3", 4.27, true},
		{"Tesla V100-SXM2-16GB", 1, true},
		{"nvidia a100-sxm4-40gb", 1.24, true},
		{"NVIDIA GeForce RTX 4090", UnknownSpeed, false},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			got, known := DefaultSpeeds.Lookup(tc.model)
			if got != tc.want || known != tc.known {
				t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tc.model, got, known, tc.want, tc.known)
			}
		})
	}
}

func TestParseSpeedsRefusesBadEntries(t *testing.T) {
	for _, in := range []string{"A100", "=1", "A100=0", "A100=-1", "A100=NaN", "A100=1e9", "A100=1,,T4=2"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseSpeeds(in)
			var se *SpeedError
			if !errors.As(err, &se) {
				t.Errorf("ParseSpeeds(%q) error %v, want *SpeedError", in, err)
			}
		})
	}
}

func FuzzParseVisibleDevices(f *testing.F) {
	for _, s := range []string{"0,1", "GPU-1234,3", "NoDevFiles", "", "1,,2", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs := ParseVisibleDevices(s)
		seen := map[DeviceRef]bool{}
		for _, r := range refs {
			if seen[r] || (r.UUID == "" && r.Ordinal < 0) || (r.UUID != "" && !strings.HasPrefix(r.UUID, "GPU-")) {
				t.Fatalf("ParseVisibleDevices(%q) gave bad or repeated %+v", s, r)
			}
			seen[r] = true
		}
		if len(refs) > strings.Count(s, ",")+1 {
			t.Fatalf("%d refs from %q", len(refs), s)
		}
	})
}

func FuzzParseSpeeds(f *testing.F) {
	for _, s := range []string{"A100=1.3,T4=0.5", "", "x=1", "H100 PCIe = 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tab, err := ParseSpeeds(s)
		if err != nil {
			return
		}
		back, err := ParseSpeeds(tab.String())
		if err != nil || back.String() != tab.String() {
			t.Fatalf("round trip of %q: %q gave %q, %v", s, tab.String(), back.String(), err)
		}
	})
}
