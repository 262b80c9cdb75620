package daemon

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// Extra jobs run under their user's uid, so the user may rename them
// (`scontrol update JobId=ID Name=kept Comment=kept`): the id sbatch
// returned, not the name or comment, makes a job the daemon's extra job.

// renames are what an owner may do to an extra job's name and comment.
var renames = []struct {
	name          string
	jobName, note string
}{
	{"name and comment changed", "kept", "kept"},
	{"name changed", "kept", ""}, // "": left as submitted
	{"comment changed", "", "kept"},
	{"comment made an EasyScale request", "", elasticComment},
	{"comment another extra job's", "", "es-extra parent=99"},
	// a tester's live finding: in another extra job's form it stayed in the
	// view's extra jobs, so the check before scancel expected the recorded
	// name and refused, every cycle, and it outlived its parent
	{"name and comment another extra job's", "es-extra-99", "es-extra parent=99"},
}

// rename applies an owner's rename to extra job id ("" leaves a field).
func rename(td *testDaemon, id, name, comment string) {
	j := td.fake.job(id)
	td.fake.set(func() {
		if name != "" {
			j.name = name
		}
		if comment != "" {
			j.comment = comment
		}
	})
}

// renamedSetup: job 10 (alice, max 3 GPUs) is lent one GPU under
// limits.max_extra_gpus_per_user = 1, then its owner renames the extra job.
func renamedSetup(t *testing.T, jobName, comment string, pending bool) (td *testDaemon, extra string, logs *bytes.Buffer) {
	t.Helper()
	td = newTestDaemon(t, "[limits]\nmax_extra_gpus_per_user = 1\n")
	logs = &bytes.Buffer{}
	td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: logs, JSONFormat: true})
	td.fake.startPending = pending
	td.fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10"))
	r := td.cycle(t)
	if len(r.Submitted) != 1 {
		t.Fatalf("submitted %v, want one extra job (1 GPU: the per-user cap)", r.Submitted)
	}
	extra = r.Submitted[0]
	rename(td, extra, jobName, comment)
	td.advance(2 * time.Second)
	return td, extra, logs
}

func TestARenamedExtraJobIsStillCountedAndNotMarkedEnded(t *testing.T) {
	for _, tc := range renames {
		t.Run(tc.name, func(t *testing.T) {
			td, extra, logs := renamedSetup(t, tc.jobName, tc.note, false)
			// Long enough for a lend counted failed to be retried.
			var submitted []string
			lentWrong := ""
			for range 40 {
				r := td.cycle(t)
				submitted = append(submitted, r.Submitted...)
				if r.LentGPUs != 1 && lentWrong == "" {
					lentWrong = fmt.Sprintf("at %v: report lent %d GPUs, want 1 (the renamed extra job's)", td.now, r.LentGPUs)
				}
				// The planner sees it as job 10's extra job, not as an
				// ordinary running job.
				for _, j := range r.Snapshot.Running {
					switch {
					case j.ID == extra && lentWrong == "":
						lentWrong = fmt.Sprintf("at %v: renamed extra job %s planned as an ordinary running job", td.now, extra)
					case j.ID == "10" && (len(j.Extras) != 1 || j.Extras[0].ID != extra) && lentWrong == "":
						lentWrong = fmt.Sprintf("at %v: job 10 planned with extra jobs %+v, want %s", td.now, j.Extras, extra)
					}
				}
				td.advance(15 * time.Second)
			}
			if len(submitted) != 0 {
				t.Errorf("submitted %v beside renamed extra job %s, past max_extra_gpus_per_user = 1", submitted, extra)
			}
			if lentWrong != "" {
				t.Error(lentWrong)
			}
			xs := td.active(t)
			if len(xs) != 1 || xs[0].ID != extra {
				t.Fatalf("active records %+v, want extra job %s still active", xs, extra)
			}
			if got := td.fake.commands("scancel"); len(got) != 0 {
				t.Errorf("%v: acted on a renamed extra job whose parent runs", got)
			}
			if n := countLogs(t, logs, "extra job ended", extra); n != 0 {
				t.Errorf("%d lines saying running extra job %s ended:\n%s", n, extra, logs.String())
			}
			if n := countLogs(t, logs, "extra job renamed by its owner", extra); n != 1 {
				t.Errorf("%d warnings about renamed extra job %s, want one:\n%s", n, extra, logs.String())
			}
			if got := value(td.Metrics().LendFailures.WithLabelValues("ended")); got != 0 {
				t.Errorf("lend_failures_total{reason=ended} %v, want 0", got)
			}
		})
	}
}

func TestARenamedExtraJobIsCancelledWithItsParentOrAfterPendingTimeout(t *testing.T) {
	type tcase struct {
		name          string
		jobName, note string
		pending       bool
		// end makes the extra job due for cancelling.
		end        func(td *testDaemon)
		wantReason string
	}
	var tests []tcase
	for _, rn := range renames {
		tests = append(tests,
			tcase{"parent completed, " + rn.name, rn.jobName, rn.note, false,
				func(td *testDaemon) {
					j := td.fake.job("10")
					td.fake.set(func() { j.state = "COMPLETED" })
				}, "parent job 10"},
			tcase{"parent cancelled, " + rn.name, rn.jobName, rn.note, false,
				func(td *testDaemon) {
					j := td.fake.job("10")
					td.fake.set(func() { j.state = "CANCELLED" })
				}, "parent job 10"})
	}
	tests = append(tests, tcase{"still pending after pending_timeout, name and comment changed", "kept", "kept", true,
		func(td *testDaemon) { td.advance(31 * time.Second) }, "pending_timeout"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td, extra, _ := renamedSetup(t, tc.jobName, tc.note, tc.pending)
			td.cycle(t)
			if got := td.fake.commands("scancel"); len(got) != 0 {
				t.Fatalf("%v before the extra job was due", got)
			}
			tc.end(td)
			td.advance(2 * time.Second)
			r := td.cycle(t)
			if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+extra {
				t.Fatalf("%v, want scancel %s", got, extra)
			}
			if !slices.Contains(r.Cancelled, extra) {
				t.Errorf("report cancelled %v, want %s", r.Cancelled, extra)
			}
			if x, _ := td.db.Extra(context.Background(), extra); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, tc.wantReason) {
				t.Errorf("record %+v, want ended (%s)", x, tc.wantReason)
			}
		})
	}
}

// TestARecordedIDSlurmListsForAnotherUserIsNotTheDaemons: an id the
// daemon recorded that Slurm lists out of the extra job form under another
// user (in its partition or another) is not its extra job (the id was
// reused): it is never cancelled, and the record ends.
func TestARecordedIDSlurmListsForAnotherUserIsNotTheDaemons(t *testing.T) {
	tests := []struct {
		name   string
		change func(j *fakeJob)
	}{
		{"another user", func(j *fakeJob) { j.user = "bob" }},
		{"another user and partition", func(j *fakeJob) { j.user, j.partition = "bob", "normal" }},
	}
	for _, tc := range tests {
		for _, rn := range renames {
			t.Run(tc.name+", "+rn.name, func(t *testing.T) {
				td := newTestDaemon(t, "")
				// Job 11 was recorded for parent 10, which is gone: were it
				// the daemon's, it would be cancelled.
				j := td.fake.extra("11", "10", "n2", 1, 20*time.Minute)
				record(t, td, backfillstore.ExtraJob{ID: "11", Parent: "10", Node: "n2", GPUs: 1, Submitted: td.now,
					End: td.now.Add(20 * time.Minute)})
				rename(td, "11", rn.jobName, rn.note)
				td.fake.set(func() { tc.change(j) })
				for range 3 {
					td.cycle(t)
					td.advance(2 * time.Second)
				}
				if got := td.fake.commands("scancel"); len(got) != 0 {
					t.Fatalf("%v: acted on job 11 of user %s in partition %s (name %q, comment %q)", got, j.user, j.partition,
						j.name, j.comment)
				}
				if x, _ := td.db.Extra(context.Background(), "11"); x.State != backfillstore.ExtraEnded {
					t.Errorf("record %+v, want ended: Slurm's job 11 is not the one submitted", x)
				}
			})
		}
	}
}

// TestAnExtraJobItsOwnerMovedToAnotherPartitionIsCancelled: a tester moved
// each extra job of theirs out of extra.partition while it waited
// (`scontrol update JobId=ID Partition=normal`); the daemon read it as
// another job, ended its record, and the job ran on in "normal": past its
// parent's end, beside new lends past the per-user cap, and holding GPUs
// another user's job then waited for. The daemon's extra job is the one of
// the id sbatch returned under the recorded user, in whichever partition:
// moved (renamed or not) it is cancelled at once, its parent running.
func TestAnExtraJobItsOwnerMovedToAnotherPartitionIsCancelled(t *testing.T) {
	unrenamed := struct{ name, jobName, note string }{"not renamed", "", ""}
	for _, rn := range append([]struct{ name, jobName, note string }{unrenamed}, renames...) {
		for _, pending := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, pending %v", rn.name, pending), func(t *testing.T) {
				td, extra, _ := renamedSetup(t, rn.jobName, rn.note, pending)
				j := td.fake.job(extra)
				td.fake.set(func() { j.partition = "normal" })
				r := td.cycle(t)
				if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+extra {
					t.Fatalf("%v, want scancel %s (parent 10 still running)", got, extra)
				}
				if !slices.Contains(r.Cancelled, extra) || r.LentGPUs != len(r.Submitted) {
					t.Errorf("report cancelled %v, lent %d GPUs, submitted %v; want %s cancelled, and only new extra jobs lent",
						r.Cancelled, r.LentGPUs, r.Submitted, extra)
				}
				if x, _ := td.db.Extra(context.Background(), extra); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, "moved by its owner") {
					t.Errorf("record %+v, want ended (moved by its owner)", x)
				}
				if got := value(td.Metrics().LendFailures.WithLabelValues("changed")); got != 1 {
					t.Errorf("lend_failures_total{reason=changed} %v, want 1 (the retry rule backs off)", got)
				}
			})
		}
	}
}

// TestAnExtraJobItsOwnerGaveMoreGPUsIsCancelled: a tester set a waiting
// extra job of 1 lent GPU to `Gres=gpu:t4:4` and freed a node for it: it
// ran in extra.partition with 4 GPUs while the daemon counted 1, past the
// per-user cap. It is cancelled at once, its parent running.
func TestAnExtraJobItsOwnerGaveMoreGPUsIsCancelled(t *testing.T) {
	for _, pending := range []bool{true, false} {
		t.Run(fmt.Sprintf("pending %v", pending), func(t *testing.T) {
			td, extra, _ := renamedSetup(t, "", "", pending)
			j := td.fake.job(extra)
			td.fake.set(func() { j.gpusPerNode = 4 })
			r := td.cycle(t)
			if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+extra || !slices.Contains(r.Cancelled, extra) {
				t.Fatalf("%v, cancelled %v; want scancel %s (parent 10 still running)", got, r.Cancelled, extra)
			}
			if x, _ := td.db.Extra(context.Background(), extra); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, "4 GPUs (lent 1") {
				t.Errorf("record %+v, want ended (4 GPUs, lent 1)", x)
			}
		})
	}
}

// TestAnExtraJobHoldingMoreGPUsOrAskingPerTaskIsCancelled: GPUs its
// owner asks per task or per socket (extraChanged reads tres-per-node and
// tres-per-job for the count), more GPUs than lent held by a running
// extra job whatever its request (tres-alloc: --exclusive on the 22.05 lab
// held 4 for a request of 1), a requeueable one or a longer time limit (a
// helper's attack: Requeue=1, requeuehold, TimeLimit=2-00:00:00) end the
// lend at the next cycle.
func TestAnExtraJobHoldingMoreGPUsOrAskingPerTaskIsCancelled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending bool
		change  func(j *fakeJob)
		reason  string
	}{
		{"per task, pending", true, func(j *fakeJob) { j.gpusPerNode, j.tresPerTask = 0, "gres:gpu:1" }, "GPUs per task"},
		{"per socket, pending", true, func(j *fakeJob) { j.tresPerSocket = "gres:gpu:2" }, "GPUs per socket"},
		{"holding the node's GPUs, running", false, func(j *fakeJob) { j.heldGPUs = 4 }, "holding 4 GPUs (lent 1"},
		{"made requeueable, pending", true, func(j *fakeJob) { j.requeueable = true }, "requeueable"},
		{"time limit raised, pending", true, func(j *fakeJob) { j.timeLimit = 48 * time.Hour }, `time limit "2880:00"`},
		// Requeue=1, requeuehold, Requeue=0, release: restarted 5 minutes
		// after it was lent, with its whole limit again and Requeue 0.
		{"restarted (requeued) while Requeue read 0, running", false, func(j *fakeJob) {
			j.start, j.end = j.start.Add(5*time.Minute), j.end.Add(5*time.Minute)
		}, "past the end lent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td, extra, _ := renamedSetup(t, "", "", tc.pending)
			j := td.fake.job(extra)
			td.fake.set(func() { tc.change(j) })
			r := td.cycle(t)
			if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+extra || !slices.Contains(r.Cancelled, extra) {
				t.Fatalf("%v, cancelled %v; want scancel %s (parent 10 still running)", got, r.Cancelled, extra)
			}
			if x, _ := td.db.Extra(context.Background(), extra); x.State != backfillstore.ExtraEnded || !strings.Contains(x.Reason, tc.reason) {
				t.Errorf("record %+v, want ended (%s)", x, tc.reason)
			}
		})
	}
}

// TestARenamingOwnerCannotRaceTheCancel: a tester renamed an extra job
// hundreds of times a second (one scontrol reading a pipe), so that the
// re-read before scancel never saw the name the cycle's snapshot read, and
// the job outlived its parent. The re-read checks the id and user only.
func TestARenamingOwnerCannotRaceTheCancel(t *testing.T) {
	td, extra, _ := renamedSetup(t, "", "", false)
	j, parent := td.fake.job(extra), td.fake.job("10")
	n := 0
	td.fake.set(func() {
		parent.state = "CANCELLED"
		td.fake.onJobs = func() { // between the snapshot and the re-read, every time
			n++
			j.name, j.comment, j.partition = fmt.Sprintf("r%d", n), fmt.Sprintf("r%d", n), "low"
		}
	})
	td.cycle(t)
	if got := td.fake.commands("scancel"); len(got) != 1 || got[0] != "scancel "+extra {
		t.Fatalf("%v, want scancel %s in the first cycle after its parent ended", got, extra)
	}
}
