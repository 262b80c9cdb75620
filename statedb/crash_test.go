package statedb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// helperEnv names the state directory TestHelperProcess writes into; unset,
// the helper does nothing.
const helperEnv = "STATEDB_TEST_HELPER_DIR"

// helperFloats is the size of each helper checkpoint's large tensor (2 MiB).
const helperFloats = 1 << 19

// slowFile stretches each checkpoint write over ~16 ms (64 KiB, then 0.5 ms)
// so that a kill at a random moment usually lands inside the write.
type slowFile struct{ *os.File }

func (f slowFile) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k, err := f.File.Write(p[:min(len(p), 64<<10)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
		time.Sleep(500 * time.Microsecond)
	}
	return n, nil
}

func helperContexts(step int64) []ESTContext {
	ctxs := make([]ESTContext, 8)
	for i := range ctxs {
		ctxs[i] = ESTContext{EST: i, Blob: []byte(fmt.Sprintf("est%d@%d", i, step))}
	}
	return ctxs
}

// TestHelperProcess is not a test: TestSIGKILLWhileCheckpointing runs the
// test binary with only this function selected and helperEnv set; it then
// appends ledger rows and saves checkpoints until it is killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper for TestSIGKILLWhileCheckpointing")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	db, err := Open(dir)
	if err != nil {
		fail(err)
	}
	db.create = func(p string) (checkpointFile, error) {
		f, err := createFile(p)
		if err != nil {
			return nil, err
		}
		return slowFile{f.(*os.File)}, nil
	}
	if _, err := db.InitJob(Job{ID: "crash", Name: "crash", LogicalWorkers: 8}); err != nil {
		fail(err)
	}
	step := int64(0)
	if last, ok, err := db.LastStep(); err != nil {
		fail(err)
	} else if ok {
		step = last + 1
	}
	fmt.Println("ready")
	for ; ; step++ {
		if err := db.AppendLedger(entry(step, "crash")); err != nil {
			fail(err)
		}
		if err := db.SaveCheckpoint(step, stepTensors(step, helperFloats), helperContexts(step), nil); err != nil {
			fail(err)
		}
		fmt.Println("saved")
	}
}

// runAndKill starts the helper on dir, waits until it has opened the
// database (and, with afterSave, until it has saved one checkpoint: on a
// loaded machine the random delays alone can all end before a first save),
// lets it run for delay and SIGKILLs it.
func runAndKill(t *testing.T, dir string, delay time.Duration, afterSave bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	saved := make(chan struct{}, 1)
	drained := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
			if sc.Text() == "saved" {
				select {
				case saved <- struct{}{}:
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
		close(drained)
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("helper exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("helper not ready after 30 s")
	}
	if afterSave {
		select {
		case <-saved:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("helper saved no checkpoint in 60 s")
		}
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-drained
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("helper was not killed by the signal: %v", err)
	}
}

func TestSIGKILLWhileCheckpointing(t *testing.T) {
	dir := t.TempDir()
	// A first checkpoint, so that even a kill during the helper's first
	// save leaves one to fall back to.
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	db.InitJob(Job{ID: "crash", Name: "crash", LogicalWorkers: 8})
	db.AppendLedger(entry(0, "crash"))
	if err := db.SaveCheckpoint(0, stepTensors(0, helperFloats), helperContexts(0), nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill delays from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const kills = 6
	midWrite := 0
	var steps []int64
	for i := range kills {
		runAndKill(t, dir, time.Duration(20+rng.IntN(120))*time.Millisecond, i == kills-1)
		tmps, _ := filepath.Glob(filepath.Join(dir, CheckpointDir, "*.tmp"))
		if len(tmps) > 0 {
			midWrite++
		}
		// A reader (easyscale verify/status) must cope with the dead
		// writer's WAL before any writer has reopened the directory.
		r, err := OpenReadOnly(dir)
		if err != nil {
			t.Fatalf("OpenReadOnly after kill %d: %v", i+1, err)
		}
		if _, ok, err := r.LastStep(); err != nil || !ok {
			t.Fatalf("reader after kill %d: LastStep ok=%v err=%v", i+1, ok, err)
		}
		if cp, _, err := r.LatestCheckpoint(); err != nil || cp == nil {
			t.Fatalf("reader after kill %d: LatestCheckpoint = %v, %v", i+1, cp, err)
		}
		r.Close()
		db, err = Open(dir)
		if err != nil {
			t.Fatalf("Open after kill %d: %v", i+1, err)
		}
		steps = append(steps, checkAfterCrash(t, db))
		db.Close()
	}
	t.Logf("newest usable checkpoint after each kill: %v", steps)
	if steps[kills-1] == 0 {
		t.Fatal("the helpers never recorded a checkpoint beyond the seeded one")
	}
	t.Logf("%d of %d kills landed while a checkpoint file was being written", midWrite, kills)
	if midWrite == 0 {
		t.Fatalf("no kill landed inside a checkpoint write; the test did not exercise the crash it is for")
	}
}

// checkAfterCrash verifies a state directory reopened after a SIGKILL.
// It returns the step of the newest usable checkpoint.
func checkAfterCrash(t *testing.T, db *DB) int64 {
	t.Helper()
	if err := db.IntegrityCheck(); err != nil {
		t.Fatal(err)
	}
	cp, skipped, err := db.LatestCheckpoint()
	if err != nil || len(skipped) != 0 || cp == nil {
		t.Fatalf("LatestCheckpoint = %v, %v, %v; want a valid checkpoint and nothing skipped", cp, skipped, err)
	}
	checkStepTensors(t, cp)
	if want := helperContexts(cp.Step); len(cp.Contexts) != len(want) || string(cp.Contexts[7].Blob) != string(want[7].Blob) {
		t.Fatalf("contexts of step %d = %v", cp.Step, cp.Contexts)
	}
	last, ok, err := db.LastStep()
	if err != nil || !ok || last < cp.Step {
		t.Fatalf("ledger ends at %d (%v, %v), before checkpoint %d", last, ok, err, cp.Step)
	}
	if tmps, _ := filepath.Glob(filepath.Join(db.Dir(), CheckpointDir, "*.tmp")); len(tmps) != 0 {
		t.Fatalf("Open left %v", tmps)
	}
	return cp.Step
}
