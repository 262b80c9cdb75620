package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/statedb"
	"github.com/hashicorp/go-hclog"
)

// otherNumericsEngine is the native engine refusing every checkpoint as
// computed with other numerics, as the torch engine does on a node with
// another CPU ISA (torchengine.ResumeError).
type otherNumericsEngine struct{ Engine }

func (e otherNumericsEngine) Restore(ck *statedb.Checkpoint) error {
	return fmt.Errorf("checkpoint of step %d: cpu_capability differs: %w", ck.Step, ErrOtherNumerics)
}

// finishedAwareEngine refuses every checkpoint with an error that words
// itself for a finished job (FinishedRefusal), as the torch engine's.
type finishedAwareEngine struct{ Engine }

type otherNumericsRefusal struct{ finishedAt int64 }

func (r otherNumericsRefusal) Error() string {
	if r.finishedAt > 0 {
		return fmt.Sprintf("finished at %d, not started over", r.finishedAt)
	}
	return "other numerics: start over with --on-other-numerics=start-over"
}
func (r otherNumericsRefusal) Is(target error) bool { return target == ErrOtherNumerics }
func (r otherNumericsRefusal) Finished(step int64) error {
	return otherNumericsRefusal{finishedAt: step}
}

func (e finishedAwareEngine) Restore(*statedb.Checkpoint) error { return otherNumericsRefusal{} }

func TestAResumeWithOtherNumericsFailsOrStartsOver(t *testing.T) {
	fixed := run(t, mnistSmall, "", nil)
	dir := t.TempDir()
	run(t, mnistSmall, "", func(o *Options) { o.StateDir = dir; o.StopAfter = 10 }) // checkpoint_every = 5
	refusing := func(o *Options) {
		o.StateDir = dir
		eng, err := NativeEngine(*o)
		if err != nil {
			t.Fatal(err)
		}
		o.Engine = otherNumericsEngine{eng}
	}
	spec, wl := loadJob(t, mnistSmall)
	opts := Options{Spec: spec, Workload: wl, StopAfter: testSteps, SkipEval: true}
	refusing(&opts)
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrOtherNumerics) {
		t.Fatalf("resumed without --on-other-numerics=start-over: %v, want ErrOtherNumerics", err)
	}
	sum := run(t, mnistSmall, "", func(o *Options) { refusing(o); o.StartOverOnOtherNumerics = true })
	if sum.StartedOver == nil || sum.StartedOver.FromStep != 10 || sum.StartedOver.Superseded == "" || sum.ResumedFrom != 0 {
		t.Fatalf("summary: started over %+v, resumed from %d; want from step 10 with the superseded state kept", sum.StartedOver, sum.ResumedFrom)
	}
	if sum.Digest != fixed.Digest || sum.Steps != fixed.Steps {
		t.Fatalf("started over: %d steps, digest %s; fixed run %d steps, %s", sum.Steps, sum.Digest, fixed.Steps, fixed.Digest)
	}
	old, err := statedb.OpenReadOnly(sum.StartedOver.Superseded)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if last, ok, err := old.LastStep(); err != nil || !ok || last != 10 {
		t.Fatalf("the superseded ledger ends at %d (ok %v, %v), want 10", last, ok, err)
	}
}

// recordingEngine is the native engine as an engine whose bits depend on
// where it runs: its numerics record is numerics, and a kept record other
// than it is other numerics.
type recordingEngine struct {
	Engine
	numerics string
}

func (e recordingEngine) NumericsRecord() (string, error) { return e.numerics, nil }

func (e recordingEngine) CheckNumerics(record string, lastStep int64) error {
	if strings.HasPrefix(record, "{") { // the engine's records are plain words
		return fmt.Errorf("the numerics record %q does not read", record)
	}
	if record != e.numerics {
		return fmt.Errorf("the ledger's steps up to %d: %s, this run %s: %w", lastStep, record, e.numerics, ErrOtherNumerics)
	}
	return nil
}

// TestALedgerWithoutACheckpointIsCheckedForOtherNumerics: with no usable
// checkpoint, the ledger rows a run would recompute are checked against
// the numerics kept beside them (a tester's: they failed as a divergence,
// and start-over never applied); the same numerics resume as before.
func TestALedgerWithoutACheckpointIsCheckedForOtherNumerics(t *testing.T) {
	fixed := run(t, mnistSmall, "", nil)
	dir := t.TempDir()
	with := func(numerics string) func(o *Options) {
		return func(o *Options) {
			o.StateDir = dir
			eng, err := NativeEngine(*o)
			if err != nil {
				t.Fatal(err)
			}
			o.Engine = recordingEngine{eng, numerics}
		}
	}
	run(t, mnistSmall, "", func(o *Options) { with("A")(o); o.StopAfter = 7 }) // checkpoints at 5 and 7
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := db.Numerics(); err != nil || rec != "A" {
		t.Fatalf("kept record %q, %v; want the run's", rec, err)
	}
	db.Close()
	for _, f := range []string{"step-5.safetensors", "step-7.safetensors"} { // lost: no usable checkpoint
		if err := os.Remove(filepath.Join(dir, statedb.CheckpointDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	spec, wl := loadJob(t, mnistSmall)
	opts := Options{Spec: spec, Workload: wl, StopAfter: testSteps, SkipEval: true}
	with("B")(&opts)
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrOtherNumerics) || !strings.Contains(err.Error(), "up to 7") {
		t.Fatalf("rerun with other numerics: %v, want ErrOtherNumerics naming step 7", err)
	}
	sum := run(t, mnistSmall, "", func(o *Options) { with("B")(o); o.StartOverOnOtherNumerics = true })
	if sum.StartedOver == nil || sum.StartedOver.FromStep != 7 || sum.Digest != fixed.Digest {
		t.Fatalf("started over %+v, digest %s; want from step 7 and the fixed run's %s", sum.StartedOver, sum.Digest, fixed.Digest)
	}
	again := run(t, mnistSmall, "", with("B")) // the same numerics: resumes
	if again.StartedOver != nil || again.ResumedFrom != fixed.Steps || again.Digest != fixed.Digest {
		t.Fatalf("rerun with the same numerics: started over %+v, resumed from %d, digest %s", again.StartedOver, again.ResumedFrom, again.Digest)
	}
}

// TestAFinishedJobIsNotStartedOver: a job whose checkpoint is its last
// step keeps its result; start-over is refused naming why (a tester's: a
// rerun elsewhere threw the finished result away).
func TestAFinishedJobIsNotStartedOver(t *testing.T) {
	dir := t.TempDir()
	run(t, mnistSmall, "", func(o *Options) { o.StateDir = dir; o.StopAfter = 0 })
	spec, wl := loadJob(t, mnistSmall)
	opts := Options{Spec: spec, Workload: wl, SkipEval: true, StateDir: dir, StartOverOnOtherNumerics: true}
	eng, err := NativeEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine = otherNumericsEngine{eng}
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrOtherNumerics) || !strings.Contains(err.Error(), "the job finished") {
		t.Fatalf("start-over of a finished job: %v, want a refusal saying the job finished", err)
	}
	// An engine whose refusal offers a start-over words it for a finished
	// job (FinishedRefusal), offering none.
	opts.Engine = finishedAwareEngine{eng}
	_, err = Run(context.Background(), opts)
	if !errors.Is(err, ErrOtherNumerics) || !regexp.MustCompile(`finished at [1-9][0-9]*, not started over`).MatchString(err.Error()) ||
		strings.Contains(err.Error(), "--on-other-numerics") {
		t.Fatalf("start-over of a finished job with a FinishedRefusal: %v, want its Finished wording", err)
	}
	if got, _ := statedb.Superseded(dir); len(got) != 0 {
		t.Fatalf("a finished job's state was superseded: %v", got)
	}
}

// TestAFinishedJobWhoseLastCheckpointIsLostIsNotStartedOver: a finished
// job's ledger says it finished even when its last checkpoint is lost (a
// tester's: such a job was started over from an earlier checkpoint, or
// with none left, and redone).
func TestAFinishedJobWhoseLastCheckpointIsLostIsNotStartedOver(t *testing.T) {
	dir := t.TempDir()
	sum := run(t, mnistSmall, "", func(o *Options) {
		o.StateDir, o.StopAfter = dir, 0
		eng, err := NativeEngine(*o)
		if err != nil {
			t.Fatal(err)
		}
		o.Engine = recordingEngine{eng, "A"}
	})
	last := filepath.Join(dir, statedb.CheckpointDir, fmt.Sprintf("step-%d.safetensors", sum.Steps))
	if err := os.Remove(last); err != nil {
		t.Fatal(err)
	}
	spec, wl := loadJob(t, mnistSmall)
	for _, tc := range []struct {
		name   string
		engine func(Engine) Engine
		prune  bool // every checkpoint lost
	}{
		{"an earlier checkpoint refused", func(e Engine) Engine { return otherNumericsEngine{e} }, false},
		{"no checkpoint left, the ledger's record other", func(e Engine) Engine { return recordingEngine{e, "B"} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prune {
				files, _ := filepath.Glob(filepath.Join(dir, statedb.CheckpointDir, "*"))
				for _, f := range files {
					os.Remove(f)
				}
			}
			opts := Options{Spec: spec, Workload: wl, SkipEval: true, StateDir: dir, StartOverOnOtherNumerics: true}
			eng, err := NativeEngine(opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.Engine = tc.engine(eng)
			if _, err := Run(context.Background(), opts); !errors.Is(err, ErrOtherNumerics) || !strings.Contains(err.Error(), "the job finished") {
				t.Fatalf("start-over of a finished job: %v, want a refusal saying the job finished", err)
			}
			if got, _ := statedb.Superseded(dir); len(got) != 0 {
				t.Fatalf("a finished job's state was superseded: %v", got)
			}
		})
	}
}

// TestAMissingOrUnreadableNumericsRecordIsRewrittenOnceAStepMatches: with
// no usable checkpoint and the record deleted or unreadable, the run is
// not refused (the recomputed steps are compared with the ledger), and it
// records its numerics only once a recomputed step matched (a tester's:
// a run in the wrong environment wrote its own record first, and the rerun
// where the ledger was computed was then refused).
func TestAMissingOrUnreadableNumericsRecordIsRewrittenOnceAStepMatches(t *testing.T) {
	for _, record := range []string{"", "{not json"} {
		dir := t.TempDir()
		with := func(o *Options) {
			o.StateDir = dir
			eng, err := NativeEngine(*o)
			if err != nil {
				t.Fatal(err)
			}
			o.Engine = recordingEngine{eng, "A"}
		}
		run(t, mnistSmall, "", func(o *Options) { with(o); o.StopAfter = 7 })
		files, _ := filepath.Glob(filepath.Join(dir, statedb.CheckpointDir, "*"))
		for _, f := range files {
			os.Remove(f)
		}
		path := filepath.Join(dir, statedb.NumericsFile)
		if record == "" {
			os.Remove(path)
		} else if err := os.WriteFile(path, []byte(record), 0o600); err != nil {
			t.Fatal(err)
		}
		run(t, mnistSmall, "", func(o *Options) { with(o); o.StopAfter = 9 })
		if b, err := os.ReadFile(path); err != nil || string(b) != "A" {
			t.Fatalf("record %q: the numerics record after the rerun is %q, %v; want the run's", record, b, err)
		}
	}
}

// TestARunGivenAKeptRunWarnsThatItIsNotTheLiveState: `--state
// STATE/superseded/X` resumes the kept run (a state directory of its
// own), with a warning naming the job's live state directory (a tester's:
// it resumed without a word).
func TestARunGivenAKeptRunWarnsThatItIsNotTheLiveState(t *testing.T) {
	dir := t.TempDir()
	run(t, mnistSmall, "", func(o *Options) { o.StateDir = dir; o.StopAfter = 10 })
	spec, wl := loadJob(t, mnistSmall)
	opts := Options{Spec: spec, Workload: wl, StopAfter: testSteps, SkipEval: true, StateDir: dir, StartOverOnOtherNumerics: true}
	eng, err := NativeEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine = otherNumericsEngine{eng}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	kept, err := statedb.Superseded(dir)
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept runs %v, %v; want one", kept, err)
	}
	var logs strings.Builder
	sum := run(t, mnistSmall, "", func(o *Options) {
		o.StateDir, o.StopAfter = kept[0], 12
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	})
	if sum.ResumedFrom != 10 || !strings.Contains(logs.String(), "run kept by a start-over") || !strings.Contains(logs.String(), "live_state="+dir) {
		t.Fatalf("resumed from %d; logs:\n%s\nwant a resume from step 10 and a warning naming %s", sum.ResumedFrom, logs.String(), dir)
	}
}
