package gpuctx

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockServer is a DGX mock whose devices also answer the clock and PCI calls
// (the shipped mocks panic on clocks and return no bus id).
type mockServer struct {
	lib   nvml.Interface
	uuids []string
}

func withClocksAndPCI(lib nvml.Interface, devices []nvml.Device, smMHz uint32) mockServer {
	m := mockServer{lib: lib}
	for i, d := range devices {
		var dev *mock.Device
		switch v := d.(type) {
		case *server.Device:
			dev = &v.Device
			m.uuids = append(m.uuids, v.UUID)
		default:
			panic(fmt.Sprintf("unexpected mock device %T", d))
		}
		busID := fmt.Sprintf("00000000:%02X:00.0", 7+i)
		dev.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_SM {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return smMHz, nvml.SUCCESS
		}
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j := range busID {
				p.BusId[j] = int8(busID[j])
			}
			return p, nvml.SUCCESS
		}
	}
	return m
}

func a100() mockServer {
	s := dgxa100.New()
	return withClocksAndPCI(s, s.Devices, 1410)
}

func h100() mockServer {
	s := dgxh100.New()
	return withClocksAndPCI(s, s.Devices, 1980)
}

func strp(s string) *string { return &s }

func allAccessible(int) bool { return true }

func TestDiscoverSelectsTheTasksGPUs(t *testing.T) {
	srv := a100()
	tests := []struct {
		name       string
		cvd        *string
		accessible func(int) bool
		want       []int // NVML indices
	}{
		{"unset CUDA_VISIBLE_DEVICES means every GPU", nil, allAccessible, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"an empty list means no GPU", strp(""), allAccessible, nil},
		{"ordinals are taken in the order given", strp("3,1"), allAccessible, []int{3, 1}},
		{"a UUID selects that GPU", strp(srv.uuids[5]), allAccessible, []int{5}},
		{"a unique UUID prefix is enough", strp(srv.uuids[6][:20] + ",0"), allAccessible, []int{6, 0}},
		{"the list ends at an out-of-range ordinal", strp("2,9,3"), allAccessible, []int{2}},
		{"the list ends at a repeated ordinal", strp("2,2,3"), allAccessible, []int{2}},
		{"Slurm's NoDevFiles means no GPU", strp("NoDevFiles"), allAccessible, nil},
		{"a MIG device ends the list", strp("1,MIG-abc"), allAccessible, []int{1}},
		{
			name:       "ordinals count only the GPUs a device cgroup lets the task open",
			cvd:        strp("1"),
			accessible: func(minor int) bool { return minor == 2 || minor == 3 },
			want:       []int{3},
		},
		{
			name:       "with --gpus-per-task and no cgroup each task names its own GPU",
			cvd:        strp("6"),
			accessible: allAccessible,
			want:       []int{6},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Discover(srv.lib, Options{VisibleDevices: tc.cvd, Accessible: tc.accessible})
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			var got []int
			for _, g := range c.GPUs {
				got = append(got, g.Index)
				if g.UUID != srv.uuids[g.Index] {
					t.Errorf("GPU %d has UUID %s, want %s", g.Index, g.UUID, srv.uuids[g.Index])
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got GPUs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEnvironDescribesTheGPUs(t *testing.T) {
	tests := []struct {
		name string
		srv  mockServer
		cvd  string
		want []string
	}{
		{
			name: "one A100 of a DGX A100",
			srv:  a100(),
			cvd:  "2",
			want: []string{
				"EASYSCALE_GPU_COUNT=1",
				"EASYSCALE_GPU_INDEX=2",
				"EASYSCALE_GPU_MODEL=Mock NVIDIA A100-SXM4-40GB",
				"EASYSCALE_GPU_MEMORY_BYTES=42949672960",
				"EASYSCALE_GPU_COMPUTE_CAPABILITY=8.0",
				"EASYSCALE_GPU_RELATIVE_SPEED=1.24",
				"EASYSCALE_GPU_PCI_BUS_ID=00000000:09:00.0",
				"EASYSCALE_GPU_MAX_SM_CLOCK_MHZ=1410",
				"EASYSCALE_GPU_DRIVER_VERSION=550.54.15",
			},
		},
		{
			name: "two H100s are listed in CUDA ordinal order",
			srv:  h100(),
			cvd:  "4,0",
			want: []string{
				"EASYSCALE_GPU_COUNT=2",
				"EASYSCALE_GPU_INDEX=4,0",
				"EASYSCALE_GPU_MODEL=NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3",
				"EASYSCALE_GPU_PCI_BUS_ID=00000000:0B:00.0,00000000:07:00.0",
				"EASYSCALE_GPU_MEMORY_BYTES=85899345920,85899345920",
				"EASYSCALE_GPU_COMPUTE_CAPABILITY=9.0,9.0",
				"EASYSCALE_GPU_RELATIVE_SPEED=4.27,4.27",
				"EASYSCALE_GPU_MAX_SM_CLOCK_MHZ=1980,1980",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Discover(tc.srv.lib, Options{VisibleDevices: &tc.cvd, Accessible: allAccessible})
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			env := strings.Join(c.Environ(), "\n")
			for _, w := range tc.want {
				if !strings.Contains(env+"\n", w+"\n") {
					t.Errorf("environ lacks %q:\n%s", w, env)
				}
			}
			if uuid := "EASYSCALE_GPU_UUID=" + c.GPUs[0].UUID; !strings.Contains(env, uuid) {
				t.Errorf("environ lacks %q", uuid)
			}
		})
	}
}

func noDriver(ret nvml.Return) nvml.Interface {
	return &mock.Interface{InitFunc: func() nvml.Return { return ret }}
}

func TestRunWithoutADriverPrintsZeroGPUsAndSucceeds(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		t.Run(ret.String(), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(nil, func(string) (string, bool) { return "", false }, noDriver(ret), &out, &errOut)
			if code != 0 || out.String() != "EASYSCALE_GPU_COUNT=0\n" {
				t.Errorf("exit %d stdout %q, want 0 and only the zero count", code, out.String())
			}
			if !strings.Contains(errOut.String(), "no NVIDIA driver") {
				t.Errorf("stderr %q does not say the driver is missing", errOut.String())
			}
		})
	}
}

func TestRunReportsOtherNVMLFailures(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(nil, func(string) (string, bool) { return "", false }, noDriver(nvml.ERROR_NO_PERMISSION), &out, &errOut)
	if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "NVML init") {
		t.Errorf("exit %d stdout %q stderr %q", code, out.String(), errOut.String())
	}
	_, err := Discover(noDriver(nvml.ERROR_NO_PERMISSION), Options{})
	if !errors.Is(err, nvml.ERROR_NO_PERMISSION) || errors.Is(err, ErrNoDriver) {
		t.Errorf("Discover error %v", err)
	}
}

func TestRunTakesSpeedsFromTheFlagOverTheEnvironment(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
		code int
	}{
		{"the environment overrides the built-in table", nil, map[string]string{EnvSpeeds: "A100=2"}, "EASYSCALE_GPU_RELATIVE_SPEED=2\n", 0},
		{"the flag wins over the environment", []string{"--speeds=A100=3"}, map[string]string{EnvSpeeds: "A100=2"}, "EASYSCALE_GPU_RELATIVE_SPEED=3\n", 0},
		{"a bad environment table is an error", nil, map[string]string{EnvSpeeds: "A100=fast"}, "", 2},
		{"an unknown flag is an error", []string{"--bogus"}, nil, "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvVisibleDevices: "0"}
			for k, v := range tc.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			srv := a100()
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			code := Run(tc.args, lookup, srv.lib, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Errorf("exit %d, stdout %q; want %d and %q (stderr %q)", code, out.String(), tc.code, tc.want, errOut.String())
			}
		})
	}
}

func TestHelpListsDefaultsAndEnvironment(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run([]string{"--help"}, func(string) (string, bool) { return "", false }, nil, &out, &errOut); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, w := range []string{"CUDA_VISIBLE_DEVICES", EnvSpeeds, "--speeds", "V100=1"} {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("help lacks %q:\n%s", w, errOut.String())
		}
	}
}
