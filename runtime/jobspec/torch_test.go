package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTorchExamplesLoad(t *testing.T) {
	for _, path := range []string{"../../examples/torch-mnist/job.toml", "../../examples/torch-charlm/job.toml"} {
		t.Run(path, func(t *testing.T) {
			s, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Engine != EngineTorch || s.Torch.Threads != 1 || s.Torch.Device != "cpu" || len(s.Torch.ModuleSHA256) != 64 {
				t.Fatalf("spec %+v torch %+v: want engine torch, 1 thread, cpu, a module digest", s, s.Torch)
			}
			if !filepath.IsAbs(s.Torch.ModulePath) || filepath.Base(s.Torch.ModulePath) != "model.py" {
				t.Fatalf("module path %q: want the absolute path of model.py next to the job file", s.Torch.ModulePath)
			}
		})
	}
}

func TestTorchModuleContentIsPartOfTheIdentityAndItsPathIsNot(t *testing.T) {
	write := func(dir, module string) *Spec {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "m.py"), []byte(module), 0o644); err != nil {
			t.Fatal(err)
		}
		job := "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\n"
		if err := os.WriteFile(filepath.Join(dir, "job.toml"), []byte(job), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(filepath.Join(dir, "job.toml"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c := write(t.TempDir(), "x = 1\n"), write(t.TempDir(), "x = 1\n"), write(t.TempDir(), "x = 2\n")
	if a.ID() != b.ID() {
		t.Errorf("the same module in two directories gives two identities")
	}
	if a.ID() == c.ID() {
		t.Errorf("a changed module keeps the identity")
	}
	if d := Diff(a.Canonical(), c.Canonical()); len(d) != 1 || d[0] != "torch.module_sha256" {
		t.Errorf("Diff = %v, want [torch.module_sha256]", d)
	}
}

func TestTorchJobFilesAreCheckedField(t *testing.T) {
	base := "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n"
	cases := []struct{ name, text, field string }{
		{"no torch table", base, "torch.module"},
		{"a native model table", base + "[model]\nhidden = 3\n[torch]\nmodule = \"m.py\"\n", "model"},
		{"a task", "task = \"mnist\"\n" + base + "[torch]\nmodule = \"m.py\"\n", "task"},
		{"epochs instead of steps", strings.Replace(base, "steps = 10", "epochs = 1", 1) + "[torch]\nmodule = \"m.py\"\n", "epochs"},
		{"zero threads are the default, negative are not", base + "[torch]\nmodule = \"m.py\"\nthreads = -1\n", "torch.threads"},
		{"an unknown device", base + "[torch]\nmodule = \"m.py\"\ndevice = \"tpu\"\n", "torch.device"},
		{"a negative digest interval", base + "[torch]\nmodule = \"m.py\"\ndigest_every_steps = -2\n", "torch.digest_every_steps"},
		{"a digest interval past the step bound", base + "[torch]\nmodule = \"m.py\"\ndigest_every_steps = 2000000000\n", "torch.digest_every_steps"},
		{"an unknown engine", strings.Replace(base, "torch", "jax", 1), "engine"},
		{"a torch table on the native engine", "task = \"mnist\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 1\n[torch]\nmodule = \"m.py\"\n", "torch"},
		{"a module and a script", base + "[torch]\nmodule = \"m.py\"\nscript = \"t.py\"\n", "torch.script"},
		{"args for a module", base + "[torch]\nmodule = \"m.py\"\nargs = [\"--lr\", \"0.1\"]\n", "torch.args"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.text)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Parse: %v, want a FieldError on %s", err, c.field)
			}
		})
	}
	if _, err := Parse(base + "[torch]\nmodule = \"m.py\"\ndigest_every_steps = \"4\"\n"); err == nil || !strings.Contains(err.Error(), "torch.digest_every_steps") {
		t.Fatalf("a digest interval that is not an integer: %v, want an error naming torch.digest_every_steps", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.toml")); err == nil {
		t.Fatal("loading a missing job file succeeded")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.toml"), []byte(base+"[torch]\nmodule = \"missing.py\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "job.toml")); err == nil || !strings.Contains(err.Error(), "torch.module") || !strings.Contains(err.Error(), "relative to the job file") {
		t.Fatalf("a missing module: %v, want an error naming torch.module", err)
	}
}

func TestTorchScriptAndItsArgumentsArePartOfTheIdentity(t *testing.T) {
	base := "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\n"
	parse := func(text string) *Spec {
		t.Helper()
		s, err := Parse(base + text)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	script := parse("script = \"train.py\"\nargs = [\"--data\", \"{data_dir}\"]\n")
	if !script.Torch.IsScript || script.Torch.Module != "train.py" || len(script.Torch.Args) != 2 {
		t.Fatalf("torch %+v: want the script as the program, with its two arguments", script.Torch)
	}
	module := parse("module = \"train.py\"\n")
	if module.ID() == script.ID() {
		t.Errorf("a script and a module of one file have one identity: a joiner would run it the other way")
	}
	if other := parse("script = \"train.py\"\nargs = [\"--data\", \"{data_dir}\", \"--epochs\", \"2\"]\n"); other.ID() == script.ID() {
		t.Errorf("other script arguments keep the identity")
	}
	if d := Diff(script.Canonical(), module.Canonical()); strings.Join(d, ",") != "torch.args,torch.script" {
		t.Errorf("Diff = %v, want [torch.args torch.script]", d)
	}
}

func TestTorchDigestIntervalIsNotPartOfTheIdentity(t *testing.T) {
	base := "engine = \"torch\"\nlogical_workers = 2\nmicro_batch = 4\nsteps = 10\n[torch]\nmodule = \"m.py\"\n"
	a, err := Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(base + "digest_every_steps = 5\n")
	if err != nil {
		t.Fatal(err)
	}
	if a.Torch.DigestEvery != 0 || b.Torch.DigestEvery != 5 {
		t.Fatalf("digest_every_steps read as %d and %d, want 0 (measure) and 5", a.Torch.DigestEvery, b.Torch.DigestEvery)
	}
	if a.ID() != b.ID() {
		t.Errorf("digest_every_steps changed the job's identity: a resume with another interval would be refused")
	}
}

func TestNativeIdentitiesDoNotChange(t *testing.T) {
	s, err := Load("../../examples/mnist/job.toml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Canonical(), "engine") || strings.Contains(s.Canonical(), "torch") {
		t.Fatalf("a native job's canonical form mentions the engine: %s (its identity would change)", s.Canonical())
	}
}
