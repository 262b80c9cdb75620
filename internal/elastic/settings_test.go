package elastic

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func envLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func flag(option, value string) Setting {
	return Setting{Set: true, Value: value, Origin: "--" + option}
}

func TestMergeGivesTheFlagPrecedenceOverTheEnvironment(t *testing.T) {
	tests := []struct {
		name  string
		flags Settings
		env   map[string]string
		want  Request
	}{
		{
			name:  "a flag wins over its environment twin",
			flags: Settings{Elastic: flag(OptionElastic, "2-3")},
			env:   map[string]string{EnvElastic: "1-8"},
			want:  Request{MinNodes: 2, MaxNodes: 3, Determinism: D1},
		},
		{
			name:  "the environment fills options the flags leave unset",
			flags: Settings{Elastic: flag(OptionElastic, "1-4")},
			env:   map[string]string{EnvLogicalWorkers: "8", EnvDeterminism: "d2"},
			want:  Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D2},
		},
		{
			name:  "an empty environment variable counts as unset",
			flags: Settings{LogicalWorkers: flag(OptionLogicalWorkers, "4")},
			env:   map[string]string{EnvElastic: ""},
			want:  Request{LogicalWorkers: 4, Determinism: D1},
		},
		{
			name:  "a bad environment value is ignored when the flag is given",
			flags: Settings{LogicalWorkers: flag(OptionLogicalWorkers, "4")},
			env:   map[string]string{EnvLogicalWorkers: "0"},
			want:  Request{LogicalWorkers: 4, Determinism: D1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Merge(tc.flags, FromEnv(envLookup(tc.env))).Request()
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRequestErrorsNameTheOptionAndWhereTheValueCameFrom(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		want     []string
		cause    error
	}{
		{
			name:     "a reversed range on the command line",
			settings: Settings{Elastic: flag(OptionElastic, "4-2")},
			want:     []string{"--elastic=4-2", "minimum 4 larger than maximum 2"},
			cause:    ErrReversed,
		},
		{
			name:     "a negative count (a new user saw \"minimum: empty value\")",
			settings: Settings{Elastic: flag(OptionElastic, "-1")},
			want:     []string{"--elastic=-1", "at least 1, not negative"},
			cause:    ErrOutOfRange,
		},
		{
			name:     "zero logical workers from the environment",
			settings: FromEnv(envLookup(map[string]string{EnvLogicalWorkers: "0"})),
			want:     []string{"--logical-workers=0", "from EASYSCALE_LOGICAL_WORKERS"},
			cause:    ErrOutOfRange,
		},
		{
			name: "more nodes than logical workers from a script directive",
			settings: Settings{
				Elastic:        Setting{Set: true, Value: "1-9", Origin: "job.sbatch:3"},
				LogicalWorkers: flag(OptionLogicalWorkers, "8"),
			},
			want:  []string{"--elastic=1-9", "job.sbatch:3", "--logical-workers=8"},
			cause: ErrTooManyNodes,
		},
		{
			name:     "an unknown determinism level",
			settings: Settings{Determinism: flag(OptionDeterminism, "d0")},
			want:     []string{"--determinism=d0", "d1 or d2"},
			cause:    ErrDeterminism,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.settings.Request()
			if !errors.Is(err, tc.cause) {
				t.Fatalf("error %v does not wrap %v", err, tc.cause)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestSettingsAnyTellsWhetherTheJobIsAnEasyScaleJob(t *testing.T) {
	if (Settings{}).Any() {
		t.Error("empty settings claim an EasyScale job")
	}
	if !(Settings{Determinism: flag(OptionDeterminism, "d2")}).Any() {
		t.Error("settings with --determinism do not claim an EasyScale job")
	}
}

func TestRequestEnvironListsOnlyWhatIsSet(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"an elastic request lists all three", Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D2},
			"EASYSCALE_ELASTIC=1-4 EASYSCALE_LOGICAL_WORKERS=8 EASYSCALE_DETERMINISM=d2"},
		{"a single node count is written without a dash", Request{MinNodes: 3, MaxNodes: 3},
			"EASYSCALE_ELASTIC=3 EASYSCALE_DETERMINISM=d1"},
		{"a fixed-size request lists no range", Request{LogicalWorkers: 2, Determinism: D1},
			"EASYSCALE_LOGICAL_WORKERS=2 EASYSCALE_DETERMINISM=d1"},
		{"the job's own speeds come last", Request{MinNodes: 1, MaxNodes: 2, Speeds: map[string]float64{"v100": 1, "t4": 0.4}},
			"EASYSCALE_ELASTIC=1-2 EASYSCALE_DETERMINISM=d1 EASYSCALE_SPEEDS=t4:0.4,v100:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(tc.req.Environ(), " "); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStatusCommentFromTheEnvironmentKeepsTheJobsSpeeds is the runtime's
// path: easyscale-sbatch exports the request (Environ), the runtime reads it
// back (FromEnv) and rewrites the comment in the status form, which must
// still carry the job's speeds for easyscale-backfilld.
func TestStatusCommentFromTheEnvironmentKeepsTheJobsSpeeds(t *testing.T) {
	sent := Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D1, Speeds: map[string]float64{"v100": 1, "t4": 0.4}}
	env := map[string]string{}
	for _, kv := range sent.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := FromEnv(envLookup(env)).Request()
	if err != nil {
		t.Fatal(err)
	}
	comment := Comment{Request: got, Progress: &Progress{Step: 10, TotalSteps: 100, Workers: 2}}.String()
	back, err := ParseComment(comment)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(comment, " speeds=t4:0.4,v100:1") || back.Request.Speeds["t4"] != 0.4 || back.Request.Speeds["v100"] != 1 {
		t.Fatalf("status comment %q (speeds read back %v) lost the job's speeds", comment, back.Request.Speeds)
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"1", "1-4", "4-2", "0", "", "-", "1-", "01-0010", "99999999", "1-2-3", "+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := ParseRange(s)
		if err != nil {
			return
		}
		if lo < 1 || hi < lo || hi > MaxCount {
			t.Fatalf("ParseRange(%q) = %d, %d accepted out of bounds", s, lo, hi)
		}
		r := Request{MinNodes: lo, MaxNodes: hi}
		lo2, hi2, err := ParseRange(r.Range())
		if err != nil || lo2 != lo || hi2 != hi {
			t.Fatalf("canonical %q of %q reparsed as %d, %d, %v", r.Range(), s, lo2, hi2, err)
		}
	})
}

func FuzzSettingsRequest(f *testing.F) {
	f.Add("1-4", "8", "d1")
	f.Add("4-2", "0", "d3")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, el, lw, det string) {
		s := Settings{Elastic: flag(OptionElastic, el), LogicalWorkers: flag(OptionLogicalWorkers, lw),
			Determinism: flag(OptionDeterminism, det)}
		r, err := s.Request()
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an *OptionError", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted request %+v does not validate: %v", r, err)
		}
		// The environment twins of an accepted request give the same request.
		env := map[string]string{}
		for _, kv := range r.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		back, err := FromEnv(envLookup(env)).Request()
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("environ round trip of %+v gave %+v, %v", r, back, err)
		}
	})
}
