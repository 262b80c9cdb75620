package plugintest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlugstackArgumentsAreCheckedAtInit drives args.c (es_parse_args, what
// slurm_spank_init calls with the words after the plugin path in
// plugstack.conf) through testdata/args_main.c. A bad argument makes init
// fail with an error naming the argument and why, so srun and sbatch refuse
// to run with a misconfigured plugstack.conf.
func TestPlugstackArgumentsAreCheckedAtInit(t *testing.T) {
	need(t, spankH+" (libslurm-dev)", haveFile(spankH))
	bin := compile(t, "argstest", "testdata/args_main.c", "testdata/stub.c",
		filepath.Join(pluginDir, "args.c"), filepath.Join(pluginDir, "request.c"), "-ldl")
	long := "helper=/" + strings.Repeat("a", 4100)
	tests := []struct {
		name string
		args []string
		want []string // lines or fragments the driver must print
	}{
		{"no argument gives the defaults", nil,
			[]string{"RC 0", "/easyscale-gpuctx\n", "TIMEOUT 10"}},
		{"an absolute helper and both timeout bounds are taken",
			[]string{"helper=/opt/easyscale/easyscale-gpuctx", "helper_timeout=1", "helper_timeout=300"},
			[]string{"RC 0", "HELPER /opt/easyscale/easyscale-gpuctx\n", "TIMEOUT 300"}},
		{"an unknown argument fails init and is named", []string{"helper_timeout=5", "verbose"},
			[]string{`error: easyscale: init: invalid plugstack.conf argument "verbose": unknown argument ` +
				`(known: helper=/ABSOLUTE/PATH, helper_timeout=1..300)`, "RC -1"}},
		{"a relative helper path fails init", []string{"helper=bin/easyscale-gpuctx"},
			[]string{`"helper=bin/easyscale-gpuctx": the helper must be an absolute path`, "RC -1"}},
		{"an empty helper path fails init", []string{"helper="},
			[]string{`"helper=": the helper must be an absolute path`, "RC -1"}},
		{"a helper path longer than the buffer fails init", []string{long},
			[]string{"the helper path is longer than 4095 bytes", "RC -1"}},
		{"a timeout of 0 s fails init", []string{"helper_timeout=0"},
			[]string{`"helper_timeout=0": the timeout must be whole seconds from 1 to 300`, "RC -1"}},
		{"a timeout of 301 s fails init", []string{"helper_timeout=301"},
			[]string{`"helper_timeout=301": the timeout must be whole seconds from 1 to 300`, "RC -1"}},
		{"a timeout with a unit fails init", []string{"helper_timeout=10s"},
			[]string{`"helper_timeout=10s"`, "RC -1"}},
		{"a signed timeout fails init", []string{"helper_timeout=+10"},
			[]string{`"helper_timeout=+10"`, "RC -1"}},
		{"an empty timeout fails init", []string{"helper_timeout="},
			[]string{`"helper_timeout="`, "RC -1"}},
		{"a key without '=' is unknown", []string{"helper"},
			[]string{`"helper": unknown argument`, "RC -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).CombinedOutput()
			if err != nil {
				t.Fatalf("driver: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%.600s", w, out)
				}
			}
			if strings.Contains(string(out), "RC -1") && !strings.Contains(string(out), "error: easyscale: init: ") {
				t.Errorf("init failed without an error line:\n%.600s", out)
			}
		})
	}
	t.Run("the default helper is the one next to the plugin when it is there", func(t *testing.T) {
		dir := t.TempDir()
		drv := filepath.Join(dir, "argstest")
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(drv, b, 0o755); err != nil {
			t.Fatal(err)
		}
		helper := filepath.Join(dir, "easyscale-gpuctx")
		if err := os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(drv).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "HELPER "+helper+"\n") {
			t.Errorf("driver next to %s printed (%v):\n%s", helper, err, out)
		}
	})
}

// TestTaskEnvironmentValuesLongerThanTheirBufferAreLogged drives remote.c
// (slurm_spank_task_init in slurmstepd) through testdata/remote_main.c with
// a task environment of its own. spank_getenv copies a value into a fixed
// buffer and reports ESPANK_NOSPACE when it does not fit: such a value is
// logged with the variable's name and limit and not used, and the task still
// runs.
func TestTaskEnvironmentValuesLongerThanTheirBufferAreLogged(t *testing.T) {
	need(t, spankH+" (libslurm-dev)", haveFile(spankH))
	bin := compile(t, "remotetest", "testdata/remote_main.c", "testdata/stub.c",
		filepath.Join(pluginDir, "remote.c"), filepath.Join(pluginDir, "args.c"),
		filepath.Join(pluginDir, "request.c"), "-ldl")
	tests := []struct {
		name   string
		env    []string
		want   []string
		absent []string
	}{
		{"a request that fits is exported", []string{"EASYSCALE_ELASTIC=1-4", "EASYSCALE_LOGICAL_WORKERS=8"},
			[]string{"SETENV EASYSCALE_ELASTIC=1-4", "SETENV EASYSCALE_ELASTIC_MAX=4", "SETENV EASYSCALE_LOGICAL_WORKERS=8",
				"SETENV EASYSCALE_JOB_ID=42", "HELPER /stub/easyscale-gpuctx 10", "RC 0"},
			[]string{"error:"}},
		{"an elastic value longer than 63 bytes is logged and not used",
			[]string{"EASYSCALE_ELASTIC=" + strings.Repeat("1", 70), "EASYSCALE_LOGICAL_WORKERS=8"},
			[]string{"error: easyscale: task_init: EASYSCALE_ELASTIC in the task environment is longer than its limit of 63 bytes; ignored",
				"SETENV EASYSCALE_LOGICAL_WORKERS=8", "RC 0"},
			[]string{"SETENV EASYSCALE_ELASTIC="}},
		{"a determinism value longer than 15 bytes is logged",
			[]string{"EASYSCALE_DETERMINISM=d1" + strings.Repeat(" ", 20)},
			[]string{"EASYSCALE_DETERMINISM in the task environment is longer than its limit of 15 bytes; ignored", "RC 0"},
			nil},
		{"a job-control twin longer than its buffer is logged under its own name",
			[]string{"SLURM_SPANK_EASYSCALE_LOGICAL_WORKERS=" + strings.Repeat("9", 40)},
			[]string{"SLURM_SPANK_EASYSCALE_LOGICAL_WORKERS in the task environment is longer than its limit of 31 bytes; ignored", "RC 0"},
			[]string{"SETENV EASYSCALE_LOGICAL_WORKERS="}},
		{"a value of exactly the limit is read whole", []string{"EASYSCALE_LOGICAL_WORKERS=" + strings.Repeat("0", 24) + "0000012"},
			[]string{"invalid --logical-workers=" + strings.Repeat("0", 24) + "0000012", "RC 0"},
			[]string{"longer than its limit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, tc.env...).CombinedOutput()
			if err != nil {
				t.Fatalf("driver: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(string(out), a) {
					t.Errorf("output has %q:\n%s", a, out)
				}
			}
		})
	}
}
