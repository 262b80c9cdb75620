package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkCycle10kQueued times one daemon cycle (snapshot, plan, apply,
// record) against a fake Slurm of 64 nodes of 8 GPUs (two types) with 48
// running elastic jobs and 10,000 queued jobs, the size issue 17's goal
// names ("a daemon cycle < 1 s with 10,000 queued jobs"), the first
// waiting with Reason Resources and the others Priority. The fake prints
// squeue and sinfo text as Slurm 22.05 does, so parsing that output is
// timed with the rest; the real commands' own run time is not. The first
// cycles grow the running jobs into the idle GPUs; the timed cycles then
// re-read, re-plan and reconcile a full cluster. make bench prints it as
// backfill_cycle_ms_10k (tests/bench).
func BenchmarkCycle10kQueued(b *testing.B) { benchmarkCycle(b, true) }

// BenchmarkCycle10kQueuedUnplanned is BenchmarkCycle10kQueued with every
// queued job just submitted, not yet planned by Slurm (no start, no
// planned nodes: the unplanned hold's worst case, each job's possible
// nodes worked out every cycle). make bench prints it as
// backfill_cycle_ms_10k_unplanned.
func BenchmarkCycle10kQueuedUnplanned(b *testing.B) { benchmarkCycle(b, false) }

// BenchmarkCycle10kQueuedKeepOff is BenchmarkCycle10kQueued with every
// other queued job pinned to v100 and the rest elastic d2 jobs of any type
// (keep_off_pinned's worst case: every job asked, 32 updates a cycle). make
// bench prints it as backfill_cycle_ms_10k_keepoff.
func BenchmarkCycle10kQueuedKeepOff(b *testing.B) { benchmarkCycleWith(b, true, true) }

func benchmarkCycle(b *testing.B, planned bool) { benchmarkCycleWith(b, planned, false) }

func benchmarkCycleWith(b *testing.B, planned, keepOff bool) {
	toml := ""
	if keepOff {
		toml = keepOffTOML
	}
	td := newTestDaemon(b, toml)
	f := td.fake
	f.set(func() {
		f.nodes = f.nodes[:0]
		for i := range 64 {
			typ := "v100"
			if i%2 == 1 {
				typ = "t4"
			}
			f.nodes = append(f.nodes, &fakeNode{name: fmt.Sprintf("n%d", i+1), gpuType: typ, gpus: 8, cpus: 32,
				partitions: []string{"normal", "low"}})
		}
	})
	for i := range 48 {
		id := fmt.Sprint(10 + i)
		f.running(id, "es-req min=1 max=16 lw=16 d2", fmt.Sprintf("n%d", i+1), 4, time.Duration(30+i)*time.Minute,
			rendezvous(b, id))
	}
	for i := range 10000 {
		// Queued behind the running jobs, planned on the busy nodes; start
		// times spread over the next day so the planner sees gaps.
		node := fmt.Sprintf("n%d", 1+i%48)
		start := td.now.Add(time.Duration(40+i%1400) * time.Minute)
		if !planned {
			node, start = "", time.Time{}
		}
		j := f.pending(fmt.Sprint(100000+i), node, 8, start)
		// As squeue shows a queue behind full nodes (measured on the lab):
		// the first job waits for resources, the others for their turn;
		// shrink-to-admit considers AdmitDepth of them.
		j.reason = "Priority"
		if i == 0 {
			j.reason = "Resources"
		}
		if keepOff && i%2 == 0 {
			j.gpuType = "v100"
		} else if keepOff {
			j.comment, j.user = "es-req min=1 max=2 lw=8 d2", "alice"
		}
	}
	for range 3 {
		td.cycle(b)
		td.advance(2 * time.Second)
	}
	if keepOff && len(f.commands("scontrol update JobId=")) == 0 {
		b.Fatal("no job was kept off: the benchmark would time a cycle that keeps nothing off")
	}
	if planned && !keepOff && len(f.commands("sbatch")) == 0 {
		b.Fatal("no extra job was submitted: the benchmark would time a cycle that plans nothing")
	}
	if !planned && len(f.commands("sbatch")) != 0 {
		b.Fatalf("%d extra jobs submitted while 10,000 jobs Slurm has not planned may use every node", len(f.commands("sbatch")))
	}
	b.ResetTimer()
	for range b.N {
		if _, err := td.Cycle(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		td.advance(2 * time.Second)
		b.StartTimer()
	}
}
