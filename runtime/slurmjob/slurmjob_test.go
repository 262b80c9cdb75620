package slurmjob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	base := map[string]string{"SLURM_JOB_ID": "42", "SLURM_PROCID": "1", "SLURM_NTASKS": "3", "SLURM_SUBMIT_DIR": "/home/u", "SLURM_RESTART_COUNT": "2"}
	task, ok, err := FromEnv(env(base))
	if err != nil || !ok {
		t.Fatalf("FromEnv = %v, %v", ok, err)
	}
	if task.ProcID != 1 || task.NTasks != 3 || task.RestartCount != 2 || task.Rendezvous != "/home/u/.easyscale/42" || task.IsCoordinator() {
		t.Fatalf("task = %+v", task)
	}
	if _, ok, _ := FromEnv(env(map[string]string{})); ok {
		t.Fatal("a process outside Slurm was taken for a task")
	}
	for _, bad := range []map[string]string{
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "x"},
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "3", "SLURM_NTASKS": "3", "SLURM_SUBMIT_DIR": "/"},
		{"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
	} {
		if _, _, err := FromEnv(env(bad)); err == nil {
			t.Errorf("FromEnv(%v) accepted a malformed environment", bad)
		}
	}
}

func TestRetireStaleMovesAnEarlierJobsDirectoryOnlyOnTheFirstRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "42")
	os.MkdirAll(filepath.Join(dir, "state"), 0o700)
	if moved, err := RetireStale(dir, 1, time.Now()); err != nil || moved != "" {
		t.Fatalf("a requeued job's directory was moved: %q %v", moved, err)
	}
	moved, err := RetireStale(dir, 0, time.Now())
	if err != nil || !strings.HasPrefix(moved, dir+".old-") {
		t.Fatalf("RetireStale = %q, %v", moved, err)
	}
	if _, err := os.Stat(filepath.Join(moved, "state")); err != nil {
		t.Fatalf("the old state was not kept: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("the stale directory is still in place")
	}
}

func TestCoordinatorAddressRoundTripAndStaleness(t *testing.T) {
	dir := t.TempDir()
	if err := PublishCoordinator(dir, "10.0.0.1:7000"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if addr, err := WaitCoordinator(ctx, dir, time.Now().Add(-time.Minute)); err != nil || addr != "10.0.0.1:7000" {
		t.Fatalf("WaitCoordinator = %q, %v", addr, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := WaitCoordinator(short, dir, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("a stale address was accepted")
	}
}
