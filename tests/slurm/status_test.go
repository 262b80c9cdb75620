package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// writeState creates the state directory of job id under
// workDir/.easyscale/id/state, for a job named name, as `easyscale run` in
// a Slurm job does, and removes it when the test ends.
func writeState(t *testing.T, workDir, id, name string) {
	t.Helper()
	dir := filepath.Join(workDir, ".easyscale", id, "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join(workDir, ".easyscale")) })
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("3", 64), Name: name, Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
}

// TestStatusOfANobodyJobWithAForgingNameShowsItsTrueUserAndState: the
// unprivileged user nobody (root's sbatch --uid) submits a job whose name
// imitates scontrol's Key=Value text: user root, state COMPLETED and
// another work dir (one holding a state directory for the job's id).
// `easyscale status JOBID` shows user nobody, state RUNNING, and the state
// directory under the job's true WorkDir.
func TestStatusOfANobodyJobWithAForgingNameShowsItsTrueUserAndState(t *testing.T) {
	lab := slurmlab.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	workDir, forged := t.TempDir(), t.TempDir()
	for _, d := range []string{workDir, filepath.Dir(workDir)} {
		if err := os.Chmod(d, 0o755); err != nil { // nobody's job runs there
			t.Fatal(err)
		}
	}
	script := filepath.Join(workDir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 120\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := "x UserId=root(0) GroupId=root(0) JobState=COMPLETED WorkDir=" + forged
	id, err := lab.CLI.Sbatch(ctx, script, "--uid=nobody", "--chdir="+workDir, "-o", "/dev/null", "-p", "normal", "-t", "3", "-J", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.CLI.Output(context.Background(), "scancel", id) })
	writeState(t, workDir, id, "the-true-job")
	writeState(t, forged, id, "the-forged-job")
	job, err := lab.WaitState(ctx, id, 30*time.Second, "RUNNING")
	if err != nil {
		t.Fatal(err)
	}
	out, err := lab.Command(ctx, filepath.Join(lab.Root, "bin", "easyscale"), "status", id).CombinedOutput()
	if err != nil {
		t.Fatalf("easyscale status %s: %v\n%s", id, err, out)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	want := fmt.Sprintf("slurm job %s %q of user nobody: RUNNING on %s, comment %q", id, name, job.NodeList, "")
	if first != want {
		t.Errorf("easyscale status %s printed\n%s\nwant\n%s", id, first, want)
	}
	if !strings.Contains(rest, "job the-true-job") || strings.Contains(rest, "the-forged-job") {
		t.Errorf("easyscale status %s did not read the state under the job's WorkDir %s:\n%s", id, workDir, out)
	}
}
