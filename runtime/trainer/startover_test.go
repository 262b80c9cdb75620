package trainer

import (
	"context"
	"errors"
	"fmt"
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
