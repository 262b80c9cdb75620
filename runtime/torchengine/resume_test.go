package torchengine

import (
	"encoding/json"
	"errors"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"strings"
	"testing"
)

func TestCheckResumeComparesTheCheckpointsNumericsWithThisRuns(t *testing.T) {
	// As a load answer reads: JSON numbers decode as float64 on both sides.
	this := Loaded{Versions: Versions{Torch: "2.6.0", Python: "3.13"}, Canary: "sha256:aa",
		Fingerprint: map[string]any{"torch": "2.6.0", "threads": 1.0, "cpu_capability": "AVX2", "env.ATEN_CPU_CAPABILITY": "",
			"cpu_isa": "sse4_1 sse4_2 avx fma avx2"}}
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
		name       string
		meta       map[string]string
		want       []string // in the error, in order; nil: resumes
		recorded   bool     // with want nil: compared (false: the caller warns)
		unrecorded []string // with want nil: this run's settings the record lacks (the caller warns)
	}{
		{"a checkpoint written before numerics were recorded", map[string]string{"easyscale.step": "8"}, nil, false, nil},
		{"an empty record", map[string]string{NumericsMeta: "{}"}, nil, false, nil},
		{"a null record", map[string]string{NumericsMeta: "null"}, nil, false, nil},
		{"the same numerics", record(func(*Loaded) {}), nil, true, nil},
		// A release that records a setting more (cpu_isa) resumes a
		// checkpoint of one that did not; the settings both hold compare.
		{"a setting the checkpoint did not record", record(func(l *Loaded) { delete(l.Fingerprint, "cpu_isa") }), nil, true,
			[]string{"cpu_isa"}},
		{"a record without a fingerprint", record(func(l *Loaded) { l.Fingerprint = nil }), nil, true,
			[]string{"cpu_capability", "cpu_isa", "env.ATEN_CPU_CAPABILITY", "threads", "torch"}},
		{"a record without a canary", record(func(l *Loaded) { l.Canary = "" }), nil, true, []string{"canary digest"}},
		{"a setting the checkpoint did not record, another that differs", record(func(l *Loaded) {
			delete(l.Fingerprint, "cpu_isa")
			l.Fingerprint["threads"] = 2.0
		}), []string{"threads: checkpoint 2, this run 1"}, true, nil},
		{"another torch, named once", record(func(l *Loaded) { l.Torch, l.Fingerprint["torch"] = "1.13.0a0", "1.13.0a0" }),
			[]string{"torch: checkpoint 1.13.0a0, this run 2.6.0"}, true, nil},
		{"another CPU: AVX-512", record(func(l *Loaded) { l.Fingerprint["cpu_isa"] = "sse4_1 sse4_2 avx fma avx2 avx512f" }),
			[]string{"cpu_isa: checkpoint sse4_1 sse4_2 avx fma avx2 avx512f, this run sse4_1 sse4_2 avx fma avx2"}, true, nil},
		{"only the canary: other hardware or libraries", record(func(l *Loaded) { l.Canary = "sha256:bb" }),
			[]string{"canary digest" + canaryOnly + ": checkpoint sha256:bb, this run sha256:aa"}, true, nil},
		{"another Python", record(func(l *Loaded) { l.Python = "3.11" }), []string{"Python: checkpoint 3.11, this run 3.13"}, true, nil},
		{"another ISA dispatch", record(func(l *Loaded) {
			l.Fingerprint["cpu_capability"] = "AVX512"
			l.Fingerprint["env.ATEN_CPU_CAPABILITY"] = "avx512"
			l.Canary = "sha256:bb"
		}), []string{"cpu_capability: checkpoint AVX512, this run AVX2", `env.ATEN_CPU_CAPABILITY: checkpoint avx512, this run ""`,
			"canary digest: checkpoint sha256:bb, this run sha256:aa"}, true, nil},
		{"an environment variable set on one side", record(func(l *Loaded) { l.Fingerprint["env.ATEN_CPU_CAPABILITY"] = "default" }),
			[]string{`env.ATEN_CPU_CAPABILITY: checkpoint default, this run ""`}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check, err := checkResume(tc.meta, 8, this)
			if tc.want == nil {
				if err != nil || check.Recorded != tc.recorded || strings.Join(check.Unrecorded, ",") != strings.Join(tc.unrecorded, ",") {
					t.Fatalf("%+v, err %v; want recorded %v, unrecorded %q and no error", check, err, tc.recorded, tc.unrecorded)
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
	_, err := checkResume(map[string]string{NumericsMeta: "{not json"}, 4, Loaded{})
	if err == nil || !strings.Contains(err.Error(), NumericsMeta) || !strings.Contains(err.Error(), "step 4") {
		t.Fatalf("err %v, want one naming %s and the step", err, NumericsMeta)
	}
	var re *ResumeError
	if errors.As(err, &re) {
		t.Fatalf("an unreadable record is not a difference in numerics: %v", err)
	}
}

// TestAFinishedJobsRefusalOffersNoStartOver: the refusal of a job that
// finished (trainer.FinishedRefusal) says its result stands and offers no
// start-over, which the trainer never does for it (a tester's: the
// message suggested --on-other-numerics=start-over, then said it did
// not apply); it still matches trainer.ErrOtherNumerics.
func TestAFinishedJobsRefusalOffersNoStartOver(t *testing.T) {
	re := &ResumeError{Step: 100, Differences: []string{"torch: checkpoint 1.13.0, this run 2.6.0"}}
	var f trainer.FinishedRefusal = re
	err := f.Finished(100)
	msg := err.Error()
	if !errors.Is(err, trainer.ErrOtherNumerics) || !strings.HasPrefix(msg, "the job finished at step 100: its result stands") ||
		strings.Contains(msg, "or start the job over") || !strings.Contains(msg, "torch: checkpoint 1.13.0, this run 2.6.0") {
		t.Fatalf("finished refusal %q (matches ErrOtherNumerics: %v)", msg, errors.Is(err, trainer.ErrOtherNumerics))
	}
	if re.FinishedAt != 0 || !strings.Contains(re.Error(), "or start the job over") {
		t.Fatalf("Finished changed the original: %q", re.Error())
	}
}
