package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// TestExtraChanged: an extra job is as lent while it waits or runs on the
// one node, partition and GPUs lent; each change its owner can make while
// it waits is named.
func TestExtraChanged(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)
	rec := backfillstore.ExtraJob{ID: "11", Parent: "10", User: "alice", Partition: "low", Node: "n2", GPUs: 2,
		Submitted: t0, End: t0.Add(10 * time.Minute)} // lent for 10 minutes
	pending := slurmcli.Job{ID: "11", User: "alice", Partition: "low", State: "PENDING", Nodes: 1, ReqNodes: "n2", TRESPerNode: "gres:gpu:t4:2",
		TRESAlloc: "cpu=2,mem=16000M,node=1,billing=2,gres/gpu=2", TimeLimit: "10:00"}
	running := pending
	running.State, running.NodeList, running.TRESAlloc = "RUNNING", "n2", "cpu=2,node=1,billing=2,gres/gpu=2"
	for _, tc := range []struct {
		name   string
		job    slurmcli.Job
		node   string // the node it runs on (ExtraView.Node)
		gpus   int    // rec.GPUs; 0: as recorded above
		rec    func(r *backfillstore.ExtraJob)
		qos    string        // [extra] qos
		acct   string        // the parent's account
		late   time.Duration // a running job's end (squeue's EndTime) past rec.End
		cpus   int           // lendTerms.cpus
		change func(j *slurmcli.Job)
		want   string // a part of the reason; "": as lent
	}{
		{name: "pending as lent", job: pending},
		{name: "running as lent", job: running, node: "n2"},
		{name: "renamed is not a change", job: pending, change: func(j *slurmcli.Job) { j.Name, j.Comment = "kept", "kept" }},
		{name: "fewer GPUs is not more", job: running, node: "n2", change: func(j *slurmcli.Job) { j.TRESPerNode = "gres:gpu:t4:1" }},
		{name: "moved to another partition", job: pending, change: func(j *slurmcli.Job) { j.Partition = "normal" }, want: "moved by its owner"},
		{name: "listed in two partitions", job: pending, change: func(j *slurmcli.Job) { j.Partition = "low,normal" }, want: "into low,normal"},
		{name: "more GPUs per node", job: pending, change: func(j *slurmcli.Job) { j.TRESPerNode = "gres:gpu:t4:4" }, want: "4 GPUs (lent 2"},
		{name: "more GPUs per job", job: running, node: "n2", change: func(j *slurmcli.Job) { j.TRESPerJob = "gres:gpu:3" }, want: "3 GPUs"},
		{name: "more GPUs, GPUs not recorded", job: pending, gpus: -1, change: func(j *slurmcli.Job) { j.TRESPerNode = "gres:gpu:t4:4" }},
		{name: "two nodes", job: pending, change: func(j *slurmcli.Job) { j.Nodes = 2 }, want: "2 nodes"},
		{name: "another node asked", job: pending, change: func(j *slurmcli.Job) { j.ReqNodes = "n3" }, want: `node list "n3" (lent n2)`},
		{name: "node list emptied", job: pending, change: func(j *slurmcli.Job) { j.ReqNodes = "" }, want: `node list "" (lent n2)`},
		{name: "node list widened", job: pending, change: func(j *slurmcli.Job) { j.ReqNodes = "n[2-3]" }, want: `node list "n[2-3]"`},
		{name: "running on another node", job: running, node: "n3", want: "running on node n3"},
		// Recorded on the 22.05 lab: --exclusive --gres=gpu:1 runs holding
		// gres/gpu=4, --gpus-per-socket=2 holds 2 with no per-node request,
		// `scontrol update TresPerTask=gres:gpu:v100:1` by the job's owner.
		{name: "running exclusive, holding the node's GPUs", job: running, node: "n2",
			change: func(j *slurmcli.Job) { j.TRESAlloc = "cpu=8,node=1,billing=8,gres/gpu=4" }, want: "holding 4 GPUs (lent 2"},
		{name: "running, typed and untyped allocation counted once", job: running, node: "n2",
			change: func(j *slurmcli.Job) { j.TRESAlloc = "cpu=2,node=1,gres/gpu=2,gres/gpu:t4=2" }},
		{name: "running, only typed allocation", job: running, node: "n2",
			change: func(j *slurmcli.Job) { j.TRESAlloc = "cpu=2,node=1,gres/gpu:t4=3" }, want: "holding 3 GPUs"},
		{name: "pending: tres-alloc is the request at submission, not read", job: pending,
			change: func(j *slurmcli.Job) { j.TRESAlloc = "cpu=8,node=1,gres/gpu=4" }},
		{name: "GPUs per task", job: pending, change: func(j *slurmcli.Job) { j.TRESPerNode, j.TRESPerTask = "gres:", "gres:gpu:v100:1" },
			want: "GPUs per task"},
		{name: "GPUs per socket", job: pending, change: func(j *slurmcli.Job) { j.TRESPerSocket = "gres:gpu:2" }, want: "GPUs per socket"},
		{name: "CPUs per task (24.11) is not a GPU request", job: pending, change: func(j *slurmcli.Job) { j.TRESPerTask = "cpu=2" }},
		{name: "unreadable GPUs per task", job: pending, change: func(j *slurmcli.Job) { j.TRESPerTask = "gres:gpu:x:y:z" }, want: "GPUs per task"},
		{name: "unreadable GPU request", job: pending, change: func(j *slurmcli.Job) { j.TRESPerNode = "gres:gpu:99999999999" }, want: "cannot read"},
		// A helper's attack on both labs: `scontrol update Requeue=1`, then
		// `scontrol requeuehold` and `TimeLimit=2-00:00:00` on the waiting
		// job; released, it ran 2 days past its parent.
		{name: "made requeueable", job: running, node: "n2", change: func(j *slurmcli.Job) { j.Requeue = true }, want: "requeueable"},
		{name: "time limit raised", job: pending, change: func(j *slurmcli.Job) { j.TimeLimit = "2-00:00:00" }, want: `time limit "2-00:00:00" (lent 10m0s)`},
		{name: "time limit raised by a second", job: running, node: "n2", change: func(j *slurmcli.Job) { j.TimeLimit = "10:01" }, want: "time limit"},
		{name: "time limit unlimited", job: pending, change: func(j *slurmcli.Job) { j.TimeLimit = "UNLIMITED" }, want: "time limit"},
		{name: "time limit lowered is not a change", job: running, node: "n2", change: func(j *slurmcli.Job) { j.TimeLimit = "5:00" }},
		{name: "adopted: End is squeue's, the limit is not compared", job: pending, change: func(j *slurmcli.Job) { j.TimeLimit = "20:00" },
			rec: func(r *backfillstore.ExtraJob) { r.Adopted, r.End = true, r.Submitted.Add(time.Minute) }},
		{name: "adopted from an intent that says the time lent: the limit is compared", job: pending,
			change: func(j *slurmcli.Job) { j.TimeLimit = "20:00" },
			rec:    func(r *backfillstore.ExtraJob) { r.Adopted, r.Lent = true, 10*time.Minute }, want: `time limit "20:00" (lent 10m0s)`},
		{name: "the time lent, not End − Submitted, is what counts", job: pending, change: func(j *slurmcli.Job) { j.TimeLimit = "10:00" },
			rec: func(r *backfillstore.ExtraJob) { r.Lent = 5 * time.Minute }, want: `(lent 5m0s)`},
		// A tester's, on both labs: Requeue=1, requeuehold, Requeue=0,
		// release; it restarted with a new limit and Requeue 0.
		{name: "restarted since it was lent", job: running, node: "n2", late: 2 * time.Minute, want: "2m0s past the end lent"},
		{name: "started late, within the wait allowed", job: running, node: "n2", late: 45 * time.Second},
		{name: "adopted: its end is squeue's", job: running, node: "n2", late: 2 * time.Minute,
			rec: func(r *backfillstore.ExtraJob) { r.Adopted = true }},
		{name: "in the extra QOS, as configured in another case", job: pending, qos: "Extra", change: func(j *slurmcli.Job) { j.QOS = "extra" }},
		{name: "in the extra QOS", job: pending, qos: "extra", change: func(j *slurmcli.Job) { j.QOS = "extra" }},
		{name: "moved out of the extra QOS", job: pending, qos: "extra", change: func(j *slurmcli.Job) { j.QOS = "normal" }, want: `extra QOS extra into "normal"`},
		{name: "no extra QOS configured: not compared", job: pending, change: func(j *slurmcli.Job) { j.QOS = "high" }},
		// `scontrol update JobId=… Account=other` by the job's owner, while it
		// waits: the lend is charged to its parent's account.
		{name: "in its parent's account", job: pending, acct: "proj", change: func(j *slurmcli.Job) { j.Account = "proj" }},
		{name: "in its parent's account, another case", job: running, node: "n2", acct: "Proj", change: func(j *slurmcli.Job) { j.Account = "proj" }},
		{name: "moved to another account", job: pending, acct: "proj", change: func(j *slurmcli.Job) { j.Account = "other" },
			want: `account proj into "other"`},
		{name: "parent's account unknown: not compared", job: pending, change: func(j *slurmcli.Job) { j.Account = "other" }},
		{name: "unreadable allocation", job: running, node: "n2", change: func(j *slurmcli.Job) { j.TRESAlloc = "gres/gpu=lots" }, want: "cannot read"},
		// Measured on the 22.05 lab: `scontrol update JobId=… NumCPUs=8` by
		// the owner of a waiting job of 1 task and 1 GPU; squeue's %C then
		// prints 8, the node's every CPU (cpus: its 2 GPUs' share of 16 CPUs
		// on 4 GPUs).
		{name: "within its GPUs' share of CPUs", job: running, node: "n2", cpus: 8, change: func(j *slurmcli.Job) { j.CPUs = 8 }},
		{name: "more CPUs than its GPUs' share", job: pending, cpus: 8, change: func(j *slurmcli.Job) { j.CPUs = 16 },
			want: "16 CPUs (lent 2 GPUs on n2: at most 8"},
		{name: "CPUs not compared when the node's are unknown", job: pending, change: func(j *slurmcli.Job) { j.CPUs = 16 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, r := tc.job, rec
			if tc.change != nil {
				tc.change(&j)
			}
			if tc.gpus < 0 {
				r.GPUs = 0
			}
			if tc.rec != nil {
				tc.rec(&r)
			}
			x := &ExtraView{Job: j, Parent: "10", Node: tc.node}
			if j.State != "PENDING" {
				x.End = r.End.Add(tc.late)
			}
			got := extraChanged(x, r, lendTerms{qos: tc.qos, account: tc.acct, startWithin: 45 * time.Second, cpus: tc.cpus})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("extraChanged = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCPUShare(t *testing.T) {
	for _, tc := range []struct {
		node       *NodeView
		gpus, want int
	}{
		{&NodeView{CPUs: 8, Total: 4}, 1, 2},    // the lab's nodes
		{&NodeView{CPUs: 128, Total: 8}, 3, 48}, // 16 a GPU
		{&NodeView{CPUs: 4, Total: 8}, 3, 6},    // fewer CPUs than GPUs: a core a task
		{&NodeView{CPUs: 10, Total: 4}, 1, 3},   // rounded up
		{&NodeView{CPUs: 0, Total: 4}, 1, 0},    // CPUs unknown
		{&NodeView{CPUs: 8, Total: 4}, 0, 0},    // GPUs not recorded
		{nil, 2, 0},                             // the node is not listed
	} {
		if got := cpuShare(tc.node, tc.gpus); got != tc.want {
			t.Errorf("cpuShare(%+v, %d) = %d, want %d", tc.node, tc.gpus, got, tc.want)
		}
	}
}
