package runplot

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/cli"
	"github.com/easyscale/easyscale-slurm/runtime/data/datatest"
	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// asEasyscale makes the test binary the easyscale command (cli.Main) when
// set, so that `run --procs` starts its worker processes from it.
const asEasyscale = "EASYSCALE_RUNPLOT_TEST_AS_EASYSCALE"

func TestMain(m *testing.M) {
	if os.Getenv(asEasyscale) == "1" {
		os.Exit(cli.Main(os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

// easyscale runs `easyscale args...` (this test binary as the command) in
// the repository root, where examples/ is, with env added.
func easyscale(t *testing.T, env []string, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(append(os.Environ(), asEasyscale+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("easyscale %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
}

// workersOf returns the workers of each step of r.
func workersOf(r Run) []int {
	var out []int
	for _, s := range r.Steps {
		out = append(out, s.Workers)
	}
	return out
}

// stepsOf returns the steps of r's reallocations ("boundary:from>to").
func reallocsOf(r Run) []string {
	var out []string
	for _, ra := range r.Reallocations() {
		out = append(out, fmt.Sprintf("%d:%d>%d", ra.Step, ra.From, ra.To))
	}
	return out
}

// TestRealMNISTRunsAreReadAndDrawn trains examples/mnist/job.toml for 12
// steps twice: on the fixed allocation (8 workers in one process), and in
// worker processes on 2, from step 4 on 3 (rank 1 SIGKILLed in step 6, so
// the 7th step is redone on the 2 survivors), from step 8 on 1. It then
// reads both state directories and draws them.
func TestRealMNISTRunsAreReadAndDrawn(t *testing.T) {
	env := []string{datasets.MNISTDirEnv + "=" + datatest.CopyMNIST(t)}
	dir := t.TempDir()
	fixedDir, elasticDir := filepath.Join(dir, "fixed"), filepath.Join(dir, "elastic")
	base := []string{"run", "--config", "examples/mnist/job.toml", "--steps", "12", "--no-eval", "--quiet"}
	easyscale(t, env, append(base, "--state", fixedDir)...)
	easyscale(t, env, append(base, "--state", elasticDir, "--procs", "--workers", "0:2,4:3,8:1", "--kill-at", "6:1")...)

	fixed, err := ReadRun(fixedDir)
	if err != nil {
		t.Fatal(err)
	}
	elastic, err := ReadRun(elasticDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the series are the ledgers and the allocation histories", func(t *testing.T) {
		if fixed.Label != "fixed" || elastic.Label != "elastic" || fixed.JobName != "mnist-lenet" || fixed.LogicalWorkers != 8 || fixed.JobID != elastic.JobID {
			t.Fatalf("runs %+v / %+v", fixed, elastic)
		}
		if got, want := workersOf(fixed), slices.Repeat([]int{8}, 12); !slices.Equal(got, want) {
			t.Errorf("fixed run's workers per step %v, want %v", got, want)
		}
		if got, want := workersOf(elastic), []int{2, 2, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1}; !slices.Equal(got, want) {
			t.Errorf("elastic run's workers per step %v, want %v", got, want)
		}
		if got := reallocsOf(fixed); len(got) != 0 {
			t.Errorf("fixed run reallocated: %v", got)
		}
		if got, want := reallocsOf(elastic), []string{"4:2>3", "6:3>2", "8:2>1"}; !slices.Equal(got, want) {
			t.Errorf("elastic run's reallocations %v, want %v", got, want)
		}
		var redone []int64
		for _, s := range elastic.Redone() {
			redone = append(redone, s.Step)
		}
		if !slices.Equal(redone, []int64{7}) || len(fixed.Redone()) != 0 {
			t.Errorf("redone steps %v (fixed %v), want [7] in the elastic run only", redone, fixed.Redone())
		}
		for i, s := range fixed.Steps {
			if s.Step != int64(i+1) || !finite(s.Loss) || s.Loss <= 0 || s.Digest != elastic.Steps[i].Digest || s.Loss != elastic.Steps[i].Loss {
				t.Errorf("step %d: fixed %+v, elastic %+v; want steps 1..12 with equal losses and digests", i+1, s, elastic.Steps[i])
			}
		}
	})
	t.Run("the picture has one curve per run and the elastic run's marks", func(t *testing.T) {
		svg, err := SVG([]Run{fixed, elastic})
		if err != nil {
			t.Fatal(err)
		}
		es := parse(t, svg)
		if n, m := len(withClass(es, "loss")), len(withClass(es, "workers")); n != 2 || m != 2 {
			t.Errorf("%d loss and %d workers polylines for 2 runs", n, m)
		}
		if got, want := marks(withClass(es, "realloc")), []string{"1:4", "1:6", "1:8"}; !slices.Equal(got, want) {
			t.Errorf("reallocation marks %v, want %v", got, want)
		}
		if got, want := marks(withClass(es, "redo")), []string{"1:7"}; !slices.Equal(got, want) {
			t.Errorf("redo marks %v, want %v", got, want)
		}
		if !bytes.Contains(svg, []byte("bit-identical parameters after each of the 12 common steps")) {
			t.Errorf("the caption does not say the runs agree:\n%s", svg)
		}
	})
	t.Run("easyscale-plot writes the picture with the labels given", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run.svg")
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"--output", out, "--label", "8 workers", "--label", "2-3-1 workers", fixedDir, elasticDir}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		svg, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		es := parse(t, svg)
		var labels []string
		for _, g := range withClass(es, "run") {
			labels = append(labels, g.attrs["data-label"])
		}
		if !slices.Equal(labels, []string{"8 workers", "2-3-1 workers"}) || stdout.Len() != 0 {
			t.Errorf("runs labelled %q (stdout %q)", labels, stdout.String())
		}
	})
	t.Run("easyscale-plot refuses runs of another job, naming both", func(t *testing.T) {
		other := stateWith(t, statedb.Job{ID: "sha256:0123456789abcdef", Name: "charlm", LogicalWorkers: 4}, 1, 2)
		var stdout, stderr bytes.Buffer
		code := Main([]string{fixedDir, other}, &stdout, &stderr)
		msg := stderr.String()
		if code != 1 || stdout.Len() != 0 || !strings.Contains(msg, "different jobs") || !strings.Contains(msg, "mnist-lenet") || !strings.Contains(msg, "charlm") {
			t.Errorf("exit %d, stdout %d bytes, stderr %q; want 1 naming both jobs", code, stdout.Len(), msg)
		}
	})
}

// TestARealTorchRunIsRead trains examples/torch-mnist/job.toml for 4 steps
// on 1, then 2 Python processes, and reads its state directory: the torch
// engine records the same ledger as the native one.
func TestARealTorchRunIsRead(t *testing.T) {
	if _, _, err := torchengine.Python(context.Background()); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %v", err)
		}
		t.Skip(err)
	}
	env := []string{datasets.MNISTDirEnv + "=" + datatest.CopyMNIST(t)}
	dir := filepath.Join(t.TempDir(), "torch")
	easyscale(t, env, "run", "--config", "examples/torch-mnist/job.toml", "--steps", "4", "--no-eval", "--quiet", "--workers", "0:1,2:2", "--state", dir)
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := workersOf(r); !slices.Equal(got, []int{1, 1, 2, 2}) {
		t.Errorf("workers per step %v, want [1 1 2 2]", got)
	}
	if got := reallocsOf(r); !slices.Equal(got, []string{"2:1>2"}) {
		t.Errorf("reallocations %v, want [2:1>2]", got)
	}
	svg, err := SVG([]Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if got := marks(withClass(parse(t, svg), "realloc")); !slices.Equal(got, []string{"0:2"}) {
		t.Errorf("reallocation marks %v, want [0:2]", got)
	}
}

// stateWith makes a state directory of job with ledger rows for steps.
func stateWith(t *testing.T, job statedb.Job, steps ...int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.InitJob(job); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordAllocation(statedb.Allocation{Step: 0, Workers: 2, Placement: "0-1|2-3", Reason: "schedule"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if err := db.AppendLedger(statedb.LedgerEntry{Step: s, Digest: fmt.Sprintf("sha256:%02x", s), Loss: 1, Workers: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadRunKeepsStepsLeftUnhashed(t *testing.T) {
	dir := stateWith(t, statedb.Job{ID: "sha256:aa", Name: "job", LogicalWorkers: 4}, 1)
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AppendLedger(statedb.LedgerEntry{Step: 2, Unhashed: true, Loss: 0.5, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 2 || r.Steps[0].Unhashed || !r.Steps[1].Unhashed || r.Steps[1].Digest != "" {
		t.Fatalf("steps %+v, want step 2 unhashed", r.Steps)
	}
	if ag := Compare(r, r); ag.Common != 1 || ag.Unhashed != 1 || ag.Diverged != -1 {
		t.Errorf("a run compared with itself: %+v, want 1 step compared and 1 not", ag)
	}
}

func TestReadRunRefusesStateItCannotTrust(t *testing.T) {
	job := statedb.Job{ID: "sha256:aa", Name: "job", LogicalWorkers: 4}
	notDB := t.TempDir()
	if err := os.WriteFile(filepath.Join(notDB, statedb.DBFile), bytes.Repeat([]byte("not sqlite "), 500), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := stateWith(t, job, 1, 2, 3)
	raw, err := sql.Open("sqlite3", filepath.Join(changed, statedb.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE ledger SET loss = 0.5 WHERE step = 2`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	tests := []struct {
		name   string
		dir    string
		target error
		want   []string
	}{
		{"a directory that does not exist", filepath.Join(t.TempDir(), "nope"), statedb.ErrNoState, []string{"nope", "--state directory"}},
		{"a directory without a state database", t.TempDir(), statedb.ErrNoState, []string{statedb.DBFile}},
		{"a state database that is not SQLite", notDB, nil, []string{notDB, "not a database"}},
		{"a ledger row changed outside easyscale", changed, statedb.ErrCorruptRow, []string{changed, "step 2"}},
		{"ledger rows deleted outside easyscale", stateWith(t, job, 1, 2, 5), nil, []string{"lacks steps 3-4"}},
		{"a run that has not completed a step", stateWith(t, job), errNoSteps, []string{"no completed step"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ReadRun(tc.dir)
			if err == nil {
				t.Fatalf("ReadRun = %d steps, want an error", len(r.Steps))
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Errorf("error %v does not match %v", err, tc.target)
			}
			for _, w := range append(tc.want, tc.dir) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestMainUsage(t *testing.T) {
	dir := stateWith(t, statedb.Job{ID: "sha256:aa", Name: "job", LogicalWorkers: 4}, 1, 2)
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"no state directory is bad usage", nil, 2, "", "give one or more state directories"},
		{"more labels than directories is bad usage", []string{"--label", "a", "--label", "b", dir}, 2, "", "2 --label for 1 state directories"},
		{"an unknown flag is bad usage", []string{"--png", dir}, 2, "", "unknown flag: --png"},
		{"--help is not an error", []string{"--help"}, 0, "", "Usage: easyscale-plot"},
		{"without --output the SVG goes to stdout", []string{dir}, 0, "<svg", ""},
		{"a missing directory fails naming it", []string{dir, filepath.Join(dir, "nope")}, 1, "", "nope"},
		{"an unwritable output fails naming it", []string{"--output", filepath.Join(dir, "no", "such", "dir.svg"), dir}, 1, "", "dir.svg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.inStdout) || !strings.Contains(stderr.String(), tc.inStderr) {
				t.Errorf("exit %d, stdout %.60q, stderr %q; want exit %d, %q in stdout, %q in stderr",
					code, stdout.String(), stderr.String(), tc.code, tc.inStdout, tc.inStderr)
			}
		})
	}
}
