package torchengine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckResumeComparesTheCheckpointsNumericsWithThisRuns(t *testing.T) {
	// As a load answer reads: JSON numbers decode as float64 on both sides.
	this := Loaded{Versions: Versions{Torch: "2.6.0", Python: "3.13"}, Canary: "sha256:aa",
		Fingerprint: map[string]any{"threads": 1.0, "cpu_capability": "AVX2", "env.ATEN_CPU_CAPABILITY": ""}}
	record := func(change func(l *Loaded)) map[string]string {
		l := this
		l.Fingerprint = map[string]any{}
		for k, v := range this.Fingerprint {
			l.Fingerprint[k] = v
		}
		change(&l)
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{NumericsMeta: string(b), "easyscale.step": "8"}
	}
	for _, tc := range []struct {
		name string
		meta map[string]string
		want []string // in the error, in order; nil: resumes
	}{
		{"a checkpoint written before numerics were recorded", map[string]string{"easyscale.step": "8"}, nil},
		{"the same numerics", record(func(*Loaded) {}), nil},
		{"another torch", record(func(l *Loaded) { l.Torch = "1.13.0a0" }), []string{"torch: checkpoint 1.13.0a0, this run 2.6.0"}},
		{"another Python", record(func(l *Loaded) { l.Python = "3.11" }), []string{"Python: checkpoint 3.11, this run 3.13"}},
		{"another ISA dispatch", record(func(l *Loaded) {
			l.Fingerprint["cpu_capability"] = "AVX512"
			l.Fingerprint["env.ATEN_CPU_CAPABILITY"] = "avx512"
			l.Canary = "sha256:bb"
		}), []string{"cpu_capability: checkpoint AVX512, this run AVX2", `env.ATEN_CPU_CAPABILITY: checkpoint avx512, this run ""`,
			"canary digest: checkpoint sha256:bb, this run sha256:aa"}},
		{"a GPU model recorded, none now", record(func(l *Loaded) { l.Fingerprint["device_name"] = "NVIDIA H200" }),
			[]string{`device_name: checkpoint NVIDIA H200, this run ""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResume(tc.meta, 8, this)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *ResumeError
			if !errors.As(err, &re) || re.Step != 8 {
				t.Fatalf("err %v, want a *ResumeError of step 8", err)
			}
			if strings.Join(re.Differences, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("differences %q, want %q", re.Differences, tc.want)
			}
			if !strings.Contains(err.Error(), "new --state directory") {
				t.Errorf("the error names no fix: %v", err)
			}
		})
	}
}

func TestCheckResumeNamesAnUnreadableRecord(t *testing.T) {
	err := checkResume(map[string]string{NumericsMeta: "{not json"}, 4, Loaded{})
	if err == nil || !strings.Contains(err.Error(), NumericsMeta) || !strings.Contains(err.Error(), "step 4") {
		t.Fatalf("err %v, want one naming %s and the step", err, NumericsMeta)
	}
	var re *ResumeError
	if errors.As(err, &re) {
		t.Fatalf("an unreadable record is not a difference in numerics: %v", err)
	}
}
