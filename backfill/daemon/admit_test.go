package daemon

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// reservationJobAhead adds to admitCluster job 21 (carol), pending with
// reason for a whole v100 node in advance reservation R2 of n3 (flags,
// active; a t4 node, where it never fits), at the lowest priority: Slurm
// ranks it ahead of job 20, and a v100 node freed for job 20 would hold it
// were it not bound to R2's nodes.
func reservationJobAhead(td *testDaemon, flags, reason string) {
	r := td.fake.pending("21", "n3", 4, td.now.Add(2*time.Hour))
	td.fake.set(func() {
		r.user, r.reason, r.reservation, r.priority, r.timeLimit, r.gpuType = "carol", reason, "R2", 1, 30*time.Minute, "v100"
		td.fake.reservations = []string{fakeReservation("R2", "n3", td.now, td.now.Add(-time.Minute), 3*time.Hour, cmp.Or(flags, "SPEC_NODES"))}
	})
}

// admitCluster is the fake cluster of the shrink-to-admit tests: elastic
// job 10 (alice, "normal") on n1 and n2 with 4 v100 each, 60 min limit,
// coordinator up; job 20 (bob) queued for one whole v100 node for 30 min,
// waiting for resources, with Slurm's reservation on n1 at job 10's end.
// The t4 nodes n3 and n4 are idle but of the wrong type.
func admitCluster(t *testing.T, toml, comment string) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, toml)
	td.fake.running("10", comment, "n1,n2", 4, time.Hour, rendezvous(t, "10"))
	q := td.fake.pending("20", "n1", 4, td.now.Add(time.Hour))
	td.fake.set(func() { q.gpuType, q.reason, q.timeLimit = "v100", "Resources", 30*time.Minute })
	return td
}

// lw8Comment is elasticComment with 8 logical workers: on 4 GPUs instead
// of 8 such a job runs at about half its speed (with 4 it would lose
// nothing).
const lw8Comment = "es-req min=1 max=3 lw=8 d1"

// anotherV100JobWaits queues job 30 (carol) behind admitCluster's job 20:
// one whole v100 node for 30 min, waiting for resources, with no planned
// nodes (Slurm plans the queue head only).
func anotherV100JobWaits(td *testDaemon) {
	j := td.fake.pending("30", "", 4, td.now.Add(2*time.Hour))
	td.fake.set(func() {
		j.user, j.gpuType, j.reason, j.timeLimit, j.nodes = "carol", "v100", "Resources", 30*time.Minute, 1
	})
}

// twoNodesWithN3PlannedBy makes admitCluster's job 20 ask two whole nodes
// of any type (30 min) and carol's rigid job 40 hold n4 for 2 h, and
// queues job 15 (two whole nodes of gpuType, "" any; ahead of job 20 when
// ahead, else behind it) planned on the idle n3 at now + at: job 20 fits
// only on n3 and a node job 10 gives up.
func twoNodesWithN3PlannedBy(td *testDaemon, ahead bool, gpuType string, at time.Duration) {
	q := td.fake.job("20")
	other := td.fake.running("40", "", "n4", 4, 2*time.Hour, "")
	p := td.fake.pending("15", "n3", 4, td.now.Add(at))
	td.fake.set(func() {
		q.gpuType, q.nodes = "", 2
		other.user = "carol"
		p.user, p.reason, p.nodes, p.priority, p.gpuType = "carol", "Priority", 2, fakePriority("20")-1, gpuType
		if ahead {
			p.priority = fakePriority("20") + 1
		}
	})
}

// reserveN2 adds a maintenance reservation of n2 (job 10's last node)
// from now + at for an hour.
func reserveN2(td *testDaemon, at time.Duration) {
	td.fake.set(func() {
		td.fake.reservations = []string{fakeReservation("maint", "n2", td.now, td.now.Add(at), time.Hour, "MAINT,SPEC_NODES")}
	})
}

// lendOneV100OnN2 makes admitCluster's job 10 hold 3 GPUs on each node
// and an extra job of it (50, recorded) 1 more on n2, with the queued
// job's reservation 2 h away: only with the extra job's GPU does n2 hold
// the queued job's 4.
func lendOneV100OnN2(t *testing.T, td *testDaemon) {
	t.Helper()
	td.fake.set(func() {
		td.fake.jobs[0].gpusPerNode = 3
		td.fake.jobs[1].start = td.now.Add(2 * time.Hour)
	})
	td.fake.extra("50", "10", "n2", 1, 30*time.Minute)
	if err := td.db.RecordExtra(context.Background(), backfillstore.ExtraJob{ID: "50", Parent: "10", User: "alice",
		Partition: "low", Node: "n2", GPUType: "v100", GPUs: 1, Submitted: td.now, End: td.now.Add(30 * time.Minute),
		Name: "es-extra-10", Comment: "es-extra parent=10"}); err != nil {
		t.Fatal(err)
	}
}

func TestShrinkToAdmit(t *testing.T) {
	const on = "[admit]\nenabled = true\n"
	tests := []struct {
		name, toml, comment string
		// setup changes the cluster before the cycle.
		setup func(t *testing.T, td *testDaemon)
		// want lists the scontrol updates, in order; nil: none.
		want []string
	}{
		{name: "a queued job that does not fit gets a whole node of a shrunk elastic job, whose limit covers its work on fewer nodes",
			toml: on, comment: elasticComment,
			// 60 min left on 2 nodes is 120 min on 1, plus max(60 s safety
			// margin, 10 % time_limit_margin) = 12 min.
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "the remaining work comes from the job's progress report when it has one",
			toml: on, comment: "es step=150/400 workers=8/8 d1 req=1-3",
			setup: func(t *testing.T, td *testDaemon) {
				// Started 20 min ago (40 min left of its limit), 150 of 400 steps
				// done: 20·250/150 = 33.3 min left on 2 nodes, 66.7 on 1;
				// 20 + 66.7 + 6.7 (10 %) → 94 min from its start (108 by its
				// limit alone).
				td.fake.set(func() {
					j := td.fake.jobs[0]
					j.start, j.end = td.now.Add(-20*time.Minute), td.now.Add(40*time.Minute)
				})
			},
			want: []string{"scontrol update JobId=10 TimeLimit=94", "scontrol update JobId=10 NumNodes=1"}},
		{name: "a donor whose raised limit (132 min) would pass its partition's MaxTime (2 h) does not shrink",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.maxTime = map[string]string{"normal": "2:00:00"} })
			}},
		{name: "a donor within its partition's MaxTime (1-00:00:00) shrinks",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.maxTime = map[string]string{"normal": "1-00:00:00"} })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "GPUs of this daemon's extra jobs count as free for the queued job (Slurm preempts them)",
			// 7 logical workers: with 6 GPUs of its own, the job may hold the
			// extra job's (at 4, past its maximum, the extra job is ended).
			toml: on, comment: "es-req min=1 max=3 lw=7 d1",
			setup: func(t *testing.T, td *testDaemon) {
				// Job 10 holds 3 GPUs on each node and an extra job 1 more on n2:
				// only with the extra job's GPU does n2 hold the queued job's 4.
				// (With its logical workers on 3 GPUs, half of them runs it at
				// about half speed: it ends at 113 min, so the queued job's
				// reservation is 2 h away, when it would end after that.)
				lendOneV100OnN2(t, td)
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "an extra job's GPUs do not count as free on a node where another user's job also runs in extra.partition (Slurm may preempt that one instead; a tester saw it)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				lendOneV100OnN2(t, td)
				other := td.fake.running("60", "", "n2", 0, time.Hour, t.TempDir()) // carol's CPU-only job, preemptible too
				td.fake.set(func() { other.user, other.partition = "carol", "low" })
			}},
		{name: "a donor whose id squeue also lists a job array's other task under is never shrunk (one update would change every task)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				task := td.fake.running("11", "", "n3", 1, time.Hour, t.TempDir()) // the array's other task, not elastic
				td.fake.set(func() { task.arrayOf = "10" })
			}},
		// helper 106's: a running task of an array, or a heterogeneous job's
		// component, by its own id (squeue's %i prints it otherwise)
		{name: "a donor that is a job array's task is never shrunk",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				d := td.fake.job("10")
				td.fake.set(func() { d.printedID = "9_1" })
			}},
		{name: "nor one that is a heterogeneous job's component (its limit would part from the others')",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				d := td.fake.job("10")
				td.fake.set(func() { d.printedID = "9+1" })
			}},
		{name: "nor any donor when the running jobs' placements cannot be read",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.runningPlacementsFail = "slurm_load_jobs error" })
			}},
		{name: "on Slurm 24.11, which refuses NumNodes alone, the shrink keeps the running job's task count",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.keepTasks = true }) },
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1",
				"scontrol update JobId=10 NumNodes=1 NumTasks=2"}},
		{name: "on Slurm 24.11, a job on a v100 and a t4 node is not shrunk (slurmctld crashed after such a shrink)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { mixedDonor(t, td, "24.11.5") }},
		{name: "on Slurm 22.05 the same job is shrunk to its v100 node for a queued t4 job",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { mixedDonor(t, td, "wlm 22.05.8") },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "on Slurm 24.11, a job on two v100 nodes is still shrunk",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.restart(t, "24.11.5") },
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1",
				"scontrol update JobId=10 NumNodes=1 NumTasks=2"}},
		{name: "admit is on by default", toml: "", comment: elasticComment,
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nothing is shrunk with admit switched off", toml: "[admit]\nenabled = false\n", comment: elasticComment},
		{name: "a running job in a partition where admit is off is not shrunk for a queued job of another",
			toml: on + "off_partitions = [\"normal\"]\n", comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].partition = "gpu" }) }},
		{name: "a queued job in a partition where admit is off shrinks nobody",
			toml: on + "off_partitions = [\"gpu-long\"]\n", comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].partition = "gpu-long" }) }},
		{name: "the cap: a job may lose at most max_loss of its nodes (0.4 of 2 rounds down to none)",
			toml: on + "max_loss = 0.4\n", comment: elasticComment},
		{name: "the cap counts what earlier shrinks took: a job shrunk from 4 to 2 nodes has lost its half",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				if _, err := td.db.RecordAdmitShrink(context.Background(), backfillstore.AdmitShrink{Job: "10", Queued: "5",
					User: "alice", OrigNodes: 4, FromNodes: 4, ToNodes: 2, State: backfillstore.AdmitDone}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "never below the request's minimum", toml: on, comment: "es-req min=2 max=3 lw=4 d1"},
		{name: "a queued job that excludes the node a shrink would free makes no job shrink (another user's job lost a node for nothing)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].excNodes = "n2" }) }},
		{name: "a queued job asking node features makes no job shrink (the daemon cannot check them)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].features = "ib" }) }},
		{name: "a queued job whose partition has none of the nodes makes no job shrink",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].partition = "debug" }) }},
		{name: "a queued job in the preemptible extra partition shrinks nobody",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].partition = "low" }) }},
		{name: "a queued job submitted to several partitions may use the nodes of any",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[1].partition, td.fake.tier = "debug,normal", map[string]string{"debug": "10"} })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "but not when their PriorityTiers differ (Slurm ranks it apart in each, on that partition's nodes: a tester saw a job of a tier-30 partition of other nodes admitted, and a tier-10 job start instead)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[1].partition, td.fake.tier = "urgent,normal", map[string]string{"urgent": "30"} })
			}},
		{name: "an empty name in its partition list (sbatch -p 'normal,') is no partition (a tester's)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.set(func() { td.fake.jobs[1].partition = ",normal" }) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "under the objective a job near its end gives a node when that costs it nothing (4 logical workers on 4 GPUs)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[0].end = td.now.Add(20 * time.Minute) })
			},
			// 20 min left is 40 at half size plus 4: its 60 min limit holds.
			want: []string{"scontrol update JobId=10 NumNodes=1"}},
		{name: "under the objective no job gives up nodes when it would lose more than the queued job waits",
			toml: on, comment: "es-req min=1 max=3 lw=8 d1",
			setup: func(t *testing.T, td *testDaemon) {
				// 8 logical workers on half the GPUs: 30 min of the queued job
				// cost job 10 about 14 min, and the queued job waits 5.
				td.fake.set(func() { td.fake.jobs[1].start = td.now.Add(5 * time.Minute) })
			}},
		{name: "under the objective with admit.horizon kept the job that ends last is not made to end later still",
			toml: on + "horizon = \"kept\"\n", comment: "es-req min=1 max=3 lw=8 d1",
			setup: func(t *testing.T, td *testDaemon) {
				// On 1 node job 10 would end 53 min later, after the queued job's
				// end by waiting (90 min) and no other job runs longer.
			}},
		{name: "by default (admit.horizon returned) it lends a node: with it back after the queued job's 30 min it ends within that horizon",
			toml: on, comment: "es-req min=1 max=3 lw=8 d1",
			// 15 min later: its limit covers 60 min on 1 node plus 10 %
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "the longest-left rule: a job whose time left is less than the queued job's work is not shrunk",
			toml: on + "rule = \"longest-left\"\n", comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[0].end = td.now.Add(20 * time.Minute) })
			}},
		{name: "a donor on a node the reservation of a job ahead of the queued one needs is not shrunk (its limit would move the reservation)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				c := td.fake.pending("30", "n2", 4, td.now.Add(30*time.Minute))
				td.fake.set(func() { c.priority = fakePriority("20") + 1 })
			}},
		{name: "but it is when its raised limit (132 min) still ends by that job's planned start (3 h)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				c := td.fake.pending("30", "n2", 4, td.now.Add(3*time.Hour))
				td.fake.set(func() { c.priority = fakePriority("20") + 1 })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "not when it would end after it (2 h)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				c := td.fake.pending("30", "n2", 4, td.now.Add(2*time.Hour))
				td.fake.set(func() { c.priority = fakePriority("20") + 1 })
			}},
		{name: "nor on a node only a job behind the queued one reserves (the donor's raised limit would delay it: a tester saw it)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { td.fake.pending("30", "n2", 4, td.now.Add(30*time.Minute)) }},
		{name: "a donor on a node reserved for a job whose GPUs squeue does not show (--gpus-per-task, or none) is not shrunk (the whole node counts as reserved)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				c := td.fake.pending("30", "n1", 0, td.now.Add(time.Hour))
				td.fake.set(func() { c.user, c.reason, c.priority = "carol", "Priority", fakePriority("20")+1 })
			}},
		{name: "a job waiting with Reason Priority is admitted (Slurm's backfill starts it once the GPUs are free)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.reason = "Priority" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "behind a head no shrink can admit, the next job is admitted, kept off the head's reservation",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				// Job 15 (ahead of 20) asks for 8 t4 GPUs on one node, which no
				// node holds: no shrink admits it; its planned start names n3.
				h := td.fake.pending("15", "n3", 8, td.now.Add(40*time.Minute))
				q := td.fake.job("20")
				td.fake.set(func() { h.gpuType, h.reason, q.reason = "t4", "Resources", "Priority" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "a job that ends before a job ahead of it plans to start on an idle node is admitted onto that node and a shrunk donor's",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, true, "t4", 45*time.Minute) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "not when that job, ranked ahead, would fit on n3 and the node released (a tester saw Slurm start it there instead, and the job admitted for wait 13 min past its planned start)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute) }},
		{name: "nor when that job ranked ahead waits with another Reason (a tester saw one whose Reason named a higher-priority partition start on the freed node)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() {
					p.reason = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
				})
			}},
		{name: "nor a job ranked ahead by priority in a partition of a lower PriorityTier (low, extra.partition, tier 1: Slurm considers it after every job of normal's tier 10; a tester saw it start the admitted one)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.partition = "low" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "but it is when that partition's tier is as high (the tier read decides, not the partition's name)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.partition, td.fake.tier = "low", map[string]string{"low": "10"} })
			}},
		{name: "a job ranked behind by priority takes no freed node",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nor a job array's pending tasks ranked behind (their priority is read under the array's own id, %A; with %i's 15_[0-3] it was not, and they ranked first)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.printedID = "15_[0-3]" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "a job array's pending tasks are never admitted themselves (one update of the array's id would change every task)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.printedID = "20_[0-3]" })
			}},
		{name: "but a job array ranked ahead that would take the freed node holds the admission back",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.printedID = "15_[0-3]" })
			}},
		{name: "nor one whose partition list ends in a comma (a tester's: -p 'normal,' was read as an unread tier, ranked above all)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.partition = "normal," })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nor a job ranked ahead whose only partition is DOWN (a tester saw Reason PartitionDown keep every admission back)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.reason = "PartitionDown" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nor a job ranked ahead held by a QOS limit no shrink lifts (its user's running job count)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.reason = "QOSMaxJobsPerUserLimit" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "but one held by a limit on the GPUs its user holds is ranked ahead (a donor's shrink may lift it)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.reason = "QOSMaxGRESPerUser" })
			}},
		{name: "nor when its one partition is named twice (-p dn,dn: a tester's)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.reason, p.partition = "PartitionDown", "normal,normal" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "but one queued in several partitions is (its Reason names one of them only)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() {
					p.reason, p.partition, td.fake.tier = "PartitionDown", "normal,other", map[string]string{"other": "10"}
				})
			}},
		{name: "but one also in a partition of a higher PriorityTier over these nodes is ranked ahead, whatever its priority (sort_job_queue2)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() {
					p.partition, td.fake.tier = "normal,urgent", map[string]string{"urgent": "20"}
					for _, n := range td.fake.nodes {
						n.partitions = append(n.partitions, "urgent")
					}
				})
			}},
		{name: "not when that partition holds none of these nodes: Slurm ranks its record there high on its own nodes only (a reviewer's: one cheap job in normal,urgent held back every admission in normal)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.partition, td.fake.tier = "normal,urgent", map[string]string{"urgent": "20"} })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "or in a partition whose tier sinfo did not list (counted as ranked ahead)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, false, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.partition = "normal,unlisted" })
			}},
		{name: "a queued job in a partition whose tier sinfo did not list is not admitted (which jobs Slurm ranks ahead of it is unknown)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[1].partition = "unlisted,normal" })
			}},
		{name: "but a held job ranked ahead takes no freed node",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "", 45*time.Minute)
				p := td.fake.job("15")
				td.fake.set(func() { p.reason = "JobHeldUser" })
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "not when it would still run at that start (Slurm's backfill would not start it there)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, true, "t4", 20*time.Minute) }},
		{name: "nor when only a job behind it plans on that node (Slurm planned that job there with this one waiting: a tester saw such a job start 10 min late)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, false, "t4", 20*time.Minute) }},
		{name: "it must end by that start even if Slurm starts it a backfill pass later (bf_interval 1 s, plus 5 s: 30 min 3 s is too soon)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "t4", 30*time.Minute+3*time.Second)
			}},
		{name: "31 min is not",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { twoNodesWithN3PlannedBy(td, true, "t4", 31*time.Minute) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "but it is with bf_interval=60",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				twoNodesWithN3PlannedBy(td, true, "t4", 31*time.Minute)
				td.fake.set(func() { td.fake.schedulerParameters = "bf_max_job_test=500,bf_interval=60" })
			}},
		{name: "a job that must run in an advance reservation (--reservation) is not admitted (a tester saw it stay pending after the shrink)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.reservation = "R1" })
			}},
		// Slurm ranks a job in an advance reservation ahead of job 20
		// whatever its priority; it may take only its reservation's nodes
		// (a tester saw one, refused and so read as able to run anywhere,
		// keep back an admission Slurm carried out)
		{name: "a job in an advance reservation of n3, ranked ahead, takes no node freed on n2: job 20 is admitted",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reservationJobAhead(td, "", "Resources") },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "one in a FLEX reservation of n3 may take n2 too: nothing is admitted",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reservationJobAhead(td, "FLEX", "Resources") }},
		{name: "one waiting for its FLEX reservation to start (Reason Reservation) starts nowhere now: job 20 is admitted",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reservationJobAhead(td, "FLEX", "Reservation") },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nor one asking for contiguous nodes (--contiguous)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.contiguous = true })
			}},
		{name: "a maintenance reservation of n2 in 20 min keeps the donor from releasing it (its raised limit, 132 min, and the queued job's 30 would run into it; testers saw such an admission stay pending)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reserveN2(td, 20*time.Minute) }},
		{name: "one in 3 h does not: both end before it",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reserveN2(td, 3*time.Hour) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "an active reservation of n2 keeps it too",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) { reserveN2(td, -time.Minute) }},
		{name: "a reservation that has ended does not",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() {
					td.fake.reservations = []string{fakeReservation("old", "n2", td.now, td.now.Add(-2*time.Hour), time.Hour, "MAINT")}
				})
			},
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "nothing is admitted while the reservations cannot be read",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.reservationsFail = "slurm_load_reservations error: Socket timed out" })
			}},
		{name: "held jobs are not admitted (Reason JobHeldUser)",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				q := td.fake.job("20")
				td.fake.set(func() { q.reason = "JobHeldUser" })
			}},
		// admit.horizon = "contested" (planner.Pools.Kept): with another
		// v100 job pending besides job 20, job 10 (8 logical workers, on
		// its 8 GPUs), the longest there, is counted as never getting its
		// node back: 60 min more on 1 node ends it after job 20's own end
		// by waiting (90 min); returned after job 20's 30 min, it loses
		// about 15
		{name: "contested: the longest job is not shrunk while another pending job waits for its GPU type",
			toml: on + "horizon = \"contested\"\n", comment: lw8Comment,
			setup: func(t *testing.T, td *testDaemon) { anotherV100JobWaits(td) }},
		{name: "returned (the default), it is",
			toml: on, comment: lw8Comment,
			setup: func(t *testing.T, td *testDaemon) { anotherV100JobWaits(td) },
			want:  []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "contested by the queued job alone, it is",
			toml: on + "horizon = \"contested\"\n", comment: lw8Comment,
			want: []string{"scontrol update JobId=10 TimeLimit=132", "scontrol update JobId=10 NumNodes=1"}},
		{name: "a user's non-elastic job with an es-req name is never shrunk",
			toml: on, comment: "training run",
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.set(func() { td.fake.jobs[0].name = "es-req min=1 max=3 lw=4 d1" })
			}},
		{name: "a job whose request cannot be read is never shrunk",
			toml: on, comment: "es-req min=1 max=x d1"},
		{name: "a job whose comment stops being elastic before the re-read by id is not shrunk",
			toml: on, comment: elasticComment,
			setup: func(t *testing.T, td *testDaemon) {
				td.fake.onJobs = func() { td.fake.jobs[0].comment = "es-req d1" }
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := admitCluster(t, tt.toml, tt.comment)
			if tt.setup != nil {
				tt.setup(t, td)
			}
			before := td.fake.job("10").nodeList
			r := td.cycle(t)
			got := td.fake.commands("scontrol update")
			if !slices.Equal(got, tt.want) {
				t.Fatalf("scontrol updates %q, want %q", got, tt.want)
			}
			recs, err := td.db.AdmitShrinks(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var done []backfillstore.AdmitShrink
			for _, rec := range recs {
				if rec.Queued == "20" && rec.State == backfillstore.AdmitDone {
					done = append(done, rec)
				}
			}
			if tt.want == nil {
				if len(done) != 0 || len(r.Admitted) != 0 {
					t.Fatalf("recorded %+v, admitted %v; want no shrink", done, r.Admitted)
				}
				if j := td.fake.job("10"); j.nodeList != before {
					t.Fatalf("job 10 now on %s, want %s untouched", j.nodeList, before)
				}
				return
			}
			if len(done) != 1 || done[0].Job != "10" || done[0].FromNodes != 2 || done[0].ToNodes != 1 || done[0].OrigNodes != 2 {
				t.Fatalf("store records %+v, want job 10 shrunk 2 -> 1 for job 20, done", recs)
			}
			if !slices.Equal(r.Admitted, []string{"20"}) || !slices.Equal(r.AdmitShrunk, []string{"10"}) {
				t.Errorf("report admitted %v by shrinking %v, want 20 by 10", r.Admitted, r.AdmitShrunk)
			}
			ds, _ := td.db.Decisions(context.Background(), 0, 0)
			if len(ds) != 1 || ds[0].Kind != "admit-shrink" || ds[0].Job != "10" || !strings.Contains(ds[0].Detail, "for job 20") {
				t.Errorf("decisions %+v, want one admit-shrink of job 10 for job 20", ds)
			}
			// Idempotent: the next cycle finds job 10 at its minimum and does nothing.
			td.advance(2 * time.Second)
			td.cycle(t)
			if again := td.fake.commands("scontrol update"); len(again) != len(tt.want) {
				t.Errorf("a second cycle ran %q", again[len(tt.want):])
			}
		})
	}
}

func TestAShrinkToAdmitInterruptedByARestartIsFinishedOrUndone(t *testing.T) {
	tests := []struct {
		name string
		// nodes is job 10's node list at restart; limit its time limit.
		nodes     string
		limit     time.Duration
		want      []string
		wantState backfillstore.AdmitState
	}{
		{"shrunk before the daemon died: the raised limit is set and the record done",
			"n1", time.Hour, []string{"scontrol update JobId=10 TimeLimit=121"}, backfillstore.AdmitDone},
		{"limit raised but not shrunk: the old limit is put back and the record abandoned",
			"n1,n2", 121 * time.Minute, []string{"scontrol update JobId=10 TimeLimit=60"}, backfillstore.AdmitAbandoned},
		{"killed before any update: nothing to undo, the record abandoned",
			"n1,n2", time.Hour, nil, backfillstore.AdmitAbandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := admitCluster(t, "[admit]\nenabled = true\n", elasticComment)
			td.fake.set(func() {
				j := td.fake.jobs[0]
				names, _ := slurmcli.ExpandHostlist(tt.nodes)
				j.nodeList, j.nodes, j.timeLimit, j.end = tt.nodes, len(names), tt.limit, j.start.Add(tt.limit)
				td.fake.jobs[1].reason = "Dependency" // nothing else to admit this cycle
			})
			ctx := context.Background()
			if _, err := td.db.RecordAdmitShrink(ctx, backfillstore.AdmitShrink{Job: "10", Queued: "20", User: "alice",
				Partition: "normal", OrigNodes: 2, FromNodes: 2, ToNodes: 1, OldLimit: time.Hour, NewLimit: 121 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			td.cycle(t)
			if got := td.fake.commands("scontrol update"); !slices.Equal(got, tt.want) {
				t.Fatalf("scontrol updates %q, want %q", got, tt.want)
			}
			recs, _ := td.db.AdmitShrinks(ctx)
			if len(recs) != 1 || recs[0].State != tt.wantState {
				t.Fatalf("records %+v, want one in state %s", recs, tt.wantState)
			}
			td.cycle(t) // and a second cycle has nothing left to finish
			if got := td.fake.commands("scontrol update"); len(got) != len(tt.want) {
				t.Errorf("second cycle ran %q", got)
			}
		})
	}
}

// restart makes the fake a Slurm of version (as `scontrol --version`
// prints it after "slurm "; keepTasks from 23.02 on, which refuses
// NumNodes alone) and starts the daemon anew over the same database, as
// one started on that Slurm (New reads the version).
func (td *testDaemon) restart(t *testing.T, version string) {
	t.Helper()
	td.fake.set(func() { td.fake.version, td.fake.keepTasks = version, !strings.Contains(version, "22.05") })
	d, err := New(Options{Config: td.Daemon.cfg, DB: td.db, Slurm: td.fake.runner(), Now: func() time.Time { return td.now }, UserID: td.fake.userID,
		Logger: hclog.NewNullLogger(), Actuator: &SlurmActuator{Slurm: td.fake.runner()}})
	if err != nil {
		t.Fatal(err)
	}
	td.Daemon = d
}

// mixedDonor moves admitCluster's job 10 to v100 node n1 and t4 node n3
// and makes queued job 20 want a whole t4 node, reserved on n3, on a
// daemon started on Slurm version.
func mixedDonor(t *testing.T, td *testDaemon, version string) {
	t.Helper()
	td.restart(t, version)
	td.fake.set(func() {
		td.fake.jobs[0].nodeList = "n1,n3"
		q := td.fake.jobs[1]
		q.gpuType, q.schedNodes = "t4", "n3"
	})
}

// Why a queued job is not admitted is logged once while it stays, and again
// once it went away and came back (a tester saw one line every cycle).
func TestANotAdmittingReasonIsLoggedOnceWhileItStays(t *testing.T) {
	var logs strings.Builder
	d := &Daemon{log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})}
	for _, cycle := range [][]string{{"a"}, {"a"}, {"a", "b"}, {"b"}, {"a", "b"}} {
		d.noteAdmitWhy(cycle)
	}
	if got, want := strings.Count(logs.String(), "not admitting"), 3; got != want {
		t.Errorf("%d lines logged, want %d (a, b, and a again after a cycle without it):\n%s", got, want, logs.String())
	}
	if got := strings.Count(logs.String(), "why=a"); got != 2 {
		t.Errorf("reason a logged %d times, want 2:\n%s", got, logs.String())
	}
}

// readQueued reads a pending job's GPU type from TRES per node or per job
// (--gres=gpu:TYPE:N or --gpus=TYPE:N), marks a per-job request (which Slurm
// may spread unevenly), and refuses GPUs of several types.
func TestReadQueuedReadsTheGPUTypeOfEitherField(t *testing.T) {
	for _, tc := range []struct {
		name    string
		j       slurmcli.Job
		ok      bool
		perNode int
		gpuType string
		perJob  bool
	}{
		{"--gres=gpu:v100:4 on 2 nodes", slurmcli.Job{Nodes: 2, TRESPerNode: "gres:gpu:v100:4", TimeLimit: "10:00"}, true, 4, "v100", false},
		{"--gpus=v100:8 on 2 nodes", slurmcli.Job{Nodes: 2, TRESPerJob: "gres:gpu:v100:8", TimeLimit: "10:00"}, true, 4, "v100", true},
		{"--gpus=8 on 2 nodes", slurmcli.Job{Nodes: 2, TRESPerJob: "gres:gpu:8", TimeLimit: "10:00"}, true, 4, "", true},
		{"--gpus of two types", slurmcli.Job{Nodes: 2, TRESPerJob: "gres:gpu:v100:4,gres:gpu:t4:4", TimeLimit: "10:00"}, false, 0, "", false},
		{"--gpus not a multiple of the nodes", slurmcli.Job{Nodes: 2, TRESPerJob: "gres:gpu:v100:3", TimeLimit: "10:00"}, false, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := readQueued(tc.j)
			if ok != tc.ok || q.perNode != tc.perNode || q.gpuType != tc.gpuType || q.perJob != tc.perJob {
				t.Errorf("readQueued = %+v, %v; want %d GPUs per node of type %q, %v", q, ok, tc.perNode, tc.gpuType, tc.ok)
			}
		})
	}
}

// TestADonorsShrinkRecordsOutliveMaxAgeWhileItWaitsRequeued: what a donor
// lost to shrink-to-admit counts against admit.max_loss for as long as
// Slurm lists it. Its records, older than retention.max_age, stay while it
// waits requeued (pruned before: only running jobs' records were kept, so
// a donor requeued for longer than max_age came back with its current
// node count as its base) and go once Slurm no longer lists it.
func TestADonorsShrinkRecordsOutliveMaxAgeWhileItWaitsRequeued(t *testing.T) {
	ctx := context.Background()
	td := newTestDaemon(t, "[admit]\nenabled = true\n[retention]\nmax_age = \"1h\"\n")
	donor := td.fake.running("10", elasticComment, "n1,n2", 4, time.Hour, rendezvous(t, "10"))
	if _, err := td.db.RecordAdmitShrink(ctx, backfillstore.AdmitShrink{Job: "10", Queued: "20", User: "alice", Partition: "normal",
		OrigNodes: 4, FromNodes: 4, ToNodes: 2, State: backfillstore.AdmitDone, Time: td.now.Add(-48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	td.fake.set(func() { donor.state, donor.nodeList, donor.reason = "PENDING", "", "BeginTime" }) // requeued
	td.cycle(t)
	if recs, err := td.db.AdmitShrinks(ctx); err != nil || len(recs) != 1 || recs[0].OrigNodes != 4 {
		t.Fatalf("after a cycle with the donor requeued: records %+v (%v), want its one record (orig 4 nodes) kept", recs, err)
	}
	td.fake.set(func() { td.fake.jobs = slices.DeleteFunc(td.fake.jobs, func(j *fakeJob) bool { return j.id == "10" }) })
	td.advance(time.Minute)
	td.cycle(t)
	if recs, err := td.db.AdmitShrinks(ctx); err != nil || len(recs) != 0 {
		t.Errorf("after the donor left Slurm's list: records %+v (%v), want none (older than max_age)", recs, err)
	}
}

// A shrink-to-admit interrupted by a restart whose job squeue then lists
// under a bare uid (its owner's name does not resolve) is left as an
// intent, not abandoned as a reused id's, and finished once the name is
// printed again.
func TestAnInterruptedShrinkToAdmitWaitsOutAnUnresolvedOwner(t *testing.T) {
	td := admitCluster(t, "[admit]\nenabled = true\n", elasticComment)
	j := td.fake.jobs[0]
	td.fake.set(func() {
		j.nodeList, j.nodes, j.user, j.uid = "n1", 1, "1000", fakeUID("alice") // shrunk before the daemon died
		td.fake.jobs[1].reason = "Priority"
	})
	td.fake.unresolve("alice")
	ctx := context.Background()
	if _, err := td.db.RecordAdmitShrink(ctx, backfillstore.AdmitShrink{Job: "10", Queued: "20", User: "alice",
		Partition: "normal", OrigNodes: 2, FromNodes: 2, ToNodes: 1, OldLimit: time.Hour, NewLimit: 121 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	td.cycle(t)
	if recs, _ := td.db.AdmitShrinks(ctx); len(recs) != 1 || recs[0].State != backfillstore.AdmitIntent {
		t.Fatalf("records %+v while squeue printed a uid, want the one left as an intent", recs)
	}
	if got := td.fake.commands("scontrol update"); len(got) != 0 {
		t.Fatalf("scontrol updates %q while squeue printed a uid, want none", got)
	}
	td.fake.set(func() { j.user = "alice" })
	td.fake.resolve()
	td.cycle(t)
	if got := td.fake.commands("scontrol update"); !slices.Equal(got, []string{"scontrol update JobId=10 TimeLimit=121"}) {
		t.Errorf("scontrol updates %q once the name is back, want the raised limit set", got)
	}
	if recs, _ := td.db.AdmitShrinks(ctx); len(recs) != 1 || recs[0].State != backfillstore.AdmitDone {
		t.Errorf("records %+v, want the one done", recs)
	}
}

// A shrink-to-admit record holds its job's owner's uid (schema version 10):
// interrupted by a restart, it is finished at once while squeue lists the
// job under a stand-in name with that uid, and abandoned when another uid
// owns a job of that id (a reused id printed as the stand-in nobody).
func TestAnInterruptedShrinkToAdmitWithTheOwnersUIDIsFinishedUnderAStandIn(t *testing.T) {
	for _, tc := range []struct {
		name, standIn, uid string
		want               backfillstore.AdmitState
		wantUpdates        []string
	}{
		{"24.11's stand-in, the owner's uid", "1000", fakeUID("alice"), backfillstore.AdmitDone, []string{"scontrol update JobId=10 TimeLimit=121"}},
		{"22.05's stand-in, the owner's uid", "nobody", fakeUID("alice"), backfillstore.AdmitDone, []string{"scontrol update JobId=10 TimeLimit=121"}},
		{"another uid printed as nobody: a reused id", "nobody", "4242", backfillstore.AdmitAbandoned, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := admitCluster(t, "[admit]\nenabled = true\n", elasticComment)
			j := td.fake.jobs[0]
			td.fake.set(func() {
				j.nodeList, j.nodes, j.user, j.uid = "n1", 1, tc.standIn, tc.uid // shrunk before the daemon died
				td.fake.jobs[1].reason = "Priority"
			})
			ctx := context.Background()
			if _, err := td.db.RecordAdmitShrink(ctx, backfillstore.AdmitShrink{Job: "10", Queued: "20", User: "alice", UID: fakeUID("alice"),
				Partition: "normal", OrigNodes: 2, FromNodes: 2, ToNodes: 1, OldLimit: time.Hour, NewLimit: 121 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			td.cycle(t)
			if recs, _ := td.db.AdmitShrinks(ctx); len(recs) != 1 || recs[0].State != tc.want {
				t.Errorf("records %+v while squeue printed %s (uid %s), want the one %s", recs, tc.standIn, tc.uid, tc.want)
			}
			if got := td.fake.commands("scontrol update"); !slices.Equal(got, tc.wantUpdates) {
				t.Errorf("scontrol updates %q, want %q", got, tc.wantUpdates)
			}
		})
	}
}

// TestUnreadableAdmissionInputsAreWarnedAboutOnce: when squeue fails for
// the pending jobs' placements alone (the running jobs' read), or scontrol
// for the advance reservations, nothing is admitted, and the warning says
// so (a tester saw only the growth warning, which names none of it): once
// while it fails, and once more when it reads again, after which the job
// is admitted.
func TestUnreadableAdmissionInputsAreWarnedAboutOnce(t *testing.T) {
	tests := []struct {
		name, failed, again string
		fail                func(f *fakeSlurm, stderr string)
	}{
		{"pending placements",
			"the pending jobs' excluded nodes, features and priorities cannot be read; no job is admitted by a shrink",
			"the pending jobs' excluded nodes, features and priorities read again",
			func(f *fakeSlurm, stderr string) { f.pendingPlacementsFail = stderr }},
		{"advance reservations",
			"Slurm's advance reservations cannot be read; no job is grown, admitted by a shrink",
			"Slurm's advance reservations read again",
			func(f *fakeSlurm, stderr string) { f.reservationsFail = stderr }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := admitCluster(t, "[admit]\nenabled = true\n", elasticComment)
			var logs bytes.Buffer
			td.Daemon.log = hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true})
			td.fake.set(func() { tc.fail(td.fake, "slurm_load_jobs error: Socket timed out") })
			for range 3 {
				td.cycle(t)
				td.advance(time.Second)
			}
			if n := countLogs(t, &logs, tc.failed, ""); n != 1 {
				t.Fatalf("%d warnings over three cycles, want 1:\n%s", n, logs.String())
			}
			if got := td.fake.commands("scontrol update"); len(got) != 0 {
				t.Fatalf("shrunk without them: %q", got)
			}
			td.fake.set(func() { tc.fail(td.fake, "") })
			td.cycle(t)
			if n := countLogs(t, &logs, tc.again, ""); n != 1 {
				t.Errorf("%d notes that they read again, want 1:\n%s", n, logs.String())
			}
			if got := td.fake.commands("scontrol update"); !slices.Contains(got, "scontrol update JobId=10 NumNodes=1") {
				t.Errorf("once read again, the updates are %q, want job 10 shrunk to 1 node", got)
			}
		})
	}
}
