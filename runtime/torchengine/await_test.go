package torchengine

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
)

// awaitEngine is an engine with a listener whose joiners the test queues
// itself, as Listen's intake does.
func awaitEngine(wait time.Duration) *Engine {
	return &Engine{opts: Options{Node: "n1", Standby: true, AwaitStandby: wait}, ln: &cluster.Listener{},
		joined: make(chan struct{}, 1), log: hclog.NewNullLogger()}
}

func (e *Engine) queue(slurmNode string) {
	e.mu.Lock()
	e.pending = append(e.pending, &remote{slurmNode: slurmNode})
	e.mu.Unlock()
	select {
	case e.joined <- struct{}{}:
	default:
	}
}

// The first step waits for a worker on another node (a lab job whose
// coordinator trained alone lost its first node with no standby), and
// only for one on another node: a joiner on the coordinator's own node
// cannot hold the copy that survives its loss.
func TestTheFirstBoundaryWaitsForAJoinerOnAnotherNode(t *testing.T) {
	e := awaitEngine(time.Minute)
	e.queue("n1")
	e.queue("n1")
	done := make(chan struct{})
	go func() { e.awaitStandby(context.Background(), 0); close(done) }()
	// a correct wait never returns here, however slow the machine
	select {
	case <-done:
		t.Fatal("awaitStandby returned with joiners on the coordinator's own node only")
	case <-time.After(200 * time.Millisecond):
	}
	e.queue("n2")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("awaitStandby still waits after a joiner on n2 was queued")
	}
}

func TestTheWaitForAStandbyIsBounded(t *testing.T) {
	tests := []struct {
		name string
		e    *Engine
		ctx  func() context.Context
	}{
		{"no joiner: on after AwaitStandby", awaitEngine(50 * time.Millisecond), context.Background},
		{"no wait set", awaitEngine(0), context.Background},
		{"the run is stopped", awaitEngine(time.Hour), func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
		{"not on Slurm (no listener)", &Engine{opts: Options{Standby: true, AwaitStandby: time.Hour}, log: hclog.NewNullLogger()}, context.Background},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() { tc.e.awaitStandby(tc.ctx(), 0); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("awaitStandby did not return")
			}
		})
	}
}
