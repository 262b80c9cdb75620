package trainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/statedb"
)

// otherNumericsEngine is the native engine refusing every checkpoint as
// computed with other numerics, as the torch engine does on a node with
// another CPU ISA (torchengine.ResumeError).
type otherNumericsEngine struct{ Engine }

func (e otherNumericsEngine) Restore(ck *statedb.Checkpoint) error {
	return fmt.Errorf("checkpoint of step %d: cpu_capability differs: %w", ck.Step, ErrOtherNumerics)
}

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
	if got, _ := statedb.Superseded(dir); len(got) != 0 {
		t.Fatalf("a finished job's state was superseded: %v", got)
	}
}
