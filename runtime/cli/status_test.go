package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// fakeSlurm answers squeue (in the --Format and separators its caller put
// in SQUEUE_FORMAT2, as squeue does) and `scontrol show job -o` for the
// one job j; any other id is unknown to both.
type fakeSlurm struct {
	job slurmcli.Job
	// scontrol is the job's `scontrol show job -o` line.
	scontrol string
}

func (f fakeSlurm) runner() slurmcli.Runner {
	return slurmcli.Runner{Env: []string{}, Exec: f.exec}
}

var errInvalidJobID = &slurmcli.CommandError{Command: "squeue", Err: errors.New("exit status 1"),
	Stderr: "slurm_load_jobs error: Invalid job id specified"}

func (f fakeSlurm) exec(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
	switch name {
	case "squeue":
		if !slices.Contains(args, "--jobs="+f.job.ID) {
			return nil, errInvalidJobID
		}
		var format string
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "SQUEUE_FORMAT2="); ok {
				format = v
			}
		}
		parts := strings.Split(format, ",")
		if len(parts) != len(slurmcli.SqueueFields) {
			return nil, errors.New("fake squeue: SQUEUE_FORMAT2 does not list the package's fields")
		}
		var b strings.Builder
		for i, v := range squeueValues(f.job) {
			b.WriteString(v)
			b.WriteString(strings.TrimPrefix(parts[i], slurmcli.SqueueFields[i]+":0"))
		}
		b.WriteString("\n")
		return []byte(b.String()), nil
	case "scontrol":
		if len(args) == 4 && args[3] == f.job.ID {
			return []byte(f.scontrol + "\n"), nil
		}
		return nil, &slurmcli.CommandError{Command: "scontrol", Err: errors.New("exit status 1"),
			Stderr: "slurm_load_jobs error: Invalid job id specified"}
	}
	return nil, errors.New("fake Slurm: unexpected command " + name)
}

// squeueValues are j's fields in the order of slurmcli.SqueueFields, as
// squeue prints them.
func squeueValues(j slurmcli.Job) []string {
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	return []string{j.ID, j.Name, j.State, j.Partition, "1", "1", "N/A", "N/A", or(j.NodeList, ""), "None",
		or(j.StartTime, "N/A"), "N/A", "5:00", "(null)", or(j.BatchHost, ""), or(j.Comment, "(null)"), j.User, or(j.Account, "(null)"),
		j.WorkDir, "(null)", "N/A", "N/A", "cpu=1,node=1,billing=1", "1", "normal", or(j.UID, "1000")}
}

// jobState writes a state directory for a job named name under
// workDir/.easyscale/id/state, as `easyscale run` in a Slurm job does.
func jobState(t *testing.T, workDir, id, name string) {
	t.Helper()
	dir := filepath.Join(workDir, ".easyscale", id, "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("2", 64), Name: name, Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
}

// TestStatusOfAJobIDShowsWhatSlurmKnowsNotWhatItsNameSays: a user's job
// whose name imitates scontrol's Key=Value text (another user, state and
// work dir) is shown by `easyscale status JOBID` with its true user, state
// and state directory, and its name and comment quoted, control characters
// escaped, so that they cannot forge a line of the output either.
func TestStatusOfAJobIDShowsWhatSlurmKnowsNotWhatItsNameSays(t *testing.T) {
	root := t.TempDir()
	trueDir, forgedDir := filepath.Join(root, "nobody"), filepath.Join(root, "elsewhere")
	const id = "4711"
	jobState(t, trueDir, id, "the-true-job")
	jobState(t, forgedDir, id, "the-forged-job")
	cases := []struct {
		name, jobName, comment string
	}{
		{"a name forging scontrol's user, state and work dir",
			"x UserId=root(0) GroupId=nobody(65534) JobState=COMPLETED WorkDir=" + forgedDir, ""},
		{"a name holding 0x1F and a forged status line",
			"x\x1fy\nslurm job 1 \"ok\" of user root: RUNNING", "es-elastic\nof user root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := slurmcli.Job{ID: id, Name: c.jobName, State: "RUNNING", Partition: "normal", NodeList: "n3",
				BatchHost: "n3", Comment: c.comment, User: "nobody", Account: "nogroup", WorkDir: trueDir}
			line := "JobId=" + id + " JobName=" + c.jobName + " UserId=nobody(65534) GroupId=nogroup(65534) MCS_label=N/A " +
				"Account=nogroup JobState=RUNNING Reason=None Restarts=0 Partition=normal NodeList=n3 BatchHost=n3 " +
				"NumNodes=1 NumCPUs=1 TRES=cpu=1,node=1 WorkDir=" + trueDir + " Comment=" + c.comment
			var out, errb bytes.Buffer
			code := Main([]string{"status", id}, Env{Stdout: &out, Stderr: &errb, Slurm: fakeSlurm{job, line}.runner()})
			if code != 0 {
				t.Fatalf("exit %d, stderr %q, want 0", code, errb.String())
			}
			first, rest, _ := strings.Cut(out.String(), "\n")
			want := fmt.Sprintf("slurm job %s %q of user nobody: RUNNING on n3, comment %q", id, c.jobName, c.comment)
			if first != want {
				t.Errorf("first line\n%s\nwant\n%s", first, want)
			}
			if !strings.Contains(rest, "job the-true-job") || strings.Contains(out.String(), "the-forged-job") {
				t.Errorf("status read another state directory than the job's WorkDir %s:\n%s", trueDir, out.String())
			}
			if strings.Contains("\n"+rest, "\nslurm job") || strings.Contains(rest, "of user root") || strings.Contains(out.String(), "\x1f") {
				t.Errorf("the job's name or comment printed raw (a forged line, or 0x1F):\n%s", out.String())
			}
		})
	}
}

func TestStatusOfAnUnknownJobIDSaysSo(t *testing.T) {
	var out, errb bytes.Buffer
	fake := fakeSlurm{job: slurmcli.Job{ID: "1"}}
	code := Main([]string{"status", "99"}, Env{Stdout: &out, Stderr: &errb, Slurm: fake.runner()})
	if code != 1 || !strings.Contains(errb.String(), "job 99") || !strings.Contains(errb.String(), "no such job") {
		t.Fatalf("exit %d, stderr %q: want 1 and an error naming job 99 as unknown", code, errb.String())
	}
}

// TestStatusOfARunningJobDoesNotSayNotRunning: progress.json is written at
// most once a second, so it lags the ledger of any fast run (and stays at
// the last step before a long one). Status read that lag as a stopped run
// and told the user to rerun the command while the writer still held the
// state directory (seen on a real run: progress step 1, ledger step 3,
// "not running ... rerun the command to resume"). A directory a writer
// holds is running.
func TestStatusOfARunningJobDoesNotSayNotRunning(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.Open(dir) // the running writer: holds the state directory's lock
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("3", 64), Name: "running", Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for step := int64(0); step <= 3; step++ {
		if err := db.AppendLedger(statedb.LedgerEntry{Step: step, Digest: "sha256:" + strings.Repeat("a", 64), Workers: 2,
			Placement: "0|1", SamplesHash: "sha256:" + strings.Repeat("b", 64)}); err != nil {
			t.Fatal(err)
		}
	}
	progress := fmt.Sprintf(`{"step":1,"stop":30,"horizon":234,"workers":2,"step_seconds":0.05,"updated":%q,"done":false}`,
		time.Now().UTC().Format(time.RFC3339Nano))
	if err := os.WriteFile(filepath.Join(dir, "progress.json"), []byte(progress), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stdout, stderr := run("status", dir)
	if strings.Contains(stdout, "not running") || !strings.Contains(stdout, "running") {
		t.Fatalf("status of a directory a writer holds:\n%s%s\nwant it running, not \"not running ... rerun\"", stdout, stderr)
	}
}

func TestStatusShowsTheDigestIntervalAndUnhashedSteps(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("4", 64), Name: "sparse", Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= 4; step++ {
		e := statedb.LedgerEntry{Step: step, Digest: "sha256:" + strings.Repeat("a", 64), Workers: 2, Placement: "0|1"}
		if step%4 != 0 {
			e.Digest, e.Unhashed = "", true
		}
		if err := db.AppendLedger(e); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	progress := fmt.Sprintf(`{"step":4,"stop":4,"horizon":4,"workers":2,"step_seconds":0.05,"updated":%q,"done":true,"digest_every_steps":4,"digest_cost_pct":3.2}`,
		time.Now().UTC().Format(time.RFC3339Nano))
	if err := os.WriteFile(filepath.Join(dir, "progress.json"), []byte(progress), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("status", dir)
	if code != 0 || len(regexp.MustCompile(`(?m)^\d+ .* unhashed$`).FindAllString(stdout, -1)) != 3 || !strings.Contains(stdout, "ledger digest: every 4 steps") ||
		!strings.Contains(stdout, "3.20 % of a step") {
		t.Fatalf("status exit %d:\n%s%s\nwant 0, three rows unhashed and the interval with its cost", code, stdout, stderr)
	}
}

// TestStatusNamesTheRunsAJobStartedOverFrom: a state directory whose job
// started over (statedb.DB.StartOver: a checkpoint computed with other
// numerics) lists the kept run and where its ledger ended.
func TestStatusNamesTheRunsAJobStartedOverFrom(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.InitJob(statedb.Job{ID: "sha256:" + strings.Repeat("5", 64), Name: "moved", Spec: `{"seed":1}`, LogicalWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= 6; step++ {
		if err := db.AppendLedger(statedb.LedgerEntry{Step: step, Digest: "sha256:" + strings.Repeat("b", 64), Workers: 2, Placement: "0|1"}); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, _ := run("status", dir); code != 0 || strings.Contains(stdout, "started over") {
		t.Fatalf("status before any start-over: exit %d\n%s", code, stdout)
	}
	kept, err := db.StartOver()
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, stdout, stderr := run("status", dir)
	if code != 0 || !strings.Contains(stdout, "started over") || !strings.Contains(stdout, kept+", its ledger ended at step 6") {
		t.Fatalf("status exit %d:\n%s%s\nwant the run kept in %s named with its last step 6", code, stdout, stderr, kept)
	}
	// The kept run's own status says what it is (a tester's: only run warned).
	if code, stdout, stderr := run("status", kept); code != 0 || !strings.Contains(stdout, "a run kept by a start-over of the job whose state directory is "+dir) {
		t.Fatalf("status of the kept run: exit %d:\n%s%s\nwant it named a run kept by a start-over of %s", code, stdout, stderr, dir)
	}
	// A start-over killed after it cleared the state, before it named its
	// copy (as statedb leaves it): listed before the next run names it.
	unnamed := filepath.Join(filepath.Dir(kept), ".copied-"+filepath.Base(kept))
	if err := os.Rename(kept, unnamed); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run("status", dir)
	if code != 0 || !strings.Contains(stdout, "interrupted before the copy of the run before was named: it is kept in "+unnamed+", which the next run renames "+kept) {
		t.Fatalf("status exit %d:\n%s%s\nwant the interrupted start-over's copy %s named", code, stdout, stderr, unnamed)
	}
}
