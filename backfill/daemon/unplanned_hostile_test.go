package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Attacks on the unplanned hold by an unprivileged user (carol) whose
// pending jobs the daemon reads, written by a tester of the hold
// (2026-12-02); the three that failed then are fixed: an overflowing GRES
// count failed every cycle, renaming a pending job into the extra job form
// and back re-armed the hold, and a job queued in "normal,low" held nothing. The fake's nodes: n1, n2 v100; n3, n4 t4;
// 4 GPUs each, partitions normal and low (extra.partition).

// attackSetup: alice's elastic job 10 on n1 (the victim: it wants to grow),
// carol's own elastic job 20 on n3 (full: it never grows), and returns td.
func attackSetup(t *testing.T) *testDaemon {
	td := newTestDaemon(t, "")
	td.fake.running("10", "es-req min=1 max=4 lw=16 d2", "n1", 4, 2*time.Hour, rendezvous(t, "10"))
	c := td.fake.running("20", "es-req min=1 max=1 lw=4 d2", "n3", 4, 2*time.Hour, "")
	td.fake.set(func() { c.user = "carol" })
	return td
}

// carolPending adds carol's unplanned pending job id, 4 GPUs per node of any type.
func carolPending(td *testDaemon, id string) *fakeJob {
	p := td.fake.pending(id, "", 4, time.Time{})
	td.fake.set(func() { p.start, p.end, p.user = time.Time{}, time.Time{}, "carol" })
	return p
}

// firstLendWithin cycles td every 2 s for until, calling before(el) (when
// not nil) before each cycle, and returns how long after the start the
// first extra job was submitted (-1: none). A cycle error fails t.
func firstLendWithin(t *testing.T, td *testDaemon, until time.Duration, before func(el time.Duration)) time.Duration {
	t.Helper()
	first := time.Duration(-1)
	for el := time.Duration(0); el <= until; el += 2 * time.Second {
		if before != nil {
			before(el)
		}
		if _, err := td.Cycle(context.Background()); err != nil {
			t.Fatalf("cycle at %v: %v", el, err)
		}
		if first < 0 && len(td.fake.commands("sbatch")) > 0 {
			first = el
		}
		td.advance(2 * time.Second)
	}
	return first
}

// (c) A user who owns a running elastic job toggles two pending jobs, one
// cycle at a time and staggered, into the extra job form of her own
// elastic job (name es-extra-20, comment "es-extra parent=20", which
// `scontrol update` lets her set on her own pending jobs). In that form a
// job is another daemon's extra job (reconcileUnknown: otherLent), not
// pending, so noteWaiting forgets it; back in its own form it is seen
// anew and holds for another unplanned_hold. The doc says a pending job
// delays lends by at most unplanned_hold.
func TestAttackToggledExtraFormRearmsUnplannedHold(t *testing.T) {
	for _, toggle := range []bool{false, true} {
		name := "control: no toggling, lends after unplanned_hold"
		if toggle {
			name = "two jobs toggled into the extra job form, staggered"
		}
		t.Run(name, func(t *testing.T) {
			td := attackSetup(t)
			a, b := carolPending(td, "50"), carolPending(td, "51")
			form := func(j *fakeJob, extra bool) {
				td.fake.set(func() {
					if extra {
						j.name, j.comment = "es-extra-20", "es-extra parent=20"
					} else {
						j.name, j.comment = "wait"+j.id, ""
					}
				})
			}
			firstLend := firstLendWithin(t, td, 10*time.Minute, func(el time.Duration) {
				sec := int(el.Seconds()) % 60
				if toggle {
					form(a, sec == 40)
					form(b, sec == 10)
				}
			})
			t.Logf("first lend after %v (sbatch: %q)", firstLend, td.fake.commands("sbatch"))
			if firstLend < 0 || firstLend > 62*time.Second {
				t.Fatalf("first extra job submitted after %v (-1: never in 10 min); want within unplanned_hold (60s) of the jobs' submission", firstLend)
			}
			if n := len(td.fake.commands("scancel")); n != 0 {
				t.Fatalf("daemon cancelled something: %q", td.fake.commands("scancel"))
			}
		})
	}
}

// (c) Holding and releasing one's own job (reason JobHeldUser, then None)
// must not re-arm the hold: the job stays pending throughout.
func TestAttackHoldReleaseDoesNotRearmUnplannedHold(t *testing.T) {
	td := attackSetup(t)
	p := carolPending(td, "50")
	firstLend := firstLendWithin(t, td, 5*time.Minute, func(el time.Duration) {
		sec := int(el.Seconds()) % 30
		td.fake.set(func() {
			p.reason = "None"
			if sec == 20 {
				p.reason = "JobHeldUser"
			}
		})
	})
	if firstLend < 0 || firstLend > 62*time.Second {
		t.Fatalf("first extra job after %v (-1: never); want within 60s", firstLend)
	}
}

// (b) A GRES request whose counts overflow int when summed
// (gres:gpu:v100:9223372036854775807,gres:gpu:t4:1) makes a negative GPU
// count. The daemon must not stop planning for everyone because of one
// user's pending job.
func TestAttackOverflowingGRESCountDoesNotStopTheDaemon(t *testing.T) {
	td := attackSetup(t)
	p := carolPending(td, "50")
	td.fake.set(func() { p.gpuType, p.gpusPerNode = "v100:9223372036854775807,gres:gpu:t4", 1 })
	for i := 0; i < 3; i++ {
		if _, err := td.Cycle(context.Background()); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		td.advance(2 * time.Second)
	}
}

// (b)/(c) A --nodelist that does not parse, and odd GRES strings, hold at
// most unplanned_hold; the daemon keeps cycling.
func TestAttackUnparseableRequestsHoldAtMostUnplannedHold(t *testing.T) {
	cases := []struct {
		name string
		set  func(j *fakeJob)
	}{
		{"nodelist n[", func(j *fakeJob) { j.reqNode = "n[" }},
		{"nodelist n[1-99999999]", func(j *fakeJob) { j.reqNode = "n[1-99999999]" }},
		{"exclude n[3- (placement read: reason Resources)", func(j *fakeJob) { j.excNodes, j.reason = "n[3-", "Resources" }},
		{"GRES type with bad characters", func(j *fakeJob) { j.gpuType = "v1$0" }},
		{"GRES with too many colons", func(j *fakeJob) { j.gpuType = "a:b:c" }},
		{"partition list normal,,low,", func(j *fakeJob) { j.partition = "normal,,x," }},
		{"name and comment with separators and newlines", func(j *fakeJob) {
			j.name, j.comment = "x\nESF|es-extra-10", "es-extra parent=10\n50|n[1-4]|(null)"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			td := attackSetup(t)
			p := carolPending(td, "50")
			td.fake.set(func() { tc.set(p) })
			firstLend := firstLendWithin(t, td, 3*time.Minute, nil)
			t.Logf("first lend after %v", firstLend)
			if firstLend < 0 || firstLend > 62*time.Second {
				t.Fatalf("first extra job after %v (-1: never); want within 60s", firstLend)
			}
			if n := len(td.fake.commands("scancel")); n != 0 {
				t.Fatalf("cancelled: %q", td.fake.commands("scancel"))
			}
		})
	}
}

// (a) carol's pending job dressed as an extra job of alice's job 10 (name
// es-extra-10, comment "es-extra parent=10"): the daemon must not cancel
// it, nor count it as alice's, nor cancel alice's job; it is planned as an
// ordinary pending job (and holds like one, for at most unplanned_hold).
func TestAttackLookalikeOfAnotherUsersExtraJob(t *testing.T) {
	td := attackSetup(t)
	p := carolPending(td, "50")
	td.fake.set(func() { p.name, p.comment = "es-extra-10", "es-extra parent=10" })
	firstLend := firstLendWithin(t, td, 3*time.Minute, nil)
	for _, c := range td.fake.calls {
		if strings.Contains(c, "50") && !strings.HasPrefix(c, "sbatch") {
			t.Errorf("daemon acted on carol's job 50: %q", c)
		}
		if strings.HasPrefix(c, "scancel") || (strings.HasPrefix(c, "scontrol") && strings.Contains(c, "JobId=10")) {
			t.Errorf("daemon acted: %q", c)
		}
	}
	t.Logf("first lend after %v; calls %q", firstLend, td.fake.calls)
	if firstLend < 0 || firstLend > 62*time.Second {
		t.Fatalf("first extra job after %v (-1: never); want within 60s", firstLend)
	}
}

// A job queued in "normal,low" (low is extra.partition) may start in
// normal: it holds the nodes it may use there.
func TestAttackJobInNormalAndExtraPartitionHoldsItsNodes(t *testing.T) {
	td := attackSetup(t)
	p := carolPending(td, "50")
	td.fake.set(func() { p.partition, p.gpuType = "normal,low", "v100" })
	td.cycle(t)
	var got []string
	for _, c := range td.fake.commands("sbatch") {
		got = append(got, argValue(c, "nodelist"))
	}
	for _, n := range got {
		if n == "n2" {
			t.Fatalf("extra job submitted onto n2 (v100) at once, though job 50 (partitions normal,low, 4 v100 per node) may start there in normal: %q", got)
		}
	}
}

// The same overflowing request on a job Slurm has planned (start and
// SchedNodes set) does not stop the daemon either (pendingJob).
func TestAttackOverflowingGRESCountOnAPlannedJob(t *testing.T) {
	td := attackSetup(t)
	p := td.fake.pending("50", "n2", 1, td.now.Add(30*time.Minute))
	td.fake.set(func() { p.user, p.reason, p.gpuType = "carol", "Resources", "v100:9223372036854775807,gres:gpu:t4" })
	if _, err := td.Cycle(context.Background()); err != nil {
		t.Fatalf("cycle: %v", err)
	}
}
