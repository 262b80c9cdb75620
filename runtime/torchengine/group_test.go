package torchengine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// toyConfig is the load request of python/tests/toyjob.py: 4 logical workers, micro-batch 3.
func toyLoad(t *testing.T) map[string]any {
	module, err := filepath.Abs("python/tests/toyjob.py")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"module": module, "threads": 1, "device": "cpu",
		"config": map[string]any{"seed": 7, "logical_workers": 4, "micro_batch": 3, "steps": 8}}
}

type procs struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	py   string
	live []*Process
}

func (p *procs) start() *Process {
	p.t.Helper()
	proc, err := Start(p.ctx, StartOptions{Python: p.py, PackageDir: p.dir, Stderr: os.Stderr})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { proc.Kill() })
	var loaded struct {
		Parameters int    `json:"parameters"`
		Canary     string `json:"canary"`
	}
	if _, err := proc.Call(p.ctx, "load", toyLoad(p.t), nil, &loaded); err != nil {
		p.t.Fatal(err)
	}
	if loaded.Parameters == 0 || loaded.Canary == "" {
		p.t.Fatalf("load reply %+v: want parameters and a canary digest", loaded)
	}
	return proc
}

// train runs the toy job through schedule (step -> logical workers per
// process) and returns the digest after every step.
func train(t *testing.T, schedule map[int64][]int, steps int64) []string {
	t.Helper()
	py := requireTorch(t)
	dir, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := &procs{t: t, ctx: ctx, dir: dir, py: py}
	g := NewGroup(4)
	var digests []string
	for step := range steps {
		if sizes, ok := schedule[step]; ok {
			var src Member
			if len(p.live) > 0 {
				src = p.live[0]
			}
			for len(p.live) > len(sizes) {
				last := p.live[len(p.live)-1]
				if err := last.Close(5 * time.Second); err != nil {
					t.Fatalf("closing a worker: %v", err)
				}
				p.live = p.live[:len(p.live)-1]
			}
			joining := make([]bool, len(sizes))
			for len(p.live) < len(sizes) {
				joining[len(p.live)] = src != nil
				p.live = append(p.live, p.start())
			}
			members := make([]Member, len(p.live))
			for i, m := range p.live {
				members[i] = m
			}
			if err := g.Assign(ctx, members, sizes, src, joining); err != nil {
				t.Fatal(err)
			}
		}
		res, err := g.Step(ctx, step)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if len(res.Losses) != 4 {
			t.Fatalf("step %d: losses of %d logical workers, want 4", step, len(res.Losses))
		}
		digests = append(digests, res.Digest)
	}
	return digests
}

// TestGroupDigestsDoNotDependOnTheProcesses trains the toy job with real
// Python processes exchanging gradients over gloo, on a changing number of
// processes, and compares with one process per logical worker.
func TestGroupDigestsDoNotDependOnTheProcesses(t *testing.T) {
	want := train(t, map[int64][]int{0: {1, 1, 1, 1}}, 6)
	for i, d := range want {
		if d == "" || (i > 0 && d == want[i-1]) {
			t.Fatalf("digests %v: want a non-empty digest that changes every step", want)
		}
	}
	for name, schedule := range map[string]map[int64][]int{
		"one process": {0: {4}},
		"1 -> 3 -> 2": {0: {4}, 2: {2, 1, 1}, 4: {2, 2}},
		"uneven 3/1":  {0: {3, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := train(t, schedule, 6); !slices.Equal(got, want) {
				t.Errorf("digests\n got %v\nwant %v", got, want)
			}
		})
	}
}
