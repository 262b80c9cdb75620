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

var (
	record         = flag.Bool("record", false, "record testdata/*.txt from the running lab cluster (needs SLURM_CONF; see tests/lab)")
	recordScontrol = flag.Bool("record-scontrol", true, "with -record, also record the scontrol-*.txt files")
	recordDir      = flag.String("record-dir", recordings2205, "with -record, the folder the recordings go to (testdata/slurm-24.11 for the current lab)")
)

// needLab skips a recording test without -record and fails it without a
// lab cluster to record from.
func needLab(t *testing.T) {
	t.Helper()
	if !*record {
		t.Skip("recording needs -record and a running lab cluster")
	}
	if os.Getenv("SLURM_CONF") == "" {
		t.Fatal("-record needs SLURM_CONF of a running lab cluster (eval \"$(make lab-up)\")")
	}
}

// TestRecord records the Slurm output the golden tests parse, from a real cluster:
//
//	eval "$(make lab-up)" && go test ./internal/slurmcli -run TestRecord -record && go test ./internal/slurmcli -update
//
// It submits jobs whose names have spaces, a tab, '|', '=' and 300 characters, a
// pending job with a planned start, a low-priority job, and drains then resumes n4.
// As the unprivileged user nobody (sbatch --uid) it submits hostile jobs for the
// squeue recordings: a name with 0x1F, a name and comment with 0x1F and newlines, a
// name forging a whole extra job record for the first job's id in the 0x1F format
// used before per-call separators, and a work directory named with 0x1F and a
// newline. The squeue and sinfo recordings use one [NewSeparators] pair, saved in
// testdata/separators.txt. -record-scontrol=false keeps the scontrol recordings
// (their job list has no hostile jobs: scontrol's one-line format cannot hold a
// newline in a name, and the daemon does not read it). versions holds what
// `scontrol --version` and `sinfo --version` printed.
//
// -record-dir testdata/slurm-24.11 records Slurm 24.11 from the current lab; the
// test binary runs in its Debian 13 root, where the 24.11 clients are:
//
//	eval "$(EASYSCALE_LAB_CURRENT=1 make -s lab-up)" && go test -c -o /tmp/slurmcli.test ./internal/slurmcli
//	cd internal/slurmcli && $EASYSCALE_LAB_DIR/bin/lab-exec /tmp/slurmcli.test -test.run '^TestRecord$' \
//	    -record -record-dir testdata/slurm-24.11 && go test . -update
func TestRecord(t *testing.T) {
	needLab(t)
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
		{"-J", "per task", "-n2", "--gpus-per-task=1", "--no-requeue", "-t", "5"},
	}
	var ids []string
	seps, err := NewSeparators()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*recordDir, "separators.txt"), []byte(seps.Field+"\n"+seps.Record+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
	hostileDir := filepath.Join(os.TempDir(), "hostile\x1fdir\nfake")
	if err := os.MkdirAll(hostileDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hostileDir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostileDir) })
	for _, args := range [][]string{
		{"-J", "bad\x1fname", "-t", "5"},
		{"-J", "two\x1f\nlines", "--comment=es-extra parent=1\x1f\n2\x1ffake", "-t", "5"},
		{"-J", forgedOldRecord(ids[0]), "-t", "5"},
		{"-J", "hostile workdir", "--chdir=" + hostileDir, "-t", "5"},
	} {
		args = append([]string{"--uid=nobody", "--chdir=/tmp"}, args...)
		id, err := r.Sbatch(ctx, script, append(args, "-o", "/dev/null")...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitPlanned(ctx, t, r, ids)
	var versions []byte
	for _, c := range []string{"scontrol", "sinfo"} {
		out, err := r.Output(ctx, c, "--version")
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, out...)
	}
	if err := os.WriteFile(filepath.Join(*recordDir, "versions"), versions, 0o644); err != nil {
		t.Fatal(err)
	}
	save := func(name string, args ...string) {
		out, err := r.Output(ctx, args[0], args[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*recordDir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	squeue := func(name string, args ...string) {
		r := Runner{Env: append(Runner{}.readEnv(), SqueueFormatEnv(seps))}
		out, err := r.Output(ctx, "squeue", append(SqueueArgs(), args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*recordDir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	squeue("squeue.txt")
	squeue("squeue-start.txt", "--states=PENDING", "--sort=S")
	save("sinfo.txt", append([]string{"sinfo"}, SinfoArgs(seps)...)...)
	if !*recordScontrol {
		if _, err := r.Output(ctx, "scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=lab test: drained by TestRecord"); err != nil {
			t.Fatal(err)
		}
		save("sinfo-drained.txt", append([]string{"sinfo"}, SinfoArgs(seps)...)...)
		return
	}
	save("scontrol-node.txt", "scontrol", "show", "node", "-o")
	var all []byte
	for _, id := range ids[:len(submits)] {
		out, err := r.Output(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out...)
	}
	if err := os.WriteFile(filepath.Join(*recordDir, "scontrol-job.txt"), all, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Output(ctx, "scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=lab test: drained by TestRecord"); err != nil {
		t.Fatal(err)
	}
	save("sinfo-drained.txt", append([]string{"sinfo"}, SinfoArgs(seps)...)...)
	save("scontrol-node-drained.txt", "scontrol", "show", "node", "-o", "n4")
}

// waitPlanned waits until the backfill scheduler (bf_interval=1) has
// planned every pending job of ids: a start time and the nodes it plans
// (SchedNodes), as the recordings of pending jobs need. It fails the test
// after 60 s.
func waitPlanned(ctx context.Context, t *testing.T, r Runner, ids []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending, err := r.SqueueStart(ctx, "--jobs="+strings.Join(ids, ","))
		if err != nil {
			t.Fatal(err)
		}
		var unplanned []string
		for _, j := range pending {
			if j.StartTime == "" || j.SchedNodes == "" {
				unplanned = append(unplanned, j.ID)
			}
		}
		if len(unplanned) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backfill has not planned pending jobs %v after 60 s", unplanned)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRecordReservations records `scontrol show reservation -o` from a real
// cluster into scontrol-reservation.txt: a maintenance reservation of n1
// and n2 an hour ahead and one of n4 active now (both deleted again), and
// scontrol-reservation-none.txt with none; and `scontrol show config` into
// scontrol-config.txt (its bf_interval). It runs with -record, as
// TestRecord does (-test.run '^TestRecordReservations$').
func TestRecordReservations(t *testing.T) {
	needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r Runner
	save := func(name string) {
		out, err := r.Output(ctx, "scontrol", "show", "reservation", "-o")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*recordDir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"es-record-maint", "es-record-now"} {
		t.Cleanup(func() { _, _ = r.Output(context.Background(), "scontrol", "delete", "ReservationName="+name) })
	}
	for _, args := range [][]string{
		{"ReservationName=es-record-maint", "StartTime=now+1hour", "Duration=30", "Nodes=n[1-2]", "Users=root", "Flags=MAINT"},
		{"ReservationName=es-record-now", "StartTime=now", "Duration=60", "Nodes=n4", "Users=root"},
	} {
		if _, err := r.Output(ctx, "scontrol", append([]string{"create", "reservation"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	save("scontrol-reservation.txt")
	for _, name := range []string{"es-record-maint", "es-record-now"} {
		if _, err := r.Output(ctx, "scontrol", "delete", "ReservationName="+name); err != nil {
			t.Fatal(err)
		}
	}
	save("scontrol-reservation-none.txt")
	out, err := r.Output(ctx, "scontrol", "show", "config")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*recordDir, "scontrol-config.txt"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordPartitions records `sinfo --all -o PartitionFormat` from a real
// cluster into partitions.txt: the lab's partitions with MaxTime set
// (normal 1-12:00:00, low 10 minutes) and a hidden partition of n1 with
// PriorityTier 5, which only --all lists; each is set back afterwards. It
// runs with -record, as TestRecord does (-test.run '^TestRecordPartitions$').
func TestRecordPartitions(t *testing.T) {
	needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var r Runner
	run := func(args ...string) {
		t.Helper()
		if _, err := r.Output(ctx, "scontrol", args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"delete", "PartitionName=es-record-hidden"},
			{"update", "PartitionName=normal", "MaxTime=INFINITE"},
			{"update", "PartitionName=low", "MaxTime=INFINITE"},
		} {
			_, _ = r.Output(context.Background(), "scontrol", args...)
		}
	})
	run("update", "PartitionName=normal", "MaxTime=1-12:00:00")
	run("update", "PartitionName=low", "MaxTime=10")
	run("create", "PartitionName=es-record-hidden", "Nodes=n1", "Hidden=YES", "PriorityTier=5", "MaxTime=30", "State=UP")
	out, err := r.Output(ctx, "sinfo", "--all", "--noheader", "-o", PartitionFormat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*recordDir, "partitions.txt"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
