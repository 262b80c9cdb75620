package slurmcli

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var record = flag.Bool("record", false, "record testdata/*.txt from the running lab cluster (needs SLURM_CONF; see tests/lab)")

// TestRecord records the Slurm output the golden tests parse, from a real cluster:
//
//	eval "$(make lab-up)" && go test ./internal/slurmcli -run TestRecord -record && go test ./internal/slurmcli -update
//
// It submits jobs whose names have spaces, a tab, '|', '=' and 300 characters, a
// pending job with a planned start, a low-priority job, and drains then resumes n4.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("recording needs -record and a running lab cluster")
	}
	if os.Getenv("SLURM_CONF") == "" {
		t.Fatal("-record needs SLURM_CONF of a running lab cluster (eval \"$(make lab-up)\")")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r Runner
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	submits := [][]string{
		{"-J", "plain", "-N2", "--gres=gpu:v100:2", "-t", "5", "--comment=es step=1/4 workers=3/8 d1"},
		{"-J", "my training job", "--gpus=3", "-t", "5"},
		{"-J", strings.Repeat("long-", 60), "-t", "5"},
		{"-J", "tab\there|pipe x=y Foo=bar", "--gres=gpu:t4:1", "-t", "5"},
		{"-J", "low prio", "-p", "low", "--gres=gpu:1", "-t", "5"},
		{"-J", "waits for all", "-N4", "--exclusive", "-t", "5"},
		{"-J", "range", "-N1-4", "--exclusive", "-t", "5"},
	}
	var ids []string
	t.Cleanup(func() {
		if len(ids) > 0 {
			_, _ = r.Output(context.Background(), "scancel", ids...)
		}
		_, _ = r.Output(context.Background(), "scontrol", "update", "NodeName=n4", "State=RESUME")
	})
	for _, args := range submits {
		id, err := r.Sbatch(ctx, script, append(args, "-o", "/dev/null")...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	time.Sleep(3 * time.Second) // two backfill cycles (bf_interval=1) plan the pending jobs
	save := func(name string, args ...string) {
		out, err := r.Output(ctx, args[0], args[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("squeue.txt", append([]string{"squeue"}, SqueueArgs()...)...)
	save("squeue-start.txt", append([]string{"squeue", "--states=PENDING", "--sort=S"}, SqueueArgs()...)...)
	save("sinfo.txt", append([]string{"sinfo"}, SinfoArgs()...)...)
	save("scontrol-node.txt", "scontrol", "show", "node", "-o")
	var all []byte
	for _, id := range ids {
		out, err := r.Output(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out...)
	}
	if err := os.WriteFile(filepath.Join("testdata", "scontrol-job.txt"), all, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Output(ctx, "scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=lab test: drained by TestRecord"); err != nil {
		t.Fatal(err)
	}
	save("sinfo-drained.txt", append([]string{"sinfo"}, SinfoArgs()...)...)
	save("scontrol-node-drained.txt", "scontrol", "show", "node", "-o", "n4")
}
