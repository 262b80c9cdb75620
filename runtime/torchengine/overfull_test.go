package torchengine

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// pipedRemote is a joiner whose worker end drains what the engine sends;
// closing the returned conn is the worker leaving.
func pipedRemote(t *testing.T, name string) (*remote, net.Conn) {
	t.Helper()
	ours, theirs := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, theirs) }()
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return newRemote(wire.NewConn(ours, time.Minute, 1<<20), time.Minute, name, name+":1", name+":2"), theirs
}

// TestAJoinerBeyondTheLogicalWorkersWaitsForAPlace queues three joiners
// for a job of two logical workers, as when Slurm starts a replacement
// extra job before the one it replaces has left (trading up): a boundary
// admits two and keeps the third waiting (a process with no logical
// worker would fail the placement), and the boundary after one member is
// gone admits it.
func TestAJoinerBeyondTheLogicalWorkersWaitsForAPlace(t *testing.T) {
	var logs strings.Builder
	e := &Engine{opts: Options{Spec: &jobspec.Spec{LogicalWorkers: 2}}, local: &Local{}, awaited: true,
		log: hclog.New(&hclog.LoggerOptions{Output: &logs})}
	a, aEnd := pipedRemote(t, "a")
	b, _ := pipedRemote(t, "b")
	c, _ := pipedRemote(t, "c")
	e.pending = []*remote{a, b, c}
	ctx := context.Background()

	changed, err := e.Boundary(ctx, 0)
	if err != nil || !changed {
		t.Fatalf("first boundary: changed %v, error %v; want a change", changed, err)
	}
	if n := e.Workers(); n != 2 {
		t.Fatalf("%d workers after the first boundary, want 2 (the job's logical workers)", n)
	}
	if len(e.pending) != 1 || e.pending[0] != c {
		t.Fatalf("%d joiners waiting after the first boundary, want c alone", len(e.pending))
	}
	if !strings.Contains(logs.String(), "workers wait for admission: each of the job's logical workers has a worker") {
		t.Fatalf("no log line says why c waits:\n%s", logs.String())
	}
	if changed, err := e.Boundary(ctx, 1); err != nil || changed {
		t.Fatalf("second boundary, nobody gone: changed %v, error %v; want no change", changed, err)
	}

	aEnd.Close() // a leaves
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a's end closed, but the engine did not see it within 10 s")
	}
	if changed, err := e.Boundary(ctx, 2); err != nil || !changed {
		t.Fatalf("boundary after a left: changed %v, error %v; want a change", changed, err)
	}
	if n := e.Workers(); n != 2 || len(e.pending) != 0 {
		t.Fatalf("%d workers and %d waiting after a left, want 2 and none (c admitted)", n, len(e.pending))
	}
	if e.local.procs[1].remote != c {
		t.Fatal("rank 1 is not c after a left")
	}
}

// TestAResizeLeavesTheLogicalWorkersOfRemoteWorkersToThem is helper 112's
// (`easyscale run --workers 0:1,200:4 --listen` with a worker joined from
// another machine failed at step 200: "5 physical workers for 4 logical
// workers"): Resize counted this machine's processes only. A job of two
// logical workers with one remote worker admitted, resized to 3, starts
// one process of its own: two workers in all.
func TestAResizeLeavesTheLogicalWorkersOfRemoteWorkersToThem(t *testing.T) {
	l, ctx := newLocal(t)
	var logs strings.Builder
	e := &Engine{opts: Options{Spec: &jobspec.Spec{LogicalWorkers: 2}}, local: l, awaited: true,
		log: hclog.New(&hclog.LoggerOptions{Output: &logs})}
	r, _ := pipedRemote(t, "far")
	l.addRemote(r)
	if err := e.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, locals := e.Workers(), len(l.locals()); n != 2 || locals != 1 {
		t.Fatalf("%d workers (%d of this machine) after a resize to 3 beside a remote one, want 2 (1): the job has 2 logical workers", n, locals)
	}
	if !strings.Contains(logs.String(), "starting fewer python workers than the allocation asks") {
		t.Fatalf("no log line says why fewer processes started:\n%s", logs.String())
	}
}
