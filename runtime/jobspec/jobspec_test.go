package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const minimal = `
task = "mnist"
logical_workers = 8
micro_batch = 32
epochs = 1
[optimizer]
lr = 0.05
momentum = 0.9
`

func TestParseAppliesDefaults(t *testing.T) {
	s, err := Parse(minimal)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "mnist" || s.CheckpointEvery != 50 || s.Optimizer.Kind != "sgd" || s.Model.Hidden != 128 || len(s.Model.Channels) != 2 {
		t.Fatalf("defaults not applied: %+v", s)
	}
	if got, err := s.Horizon(234); got != 234 || err != nil {
		t.Fatalf("Horizon = %d, %v, want 234", got, err)
	}
	s.Epochs = MaxEpochs
	if _, err := s.Horizon(1 << 20); err == nil || !strings.Contains(err.Error(), "epochs") {
		t.Fatalf("an overflowing horizon was accepted: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"malformed TOML", "task = ", "parsing TOML"},
		{"an unknown top-level key", minimal + "\nlogical_worker = 3\n", "logical_worker"},
		{"an unknown nested key", minimal + "\nlearning_rate = 0.1\n", "optimizer.learning_rate"},
		{"an unknown task", strings.Replace(minimal, `"mnist"`, `"imagenet"`, 1), "task:"},
		{"zero logical workers", strings.Replace(minimal, "logical_workers = 8", "logical_workers = 0", 1), "logical_workers:"},
		{"no horizon", strings.Replace(minimal, "epochs = 1", "", 1), "steps:"},
		{"a negative learning rate", strings.Replace(minimal, "lr = 0.05", "lr = -1.0", 1), "optimizer.lr:"},
		{"nesterov without momentum", strings.Replace(minimal, "momentum = 0.9", "nesterov = true", 1), "optimizer.nesterov:"},
		{"a negative seed", "seed = -1\n" + minimal, "seed:"},
		{"huge epochs", strings.Replace(minimal, "epochs = 1", "epochs = 9223372036854775807", 1), "epochs:"},
		{"both steps and epochs", strings.Replace(minimal, "epochs = 1", "epochs = 1\nsteps = 10", 1), "either steps or epochs"},
		{"a speed that is not positive", minimal + "\n[speeds]\nt4 = -0.4\n", "speeds:"},
		{"a speed that is not a number", minimal + "\n[speeds]\nt4 = \"fast\"\n", "parsing TOML"},
		{"a charlm key in an mnist job", minimal + "\n[model]\nheads = 2\n", "model.heads: does not apply"},
		{"heads not dividing d_model", "task=\"charlm\"\nlogical_workers=2\nmicro_batch=2\nsteps=3\n[model]\nd_model=10\nheads=3\n[optimizer]\nlr=0.001\nkind=\"adamw\"\n", "model.heads:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestUnknownKeysAreTyped(t *testing.T) {
	_, err := Parse(minimal + "\nfoo = 1\nbar = 2\n")
	if !errors.Is(err, ErrUnknownKeys) || !strings.Contains(err.Error(), "optimizer.bar ([optimizer] holds beta1, beta2, eps, kind, lr, momentum, nesterov, weight_decay), optimizer.foo;") {
		t.Fatalf("error = %v, want ErrUnknownKeys listing bar, foo", err)
	}
	if !strings.Contains(err.Error(), "see examples/mnist/job.toml") {
		t.Errorf("error = %v, want it to point to the native example", err)
	}
	// a torch job is pointed to the torch example (a new user's finding)
	_, err = Parse("engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\nthread = 1\n")
	if !errors.Is(err, ErrUnknownKeys) || !strings.Contains(err.Error(), "torch.thread") || !strings.Contains(err.Error(), "see examples/torch-ddp/job.toml") {
		t.Errorf("error = %v, want ErrUnknownKeys naming torch.thread and the torch example", err)
	}
}

func TestIDIgnoresDataDirButNotSemantics(t *testing.T) {
	a, _ := Parse(minimal)
	b, _ := Parse(minimal + "\n[data]\ndir = \"/elsewhere\"\n")
	c, _ := Parse(strings.Replace(minimal, "micro_batch = 32", "micro_batch = 16", 1))
	if a.ID() != b.ID() {
		t.Error("moving the data changed the job identity")
	}
	if a.ID() == c.ID() {
		t.Error("a different micro-batch kept the same identity")
	}
	d, err := Parse(minimal + "\n[speeds]\nt4 = 0.4\nv100 = 1.0\n")
	if err != nil || d.Speeds["t4"] != 0.4 || d.Speeds["v100"] != 1 {
		t.Fatalf("[speeds] read as %v, %v", d.Speeds, err)
	}
	if d.ID() != a.ID() {
		t.Error("the job's [speeds], a scheduling hint, changed the job identity")
	}
	if !strings.HasPrefix(a.ID(), "sha256:") {
		t.Errorf("ID %q lacks the sha256: prefix", a.ID())
	}
	if s := a.ShortID(); len(s) != len("sha256:")+12 || !strings.HasPrefix(a.ID(), s) {
		t.Errorf("ShortID %q is not ID %q cut to sha256: and 12 hex digits", s, a.ID())
	}
}

func TestDiffNamesTheChangedFields(t *testing.T) {
	a, _ := Parse(minimal)
	b, _ := Parse(strings.Replace(strings.Replace(minimal, "micro_batch = 32", "micro_batch = 16", 1), "lr = 0.05", "lr = 0.1", 1))
	got := Diff(a.Canonical(), b.Canonical())
	if strings.Join(got, ",") != "micro_batch,optimizer.lr" {
		t.Fatalf("Diff = %v", got)
	}
	c, err := Parse("checkpoint_every = 7\n" + minimal)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != c.ID() {
		t.Fatal("checkpoint_every changed the job identity")
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "job.toml")
	if err := os.WriteFile(p, []byte("task = 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("Load error = %v, want the path in it", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(minimal)
	f.Add("task = \"charlm\"\nlogical_workers=1\nmicro_batch=1\nsteps=1\n[optimizer]\nlr=1.0\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a spec that Validate refuses: %v", err)
		}
		_ = s.ID()
	})
}

// An unknown key close to a known one names it, a torch job's too (a new
// user's finding: `thread` under [torch] got no hint).
func TestUnknownKeysSayWhichKeyWasMeant(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\nthread = 1\n",
			"torch.thread (did you mean torch.threads?)"},
		{minimal + "\nmomentun = 0.9\n", "optimizer.momentun (did you mean optimizer.momentum?)"},
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\nchekpoint_every = 5\n", "chekpoint_every (did you mean checkpoint_every?)"},
		{minimal + "\nzzzzzzzz = 1\n", "optimizer.zzzzzzzz ([optimizer] holds beta1, beta2, eps, kind, lr, momentum, nesterov, weight_decay);"},
		// a new user's (helper 107): a misspelt table stands for its keys
		// and names the table meant; a table is compared with tables
		// ([speed] is [speeds], not seed); a key the engine refuses is
		// never suggested (epochs for a torch job)
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\n[optimzer]\nkind = \"sgd\"\nlr = 0.1\n", "unknown table [optimzer] (did you mean [optimizer]?);"},
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\n[speed]\nv100 = 1.0\n", "unknown table [speed] (did you mean [speeds]?);"},
		{"engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nepoch = 1\n[torch]\nmodule = \"m.py\"\n", "unknown key epoch;"},
		{"engine = \"native\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\nthread = 1\n", "unknown key torch.thread;"},
		// a new user's (helper 107): a key in the wrong table names the
		// table it belongs in; a file with a [torch] table and a misspelt
		// engine gets the torch engine's hints and example; one key is
		// "unknown key", several "unknown keys"
		{"engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\nthreads = 2\n[torch]\nmodule = \"m.py\"\n",
			"unknown key threads (did you mean torch.threads?); remove or rename it"},
		// helper 108's: no top-level key from inside a table, no key two
		// edits off in another table, a misspelt engine's value with a
		// [torch] table, an empty misspelt table
		{minimal + "\nname = \"sgd\"\n", "unknown key optimizer.name ([optimizer] holds beta1, beta2, eps, kind, lr, momentum, nesterov, weight_decay);"},
		// a key that is no key of its table says what the table holds
		// before a key of the same name elsewhere, once per table
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\n[lr_schedule]\nkind = \"cosine\"\nwarmup = 3\n",
			"unknown keys lr_schedule.kind ([lr_schedule] holds min_lr, warmup_steps; did you mean optimizer.kind?), lr_schedule.warmup;"},
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\nthreads = 1\n", "unknown key threads;"},
		{"engine = \"troch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\nthread = 1\n",
			"unknown key torch.thread (did you mean torch.threads?); remove or rename it (see examples/torch-ddp/job.toml)"},
		{"logical_workers = 2\nmicro_batch = 4\nsteps = 10\n[optimzer]\n", "unknown table [optimzer] (did you mean [optimizer]?);"},
		{"engin = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\nthread = 1\n",
			"unknown keys engin (did you mean engine?), torch.thread (did you mean torch.threads?); remove or rename them (see examples/torch-ddp/job.toml)"},
	} {
		_, err := Parse(tc.text)
		if !errors.Is(err, ErrUnknownKeys) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse error = %v, want it to contain %q", err, tc.want)
		}
	}
	if !slices.Contains(knownKeys, "torch.module") || !slices.Contains(knownKeys, "optimizer.lr") || slices.Contains(knownKeys, "torch") {
		t.Errorf("knownKeys = %v: want the dotted keys of every table, no table itself", knownKeys)
	}
	if !slices.Contains(knownTables, "optimizer") || !slices.Contains(knownTables, "speeds") || !slices.Contains(knownTables, "torch.params") || slices.Contains(knownTables, "seed") {
		t.Errorf("knownTables = %v: want every table and map, no plain key", knownTables)
	}
}
