package torchengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// toyJob is python/tests/toyjob.py: 4 logical workers, micro-batch 3.
func toyJob(t *testing.T) JobConfig {
	module, err := filepath.Abs("python/tests/toyjob.py")
	if err != nil {
		t.Fatal(err)
	}
	return JobConfig{Module: module, Seed: 7, LogicalWorkers: 4, MicroBatch: 3, Steps: 8, Threads: 1, Device: "cpu"}
}

func newLocal(t *testing.T) (*Local, context.Context) {
	t.Helper()
	py := requireTorch(t)
	dir, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	l := NewLocal(toyJob(t), StartOptions{Python: py, PackageDir: dir, Stderr: os.Stderr, HeartbeatTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = l.Close() })
	return l, ctx
}

// split divides n logical workers over w processes as evenly as possible,
// the larger ranges first (what runtime/placement does for equal speeds).
func split(n, w int) []int {
	sizes := make([]int, w)
	for r := range sizes {
		sizes[r] = n / w
		if r < n%w {
			sizes[r]++
		}
	}
	return sizes
}

// train runs the toy job with schedule[step] processes from that step on
// (explicit sizes where given), SIGKILLing process kill[step] just before that
// step, and returns the digest after every step.
func train(t *testing.T, schedule map[int64][]int, steps int64, kill map[int64]int) []string {
	t.Helper()
	l, ctx := newLocal(t)
	var sizes []int
	var digests []string
	for step := range steps {
		if s, ok := schedule[step]; ok {
			sizes = s
			if err := l.Resize(ctx, len(sizes)); err != nil {
				t.Fatal(err)
			}
		}
		if r, ok := kill[step]; ok {
			l.Processes()[r].Kill()
		}
		for {
			res, err := l.Step(ctx, step, sizes, nil)
			var lost *LostError
			if errors.As(err, &lost) {
				t.Logf("step %d: %v; redoing on %d processes", step, lost.Ranks, l.Workers())
				sizes = split(4, l.Workers())
				continue
			}
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if len(res.Losses) != 4 {
				t.Fatalf("step %d: losses of %d logical workers, want 4", step, len(res.Losses))
			}
			digests = append(digests, res.Digest)
			break
		}
	}
	return digests
}

// TestDigestsDoNotDependOnTheProcesses trains the toy job with real Python
// processes exchanging gradients over gloo, on a changing number of
// processes, and compares with one process per logical worker.
func TestDigestsDoNotDependOnTheProcesses(t *testing.T) {
	want := train(t, map[int64][]int{0: {1, 1, 1, 1}}, 6, nil)
	for i, d := range want {
		if d == "" || (i > 0 && d == want[i-1]) {
			t.Fatalf("digests %v: want a non-empty digest that changes every step", want)
		}
	}
	for name, c := range map[string]struct {
		schedule        map[int64][]int
		kill            map[int64]int
		ownInterpreters bool // EASYSCALE_FORKSERVER=0: not forked from the fork server
	}{
		"own interpreters, 2/1/1":       {schedule: map[int64][]int{0: {2, 1, 1}}, ownInterpreters: true},
		"one process":                   {schedule: map[int64][]int{0: {4}}},
		"1 -> 3 -> 2":                   {schedule: map[int64][]int{0: {4}, 2: {2, 1, 1}, 4: {2, 2}}},
		"uneven 3/1":                    {schedule: map[int64][]int{0: {3, 1}}},
		"a process SIGKILLed at step 3": {schedule: map[int64][]int{0: {2, 1, 1}}, kill: map[int64]int{3: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			if c.ownInterpreters {
				t.Setenv(ForkServerEnv, "0")
			}
			if got := train(t, c.schedule, 6, c.kill); !slices.Equal(got, want) {
				t.Errorf("digests\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestAWorkerWithOtherNumericsIsRefused starts the second process with
// ATen's instruction-set dispatch lowered: it must be refused before it
// takes part, with the setting named.
func TestAWorkerWithOtherNumericsIsRefused(t *testing.T) {
	l, ctx := newLocal(t)
	l.EnvOf = func(rank int) []string {
		if rank == 1 {
			return []string{"ATEN_CPU_CAPABILITY=default"}
		}
		return nil
	}
	err := l.Resize(ctx, 2)
	var ne *NumericsError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "env.ATEN_CPU_CAPABILITY: want \"\", got default") {
		t.Fatalf("Resize with a worker of other numerics: %v; want a NumericsError naming ATEN_CPU_CAPABILITY", err)
	}
	if l.Workers() != 1 {
		t.Fatalf("%d workers after the refusal, want the first one only", l.Workers())
	}
}

// TestAProcessOnAnotherTorchIsRefusedNamingBothVersions starts the second
// process reporting torch 2.6.0 (toyjob's TOYJOB_TORCH_VERSION sets
// torch.__version__ in setup, before load reports it): it must be refused
// with a *VersionError naming its version and the first process's.
func TestAProcessOnAnotherTorchIsRefusedNamingBothVersions(t *testing.T) {
	l, ctx := newLocal(t)
	l.EnvOf = func(rank int) []string {
		if rank == 1 {
			return []string{"TOYJOB_TORCH_VERSION=2.6.0"}
		}
		return nil
	}
	err := l.Resize(ctx, 2)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Worker.Torch != "2.6.0" || ve.Group.Torch == "2.6.0" || ve.Group.Torch == "" ||
		!strings.Contains(err.Error(), "torch 2.6.0 on the joining worker, the group runs torch "+ve.Group.Torch) {
		t.Fatalf("Resize with a worker on another torch: %v; want a VersionError naming torch 2.6.0 and the group's", err)
	}
	if ve.Group.Python == "" || ve.Worker.Python != ve.Group.Python || strings.Contains(err.Error(), "Python") {
		t.Fatalf("worker %+v, group %+v (%v): want the same Python, reported and not named", ve.Worker, ve.Group, err)
	}
	t.Log(err)
	if l.Workers() != 1 {
		t.Fatalf("%d workers after the refusal, want the first one only", l.Workers())
	}
}

// TestCheckpointRestoreContinuesTheSameRun checkpoints after step 3, then
// restores the file and contexts into new processes on another allocation:
// the following digests are the uninterrupted run's.
func TestCheckpointRestoreContinuesTheSameRun(t *testing.T) {
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var want []string
	var file []byte
	var contexts map[int][]byte
	for step := range int64(6) {
		res, err := l.Step(ctx, step, []int{2, 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Digest)
		if step == 2 {
			if file, contexts, err = l.Checkpoint(ctx, 3); err != nil {
				t.Fatal(err)
			}
			if len(contexts) != 4 || !strings.Contains(string(file), `"easyscale.step":"3"`) {
				t.Fatalf("checkpoint: %d contexts, file metadata %q...; want 4 and step 3", len(contexts), file[:min(len(file), 200)])
			}
		}
	}
	r, ctx := newLocal(t)
	if err := r.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	r.Restore(file, contexts)
	for step := int64(3); step < 6; step++ {
		res, err := r.Step(ctx, step, []int{1, 2, 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != want[step] {
			t.Fatalf("step %d after restore: digest %s, uninterrupted %s", step, res.Digest, want[step])
		}
	}
}

// TestCheckpointDuringASlowStepIsTheLastCommittedOne asks for a checkpoint
// while a slow step (8 s) is computing: it must come back at once and be
// byte-identical to the checkpoint taken right after the last committed step.
func TestCheckpointDuringASlowStepIsTheLastCommittedOne(t *testing.T) {
	slow := func() (*Local, context.Context) {
		l, ctx := newLocal(t)
		l.start.Env = append(l.start.Env, "TOYJOB_SLOW=4:2")
		if err := l.Resize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Step(ctx, 0, []int{4}, nil); err != nil {
			t.Fatal(err)
		}
		return l, ctx
	}
	l, ctx := slow()
	want, _, err := l.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, ctx = slow()
	stepDone := make(chan error, 1)
	go func() {
		_, err := l.Step(ctx, 1, []int{4}, nil)
		stepDone <- err
	}()
	t0 := time.Now()
	got, contexts, err := l.Checkpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("checkpoint during the step took %s, want under 2 s", took)
	}
	select {
	case err := <-stepDone:
		t.Fatalf("the slow step finished (%v) before the checkpoint came back: the test did not overlap them", err)
	default:
	}
	if !bytes.Equal(got, want) || len(contexts) != 4 {
		t.Fatalf("checkpoint during the step: %d bytes, %d contexts; want the %d bytes of the last committed step and 4 contexts", len(got), len(contexts), len(want))
	}
	for _, p := range l.Processes() {
		p.Kill() // abandon the slow step, as SIGTERM does
	}
	if err := <-stepDone; err == nil {
		t.Fatal("the abandoned step reported success")
	}
}

// TestASIGTERMedProcessLeavesAtTheStepBoundary sends SIGTERM to one of three
// processes: it finishes the step, is released, and the run goes on with the
// same digests on two.
func TestASIGTERMedProcessLeavesAtTheStepBoundary(t *testing.T) {
	want := train(t, map[int64][]int{0: {1, 1, 1, 1}}, 4, nil)
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	sizes := []int{2, 1, 1}
	for step := range int64(4) {
		if step == 1 {
			if err := syscall.Kill(l.Processes()[1].Pid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		res, err := l.Step(ctx, step, sizes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != want[step] {
			t.Fatalf("step %d: digest %s, want %s", step, res.Digest, want[step])
		}
		if len(res.Samples) != 4 {
			t.Fatalf("step %d: %d sample hashes, want 4", step, len(res.Samples))
		}
		if l.Workers() != len(sizes) {
			if l.Workers() != 2 || step < 1 {
				t.Fatalf("after step %d: %d workers", step, l.Workers())
			}
			sizes = split(4, 2)
		}
	}
	if l.Workers() != 2 {
		t.Fatalf("%d workers at the end, want 2: the SIGTERMed one released", l.Workers())
	}
}

// TestAHungProcessIsDroppedWithinTheHeartbeatTimeout stops one of three
// processes (SIGSTOP: alive, silent, holding its peers in the chain): the
// step fails within the heartbeat timeout, not the collective's, and is
// redone on the other two with the same digests.
func TestAHungProcessIsDroppedWithinTheHeartbeatTimeout(t *testing.T) {
	want := train(t, map[int64][]int{0: {1, 1, 1, 1}}, 4, nil)
	l, ctx := newLocal(t)
	l.start.HeartbeatTimeout = 2 * time.Second
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	sizes := []int{2, 1, 1}
	for step := range int64(4) {
		if step == 2 {
			if err := syscall.Kill(l.Processes()[1].Pid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		res, err := l.Step(ctx, step, sizes, nil)
		var lost *LostError
		if errors.As(err, &lost) {
			if took := time.Since(t0); took > 10*time.Second {
				t.Errorf("the hung process was found after %s; want about the 2 s heartbeat timeout", took)
			}
			if len(lost.Ranks) != 1 || lost.Ranks[0] != 1 {
				t.Fatalf("lost %v, want rank 1", lost.Ranks)
			}
			sizes = split(4, l.Workers())
			if res, err = l.Step(ctx, step, sizes, nil); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if res.Digest != want[step] {
			t.Fatalf("step %d: digest %s, want %s", step, res.Digest, want[step])
		}
	}
	if l.Workers() != 2 {
		t.Fatalf("%d workers at the end, want 2", l.Workers())
	}
}

// TestASkippedDigestChangesNothingButTheLedger: with SkipDigest a step
// reports no digest and no hashing time; the next hashed step's digest is
// the one of the run hashed every step.
func TestASkippedDigestChangesNothingButTheLedger(t *testing.T) {
	want := train(t, map[int64][]int{0: {2, 2}}, 4, nil)
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for step := range int64(4) {
		l.group.SkipDigest = step%2 == 0
		res, err := l.Step(ctx, step, []int{2, 2}, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		switch {
		case l.group.SkipDigest && (res.Digest != "" || res.HashSeconds != 0):
			t.Errorf("step %d skipped: digest %q, %v s hashing; want none", step, res.Digest, res.HashSeconds)
		case !l.group.SkipDigest && (res.Digest != want[step] || res.HashSeconds <= 0):
			t.Errorf("step %d hashed: digest %q in %v s; want %s and the time it took", step, res.Digest, res.HashSeconds, want[step])
		}
	}
}

// TestProcessZeroLostInsideTheCommitStillGivesTheStepsDigest: process 0,
// the one that hashes, is SIGKILLed inside the commit of a hashed step,
// after its peers committed. The step counts as done on the survivors, and
// its digest (the ledger's final and checkpoint steps need one) is taken
// by the new process 0: the digest of the run that lost nobody.
func TestProcessZeroLostInsideTheCommitStillGivesTheStepsDigest(t *testing.T) {
	want := train(t, map[int64][]int{0: {2, 1, 1}}, 3, nil)
	l, ctx := newLocal(t)
	if err := l.Resize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	sizes := []int{2, 1, 1}
	for step := range int64(3) {
		var faults map[int]string
		if step == 1 {
			faults = map[int]string{0: "kill-commit"}
		}
		res, err := l.Step(ctx, step, sizes, faults)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.Digest != want[step] {
			t.Errorf("step %d: digest %q, want %s (the run that lost nobody)", step, res.Digest, want[step])
		}
		if step == 1 && l.Workers() != 2 {
			t.Fatalf("after the loss inside the commit of step 1: %d processes, want 2", l.Workers())
		}
		sizes = split(4, l.Workers())
	}
}

// TestPrestartedProcessesAreTheOnesAGrowAdmits: Prestart starts the
// processes a grow needs in the background; the Resize at the grow starts
// none of its own, admits those, and the run's digests are the ones of
// processes started at the grow. Spares never taken are stopped by Close.
func TestPrestartedProcessesAreTheOnesAGrowAdmits(t *testing.T) {
	want := train(t, map[int64][]int{0: {4}, 2: {2, 1, 1}}, 4, nil)
	before := children(t) // the reference run's, closed when the test ends
	l, ctx := newLocal(t)
	var launches atomic.Int32
	l.EnvOf = func(int) []string { launches.Add(1); return nil }
	if err := l.Resize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.Prestart(ctx, 3)
	l.Prestart(ctx, 3) // already started: nothing more
	for step := range int64(4) {
		sizes := []int{4}
		if step >= 2 {
			if err := l.Resize(ctx, 3); err != nil {
				t.Fatal(err)
			}
			sizes = []int{2, 1, 1}
		}
		res, err := l.Step(ctx, step, sizes, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.Digest != want[step] {
			t.Errorf("step %d: digest %s, want %s", step, res.Digest, want[step])
		}
	}
	if n := launches.Load(); n != 3 {
		t.Errorf("%d processes started for a run that grew 1 -> 3 after Prestart(3), want 3", n)
	}
	l.Prestart(ctx, 5) // two spares, never taken
	var pids []int
	for _, p := range l.Processes() {
		pids = append(pids, p.Pid())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := launches.Load(); n != 5 {
		t.Errorf("%d processes started after Prestart(5) on 3, want 5", n)
	}
	for _, pid := range children(t) {
		if !slices.Contains(before, pid) {
			t.Errorf("process %d of this test still runs after Close (closed %v and two spares)", pid, pids)
		}
	}
}

// children lists the PIDs of this process's children (from /proc; Close
// and Kill reap theirs, so none is a zombie for long).
func children(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its ")"
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var pid, ppid int
		fmt.Sscanf(string(b), "%d", &pid)
		if _, err := fmt.Sscanf(rest, " %s %d", &state, &ppid); err == nil && ppid == os.Getpid() {
			kids = append(kids, pid)
		}
	}
	return kids
}

// TestResizeStartsEveryMissingProcessBeforeWaitingForAny: a Resize from
// none to 3 starts the 3 processes together (issue 18 item 5). Each
// launch is held at its start (EnvOf, called just before the process is
// started) until all three have reached it: a Resize that waited for one
// process to load before starting the next would leave the first held,
// and the three would never meet.
func TestResizeStartsEveryMissingProcessBeforeWaitingForAny(t *testing.T) {
	l, ctx := newLocal(t)
	const n = 3
	arrived := make(chan int, n)
	all := make(chan struct{})
	var met atomic.Bool
	l.EnvOf = func(rank int) []string {
		arrived <- rank
		select {
		case <-all:
		case <-time.After(time.Minute):
		}
		return nil
	}
	go func() {
		seen := map[int]bool{}
		for len(seen) < n {
			select {
			case r := <-arrived:
				seen[r] = true
			case <-time.After(time.Minute):
				close(all)
				return
			}
		}
		met.Store(true)
		close(all)
	}()
	if err := l.Resize(ctx, n); err != nil {
		t.Fatal(err)
	}
	if !met.Load() {
		t.Fatalf("the %d launches did not all start before the first was let through: processes start one after another", n)
	}
	if l.Workers() != n {
		t.Fatalf("%d processes after Resize(%d)", l.Workers(), n)
	}
	res, err := l.Step(ctx, 0, []int{2, 1, 1}, nil)
	if err != nil || res.Digest == "" {
		t.Fatalf("step 0 on the 3 processes: %v (digest %q)", err, res.Digest)
	}
}

// TestASetupThatHoldsTheGILLongerThanTheHeartbeatTimeoutLoads has every
// process's setup hold Python's GIL for 4 s (its heartbeat thread silent)
// under a 2 s heartbeat timeout: load runs the user's code, and its silence
// is bounded by the startup timeout (its length only by ctx: a setup may
// download its data), so the processes load and train with the fixed run's
// digests (TestAHungProcessIsDroppedWithinTheHeartbeatTimeout: steps keep
// the heartbeat timeout).
func TestASetupThatHoldsTheGILLongerThanTheHeartbeatTimeoutLoads(t *testing.T) {
	want := train(t, map[int64][]int{0: {1, 1, 1, 1}}, 2, nil)
	l, ctx := newLocal(t)
	l.start.HeartbeatTimeout = 2 * time.Second
	l.start.Env = append(l.start.Env, "TOYJOB_SETUP_HOLDS_GIL_S=4")
	t0 := time.Now()
	if err := l.Resize(ctx, 2); err != nil {
		t.Fatalf("loading with a setup that holds the GIL for 4 s: %v", err)
	}
	if took := time.Since(t0); took < 4*time.Second {
		t.Fatalf("the processes loaded in %s: the setup did not hold them 4 s", took)
	}
	for step := range int64(2) {
		res, err := l.Step(ctx, step, []int{2, 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != want[step] {
			t.Fatalf("step %d: digest %s, want %s", step, res.Digest, want[step])
		}
	}
}
