package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// fakeSlurm answers the client commands the daemon runs (scontrol ping,
// sinfo, squeue, sbatch, scancel) from an in-memory cluster, printing the
// --Format output slurmcli asks for: the fields and separators named in
// squeue's SQUEUE_FORMAT2 and sinfo's --Format argument, as Slurm 22.05
// does (each field, then its suffix, then a newline per record).

type fakeSlurm struct {
	mu   sync.Mutex
	now  time.Time
	down bool
	// unresolved are the user names the fake's name service does not
	// resolve (userID: an outage); uids overrides fakeUID for a name
	// (uidFor).
	unresolved map[string]bool
	uids       map[string]string
	nodes      []*fakeNode
	jobs       []*fakeJob
	next       int
	calls      []string // "sbatch ...", "scancel ..." in order
	// startPending leaves submitted jobs pending, with Reason
	// pendingReason ("" prints "None").
	startPending  bool
	pendingReason string
	// sbatchFails makes sbatch fail with this stderr, and sbatchErr (nil:
	// exit status 1) as the command's error.
	sbatchFails string
	sbatchErr   error
	// onSbatch, when set, runs as sbatch is called (with the lock held).
	onSbatch func()
	// onJobs, when set, runs before squeue --jobs=ID answers (a job that
	// changes between the snapshot and the daemon's re-read by id).
	onJobs func()
	// afterSinfo, when set, runs once right after sinfo answers (with the
	// lock held): the cluster changes between the daemon's sinfo and its
	// squeue, as it does on a live cluster.
	afterSinfo func()
	// pings counts `scontrol ping` calls; once it reaches upAtPing (> 0)
	// the controller is up again.
	pings, upAtPing int
	// keepTasks makes the fake a Slurm 23.02 or later (24.11) with jobs
	// submitted with --ntasks-per-node=1: an update of a running job that
	// would change its task count (NumNodes, or any update once a shrink
	// lowered the count) is refused with slurmcli.TaskCountRefusal unless
	// NumTasks= keeps it. Without it the fake is 22.05, which refuses
	// NumTasks on a running job.
	keepTasks bool
	// refuse maps an `scontrol update` command line to the stderr Slurm
	// refuses it with (exit status 1), leaving the job unchanged.
	refuse map[string]string
	// version is what `scontrol --version` prints after "slurm " ("":
	// 22.05.8).
	version string
	// maxTime maps a partition to its MaxTime as sinfo %l prints it
	// ("12:00:00"); a partition of a node without an entry is "infinite".
	maxTime map[string]string
	// tier maps a partition to its PriorityTier as sinfo %p prints it;
	// without an entry, the lab's: normal 10, every other 1. A partition
	// here that no node is in is listed too, as sinfo lists one without
	// nodes (seen on the 22.05 lab).
	tier map[string]string
	// partitionsFail makes `sinfo -o slurmcli.PartitionFormat` fail with
	// this stderr.
	partitionsFail string
	// showNodesFails makes `scontrol show node -o` fail with this stderr.
	showNodesFails string
	// placementsFail makes `squeue -o slurmcli.PlacementFormat` fail with
	// this stderr.
	placementsFail string
	// pendingPlacementsFail does so for the pending jobs' only
	// (--states=PENDING), runningPlacementsFail for the running jobs'
	// (--states=RUNNING).
	pendingPlacementsFail, runningPlacementsFail string
	// reservations are the lines `scontrol show reservation -o` prints
	// (fakeReservation); reservationsFail makes it fail with this stderr.
	reservations     []string
	reservationsFail string
	// preemptType is what `scontrol show config` prints for PreemptType
	// ("": preempt/partition_prio, as the lab's).
	preemptType string
	// schedulerParameters is what `scontrol show config` prints for
	// SchedulerParameters ("": bf_interval=1, the lab's).
	schedulerParameters string
}

type fakeNode struct {
	name, gpuType string
	gpus, cpus    int
	partitions    []string
	state         string // "" = derived (idle/mixed/allocated)
	weight        int    // slurm.conf Weight= (0: Slurm's default, 1)
}

type fakeJob struct {
	id, name, state, partition, comment string
	user, account, workDir              string
	// uid is squeue's UserId; "" prints fakeUID(user).
	uid                  string
	nodeList, schedNodes string
	gpusPerNode, nodes   int
	// gpusPerJob, with gpusPerNode 0, is a --gpus=N request (squeue's
	// tres-per-job), spread evenly in sinfo's GresUsed.
	gpusPerJob int
	gpuType    string
	start, end time.Time
	timeLimit  time.Duration
	signalled  int
	reqNode    string
	script     string
	args       []string
	// unreadable makes squeue print a record slurmcli cannot read (NumNodes
	// "garbled").
	unreadable bool
	// reason is squeue's Reason ("" prints "None").
	reason string
	// startText, when set, is what squeue prints as StartTime instead of
	// start ("Unknown", "None").
	startText string
	// arrayOf is the id under which squeue --jobs=ID also lists this job
	// (a task of job array ID, or a component of heterogeneous job ID).
	arrayOf string
	// excNodes and features are a pending job's --exclude and --constraint.
	excNodes, features string
	// priority is squeue's %Q; 0 prints priority/basic's, an earlier
	// submission (a lower id) higher (fakePriority).
	priority uint64
	// tasks is the task count a shrink left and recorded the node count
	// slurmctld keeps for the job after it (keepTasks); 0: one task per
	// node, and the node count.
	tasks, recorded int
	// noRequeue refuses `scontrol requeue` (--no-requeue); requeueErr
	// requeues the job but reports an error (a timeout after slurmctld
	// acted).
	noRequeue, requeueErr bool
	// printedID, when set, is what squeue's %i prints for the job (an
	// array task's ARRAY_TASK, a heterogeneous job's ID+N).
	printedID string
	// tresPerTask and tresPerSocket are squeue's tres-per-task and
	// tres-per-socket ("" prints "N/A"); heldGPUs, when set, is the gres/gpu
	// of tres-alloc (what a running job holds: all of a node's GPUs for an
	// exclusive one), else its request.
	tresPerTask, tresPerSocket string
	heldGPUs                   int
	// requeueable prints squeue's Requeue 1 (0 otherwise: what the
	// daemon's --no-requeue extra jobs show).
	requeueable bool
	// qos is squeue's QOS ("" prints "normal").
	qos string
	// reservation and contiguous are its --reservation and --contiguous
	// (squeue's %v and %O).
	reservation string
	contiguous  bool
}

func newFake(now time.Time) *fakeSlurm {
	f := &fakeSlurm{now: now, next: 100}
	for i, typ := range []string{"v100", "v100", "t4", "t4"} {
		f.nodes = append(f.nodes, &fakeNode{name: fmt.Sprintf("n%d", i+1), gpuType: typ, gpus: 4, cpus: 8,
			partitions: []string{"normal", "low"}})
	}
	return f
}

func (f *fakeSlurm) runner() slurmcli.Runner { return slurmcli.Runner{Exec: f.exec} }

// running adds a running job; gpus per node on the named nodes.
func (f *fakeSlurm) running(id, comment, nodeList string, gpusPerNode int, limit time.Duration, workDir string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	names, _ := slurmcli.ExpandHostlist(nodeList)
	j := &fakeJob{id: id, name: "job" + id, state: "RUNNING", partition: "normal", comment: comment, user: "alice",
		account: "proj", workDir: workDir, nodeList: nodeList, gpusPerNode: gpusPerNode, nodes: len(names),
		start: f.now, end: f.now.Add(limit), timeLimit: limit}
	f.jobs = append(f.jobs, j)
	return j
}

// extra adds a running extra job of parent as the daemon submits it (name,
// comment, partition low, user alice) on node with gpus GPUs; node "" makes
// it pending on reqNode n2.
func (f *fakeSlurm) extra(id, parent, node string, gpus int, limit time.Duration) *fakeJob {
	j := f.running(id, "es-extra parent="+parent, node, gpus, limit, "")
	f.set(func() {
		j.name, j.partition, j.reqNode, j.nodes = "es-extra-"+parent, "low", node, 1
		if node == "" {
			j.state, j.reqNode, j.start, j.end = "PENDING", "n2", time.Time{}, time.Time{}
		}
	})
	return j
}

// pending adds a pending job planned to start at start on schedNodes.
func (f *fakeSlurm) pending(id, schedNodes string, gpusPerNode int, start time.Time) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	names, _ := slurmcli.ExpandHostlist(schedNodes)
	j := &fakeJob{id: id, name: "wait" + id, state: "PENDING", partition: "normal", user: "bob", schedNodes: schedNodes,
		gpusPerNode: gpusPerNode, nodes: len(names), start: start, end: start.Add(time.Hour), timeLimit: time.Hour}
	f.jobs = append(f.jobs, j)
	return j
}

func (f *fakeSlurm) job(id string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

func (f *fakeSlurm) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeSlurm) commands(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// printFormat prints rows in a --Format list ("Name:0SUFFIX,..."): each
// field's value followed by its suffix, then a newline per row. A field the
// row lacks is an error (the fake would need to learn it).
func printFormat(format string, rows []map[string]string) ([]byte, error) {
	var b strings.Builder
	for _, row := range rows {
		for _, tok := range strings.Split(format, ",") {
			name, suffix, ok := strings.Cut(tok, ":0")
			if !ok {
				return nil, fmt.Errorf("fake slurm: format token %q without :0", tok)
			}
			v, ok := row[name]
			if !ok {
				return nil, fmt.Errorf("fake slurm: no field %q", name)
			}
			b.WriteString(v + suffix)
		}
		b.WriteString("\n")
	}
	return []byte(b.String()), nil
}

func envValue(env []string, key string) string {
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func (f *fakeSlurm) exec(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmdline := name + " " + strings.Join(args, " ")
	if cmdline == "scontrol ping" {
		f.pings++
		if f.upAtPing > 0 && f.pings >= f.upAtPing {
			f.down = false
		}
	}
	if f.down {
		return nil, &slurmcli.CommandError{Command: cmdline, Err: errors.New("exit status 1"),
			Stderr: "slurm_load_partitions: Unable to contact slurm controller (connect failure)"}
	}
	switch {
	case name == "scontrol" && len(args) == 1 && args[0] == "ping":
		return []byte("Slurmctld(primary) at vm is UP\n"), nil
	case name == "scontrol" && len(args) == 1 && args[0] == "--version":
		if v, ok := strings.CutPrefix(f.version, "wlm "); ok {
			return []byte("slurm-wlm " + v + "\n"), nil
		}
		return []byte("slurm " + cmp.Or(f.version, "22.05.8") + "\n"), nil
	case name == "squeue" && slices.Contains(args, "--Format="+slurmcli.StateAndTasksFormat):
		return f.stateAndTasks(args), nil
	case name == "scontrol" && strings.Join(args, " ") == "show config":
		return []byte("PreemptType             = " + cmp.Or(f.preemptType, "preempt/partition_prio") + "\nSchedulerParameters     = " + cmp.Or(f.schedulerParameters, "bf_interval=1") + "\nSlurmdTimeout           = 300 sec\n"), nil
	case name == "scontrol" && strings.Join(args, " ") == "show reservation -o":
		if f.reservationsFail != "" {
			return nil, &slurmcli.CommandError{Command: cmdline, Stderr: f.reservationsFail, Err: errors.New("exit status 1")}
		}
		if len(f.reservations) == 0 {
			return []byte("No reservations in the system\n"), nil
		}
		return []byte(strings.Join(f.reservations, "\n") + "\n"), nil
	case name == "scontrol" && strings.Join(args, " ") == "show node -o":
		if f.showNodesFails != "" {
			return nil, &slurmcli.CommandError{Command: cmdline, Err: errors.New("exit status 1"), Stderr: f.showNodesFails}
		}
		return f.showNodes(), nil
	case name == "sinfo" && slices.Contains(args, slurmcli.PartitionFormat):
		if f.partitionsFail != "" {
			return nil, &slurmcli.CommandError{Command: cmdline, Stderr: f.partitionsFail, Err: errors.New("exit status 1")}
		}
		return f.partitions(), nil
	case name == "sinfo":
		format, _ := strings.CutPrefix(args[len(args)-1], "--Format=")
		out, err := printFormat(format, f.sinfo())
		if f.afterSinfo != nil {
			f.afterSinfo()
			f.afterSinfo = nil
		}
		return out, err
	case name == "squeue" && slices.Contains(args, slurmcli.PlacementFormat):
		if f.placementsFail != "" {
			return nil, &slurmcli.CommandError{Command: cmdline, Stderr: f.placementsFail, Err: errors.New("exit status 1")}
		}
		if f.pendingPlacementsFail != "" && slices.Contains(args, "--states=PENDING") {
			return nil, &slurmcli.CommandError{Command: cmdline, Stderr: f.pendingPlacementsFail, Err: errors.New("exit status 1")}
		}
		if f.runningPlacementsFail != "" && slices.Contains(args, "--states=RUNNING") {
			return nil, &slurmcli.CommandError{Command: cmdline, Stderr: f.runningPlacementsFail, Err: errors.New("exit status 1")}
		}
		return f.placements(args), nil
	case name == "squeue":
		return f.squeue(envValue(env, "SQUEUE_FORMAT2"), args)
	case name == "sbatch":
		f.calls = append(f.calls, cmdline)
		if f.onSbatch != nil {
			f.onSbatch()
		}
		return f.sbatch(args)
	case name == "scancel":
		f.calls = append(f.calls, cmdline)
		if stderr, ok := f.refuse[cmdline]; ok {
			return nil, &slurmcli.CommandError{Command: cmdline, Err: errors.New("exit status 1"), Stderr: stderr}
		}
		return f.scancel(args)
	case name == "scontrol" && len(args) == 2 && args[0] == "requeue":
		f.calls = append(f.calls, cmdline)
		return f.requeue(args[1])
	case name == "scontrol" && (len(args) == 3 || len(args) == 4) && args[0] == "update":
		f.calls = append(f.calls, cmdline)
		if stderr, ok := f.refuse[cmdline]; ok {
			return nil, &slurmcli.CommandError{Command: cmdline, Err: errors.New("exit status 1"), Stderr: stderr}
		}
		return f.update(args[1], args[2], args[3:]...)
	}
	return nil, fmt.Errorf("fake slurm: unexpected command %q", cmdline)
}

func (f *fakeSlurm) used(node string) int {
	n := 0
	for _, j := range f.jobs {
		if j.state != "RUNNING" && j.state != "COMPLETING" {
			continue
		}
		names, _ := slurmcli.ExpandHostlist(j.nodeList)
		if slices.Contains(names, node) {
			n += j.gpusPerNode + j.gpusPerJob/max(1, len(names))
		}
	}
	return n
}

// partitions prints sinfo -o PartitionFormat: each partition of a node
// once, with its MaxTime and PriorityTier.
func (f *fakeSlurm) partitions() []byte {
	var b strings.Builder
	seen := map[string]bool{}
	print := func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		t, ok := f.maxTime[p]
		if !ok {
			t = "infinite"
		}
		tier, ok := f.tier[p]
		if !ok {
			tier = "1"
			if p == "normal" {
				tier = "10"
			}
		}
		b.WriteString(p + "|" + t + "|" + tier + "\n")
	}
	for _, n := range f.nodes {
		for _, p := range n.partitions {
			print(p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(f.tier)) {
		print(p)
	}
	return []byte(b.String())
}

// showNodes prints `scontrol show node -o` as Slurm 22.05 does, with the
// fields the daemon reads.
func (f *fakeSlurm) showNodes() []byte {
	var b strings.Builder
	for _, n := range f.nodes {
		fmt.Fprintf(&b, "NodeName=%s Arch=x86_64 CPUTot=%d Gres=gpu:%s:%d NodeAddr=127.0.0.1 Port=0 State=IDLE Weight=%d Partitions=%s\n",
			n.name, n.cpus, n.gpuType, n.gpus, max(n.weight, 1), strings.Join(n.partitions, ","))
	}
	return []byte(b.String())
}

func (f *fakeSlurm) sinfo() []map[string]string {
	var rows []map[string]string
	for _, n := range f.nodes {
		used := f.used(n.name)
		state := n.state
		if state == "" {
			state = "idle"
			if used > 0 {
				state = "mixed"
			}
		}
		gresUsed := fmt.Sprintf("gpu:%s:0", n.gpuType)
		if used > 0 {
			gresUsed = fmt.Sprintf("gpu:%s:%d(IDX:0-%d)", n.gpuType, used, used-1)
		}
		for i, p := range n.partitions {
			if i == 0 {
				p += "*"
			}
			cpus := fmt.Sprintf("%d/%d/0/%d", min(used, n.cpus), n.cpus-min(used, n.cpus), n.cpus)
			rows = append(rows, map[string]string{"NodeList": n.name, "StateLong": state,
				"Gres": "gpu:" + n.gpuType + ":" + strconv.Itoa(n.gpus), "GresUsed": gresUsed, "Partition": p,
				"Reason": "none", "CPUsState": cpus})
		}
	}
	return rows
}

func slurmTime(t time.Time) string {
	if t.IsZero() {
		return "N/A"
	}
	return t.In(time.Local).Format(slurmcli.TimeLayout)
}

// fakePriority is the priority priority/basic gives job id (as the lab
// printed it: 4294901760 − the submission's rank, so 1880001 printed
// 4294901759): the lower the id, the higher.
func fakePriority(id string) uint64 {
	n, err := strconv.ParseUint(strings.TrimLeft(id, "0"), 10, 32)
	if err != nil || n >= 4294901760 {
		return 1
	}
	return 4294901760 - n%1000000
}

// placements prints the excluded nodes, priority and features of the jobs in the
// state --states= names (PENDING, RUNNING; all: every job's) as `squeue -o
// slurmcli.PlacementFormat` does ("" and "(null)" when none).
func (f *fakeSlurm) placements(args []string) []byte {
	only, state := "", ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--jobs="); ok {
			only = v
		}
		if v, ok := strings.CutPrefix(a, "--states="); ok {
			state = v
		}
	}
	var b strings.Builder
	for _, j := range f.jobs {
		if (state == "all" || j.state == state) && (only == "" || j.id == only) {
			features := j.features
			if features == "" {
				features = "(null)"
			}
			contiguous := 0
			if j.contiguous {
				contiguous = 1
			}
			fmt.Fprintf(&b, "%s|%s|%s|%d|%s|%d|%s\n", j.id, cmp.Or(j.printedID, j.id), j.excNodes, cmp.Or(j.priority, fakePriority(j.id)),
				cmp.Or(j.reservation, "(null)"), contiguous, features)
		}
	}
	return []byte(b.String())
}

// squeue prints the jobs (only job ID with --jobs=ID, which fails as
// Slurm does when the id is unknown).
func (f *fakeSlurm) squeue(format string, args []string) ([]byte, error) {
	only := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--jobs="); ok {
			only = v
		}
	}
	if only != "" && f.onJobs != nil {
		f.onJobs()
	}
	var rows []map[string]string
	for _, j := range f.jobs {
		if only != "" && j.id != only && j.arrayOf != only {
			continue
		}
		tpn := "N/A"
		if j.gpusPerNode > 0 {
			tpn = "gres:gpu:" + strconv.Itoa(j.gpusPerNode)
			if j.gpuType != "" {
				tpn = "gres:gpu:" + j.gpuType + ":" + strconv.Itoa(j.gpusPerNode)
			}
		}
		tpj := "N/A"
		if j.gpusPerJob > 0 {
			tpj = "gres:gpu:" + strconv.Itoa(j.gpusPerJob)
		}
		orNull := func(s string) string {
			if s == "" {
				return "(null)"
			}
			return s
		}
		start := slurmTime(j.start)
		if j.startText != "" {
			start = j.startText
		}
		alloc := "cpu=1,node=1,billing=1"
		if g := cmp.Or(j.heldGPUs, max(j.gpusPerJob, j.gpusPerNode*max(1, j.nodes))); g > 0 {
			alloc += ",gres/gpu=" + strconv.Itoa(g)
		}
		nodes := strconv.Itoa(max(1, j.nodes))
		if j.unreadable {
			nodes = "garbled"
		}
		rows = append(rows, map[string]string{"JobID": j.id, "Name": j.name, "State": j.state, "Partition": j.partition,
			"NumNodes": nodes, "NumCPUs": "1", "tres-per-node": tpn, "tres-per-job": tpj,
			"NodeList": j.nodeList, "Reason": orNone(j.reason), "StartTime": start, "EndTime": slurmTime(j.end),
			"TimeLimit": fmt.Sprintf("%d:00", int(j.timeLimit.Minutes())), "SchedNodes": orNull(j.schedNodes),
			"BatchHost": batchHost(j), "Comment": orNull(j.comment), "UserName": j.user, "Account": orNull(j.account),
			"WorkDir": j.workDir, "ReqNodes": j.reqNode, "tres-per-task": cmp.Or(j.tresPerTask, "N/A"),
			"tres-per-socket": cmp.Or(j.tresPerSocket, "N/A"), "tres-alloc": alloc,
			"Requeue": map[bool]string{false: "0", true: "1"}[j.requeueable], "QOS": cmp.Or(j.qos, "normal"),
			"UserId": cmp.Or(j.uid, f.uidFor(j.user))})
	}
	if only != "" && len(rows) == 0 {
		return nil, &slurmcli.CommandError{Command: "squeue", Err: errors.New("exit status 1"),
			Stderr: "slurm_load_jobs error: Invalid job id specified"}
	}
	return printFormat(format, rows)
}

// fakeUID is the uid the fake Slurm prints for a user name: the number
// itself for a name squeue printed as a uid, 0 for root, 65534 for nobody,
// this process's for alice (the fake's default user: rendezvous writes her
// files), else a number derived from the name (the same name always gets
// the same uid, different test users different ones).
func fakeUID(user string) string {
	switch {
	case slurmcli.Digits(user):
		return user
	case user == "root":
		return "0"
	case user == "nobody":
		return "65534"
	case user == "alice":
		return strconv.Itoa(os.Getuid())
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	uid := 10000 + int(h.Sum32()%50000)
	if uid == os.Getuid() {
		uid++
	}
	return strconv.Itoa(uid)
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

// stateAndTasks answers `squeue --noheader --jobs=ID --Format=State:0
// ,NumTasks:0`: a job's state and its task count (one task per node).
func (f *fakeSlurm) stateAndTasks(args []string) []byte {
	for _, a := range args {
		if id, ok := strings.CutPrefix(a, "--jobs="); ok {
			for _, j := range f.jobs {
				if j.id == id {
					return []byte(fmt.Sprintf("%s %d\n", j.state, j.taskCount()))
				}
			}
		}
	}
	return nil
}

// taskCount is a job's task count: one per node it was submitted on, or
// what a shrink lowered it to.
func (j *fakeJob) taskCount() int {
	if j.tasks > 0 {
		return j.tasks
	}
	return j.nodes
}

// update applies `scontrol update JobId=ID NumNodes=N` (keeps the first N
// nodes, as Slurm does) or `... TimeLimit=MINUTES` to a running job. more
// is "NumTasks=T", which keepTasks needs where an update would change a
// running job's task count: T must be that count.
func (f *fakeSlurm) update(jobArg, kv string, more ...string) ([]byte, error) {
	id, _ := strings.CutPrefix(jobArg, "JobId=")
	key, val, _ := strings.Cut(kv, "=")
	if key == "StartTime" {
		return f.updateBegin(id, val)
	}
	if key == "ExcNodeList" {
		return f.updateExcluded(id, val)
	}
	var keep []string // NodeList=A,B: the nodes a running job keeps
	if key == "NodeList" {
		keep = strings.Split(val, ",")
		val = strconv.Itoa(len(keep))
	}
	n, err := strconv.Atoi(val)
	tasks := -1
	if len(more) == 1 {
		t, ok := strings.CutPrefix(more[0], "NumTasks=")
		var terr error
		if tasks, terr = strconv.Atoi(t); terr != nil || !ok {
			return nil, fmt.Errorf("fake slurm: unexpected %q", more[0])
		}
	}
	for _, j := range f.jobs {
		if j.id != id || err != nil {
			continue
		}
		if j.state == "PENDING" { // an operator may change a pending job's request
			switch key {
			case "NumNodes":
				if n < 1 {
					break
				}
				j.nodes = n
				return nil, nil
			case "TimeLimit":
				j.timeLimit = time.Duration(n) * time.Minute
				return nil, nil
			}
		}
		if j.state != "RUNNING" {
			continue
		}
		// 23.02+ recomputes the task count as nodes × 1: the new count, else
		// the recorded one (a shrink does not lower it)
		implied := j.nodes
		if j.recorded > 0 {
			implied = j.recorded
		}
		if key == "NumNodes" || key == "NodeList" {
			implied = n
		}
		if tasks >= 0 && !f.keepTasks || f.keepTasks && (tasks >= 0 && tasks != j.taskCount() || tasks < 0 && implied != j.taskCount()) {
			return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
				Stderr: slurmcli.TaskCountRefusal + " for job " + id}
		}
		switch key {
		case "NumNodes":
			names, _ := slurmcli.ExpandHostlist(j.nodeList)
			if n < 1 || n > len(names) {
				break
			}
			if f.keepTasks && j.recorded == 0 {
				j.recorded = j.nodes // the count slurmctld keeps recording
			}
			j.nodeList, j.nodes = strings.Join(names[:n], ","), n
			if f.keepTasks {
				j.tasks = n // lowered to the CPUs left
			}
			return nil, nil
		case "TimeLimit":
			j.timeLimit = time.Duration(n) * time.Minute
			j.end = j.start.Add(j.timeLimit)
			return nil, nil
		case "NodeList": // as slurmctld: a subset of its nodes that holds the batch host (its first)
			names, _ := slurmcli.ExpandHostlist(j.nodeList)
			if !slices.Contains(keep, names[0]) || slices.ContainsFunc(keep, func(k string) bool { return !slices.Contains(names, k) }) {
				return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
					Stderr: "Invalid node name specified for job " + id}
			}
			if f.keepTasks && j.recorded == 0 {
				j.recorded = j.nodes
			}
			j.nodeList, j.nodes = strings.Join(keep, ","), len(keep)
			if f.keepTasks {
				j.tasks = n
			}
			return nil, nil
		}
	}
	return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
		Stderr: "scontrol: error: Invalid job id specified for job " + id}
}

// requeue applies `scontrol requeue ID` as Slurm does: a running job
// becomes pending (Reason BeginTime, no nodes, its excluded nodes kept); a
// job with noRequeue, or not running, is refused.
func (f *fakeSlurm) requeue(id string) ([]byte, error) {
	for _, j := range f.jobs {
		if j.id == id && j.state == "RUNNING" && !j.noRequeue {
			j.state, j.reason, j.nodeList, j.start = "PENDING", "BeginTime", "", f.now.Add(10*time.Second)
			if j.requeueErr {
				return nil, &slurmcli.CommandError{Command: "scontrol requeue", Err: errors.New("exit status 1"),
					Stderr: "slurm_requeue error: Socket timed out on send/recv operation"}
			}
			return nil, nil
		}
	}
	return nil, &slurmcli.CommandError{Command: "scontrol requeue", Err: errors.New("exit status 1"),
		Stderr: "Requeue of JobId=" + id + " not allowed"}
}

// updateExcluded applies `scontrol update JobId=ID ExcNodeList=LIST` as
// Slurm does for a pending job ("" clears it); a running or unknown job is
// refused.
func (f *fakeSlurm) updateExcluded(id, val string) ([]byte, error) {
	for _, j := range f.jobs {
		if j.id == id && j.state == "PENDING" {
			j.excNodes = val
			return nil, nil
		}
	}
	return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
		Stderr: "scontrol: error: Job is no longer pending execution for job " + id}
}

// updateBegin applies `scontrol update JobId=ID StartTime=now-300` as
// Slurm does: a pending job's begin time in the past becomes now (squeue
// then prints no StartTime); any other job is refused.
func (f *fakeSlurm) updateBegin(id, val string) ([]byte, error) {
	if val != "now-300" {
		return nil, fmt.Errorf("fake slurm: StartTime=%q (the daemon sets only now-300)", val)
	}
	for _, j := range f.jobs {
		if j.id != id {
			continue
		}
		if j.state != "PENDING" {
			return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
				Stderr: "Job is no longer pending execution for job " + id}
		}
		j.start = time.Time{}
		return nil, nil
	}
	return nil, &slurmcli.CommandError{Command: "scontrol update", Err: errors.New("exit status 1"),
		Stderr: "scontrol: error: Invalid job id specified for job " + id}
}

func (f *fakeSlurm) sbatch(args []string) ([]byte, error) {
	if f.sbatchFails != "" || f.sbatchErr != nil {
		err := f.sbatchErr
		if err == nil {
			err = errors.New("exit status 1")
		}
		return nil, &slurmcli.CommandError{Command: "sbatch", Err: err, Stderr: f.sbatchFails}
	}
	f.next++
	j := &fakeJob{id: strconv.Itoa(f.next), state: "RUNNING", start: f.now, user: "alice", args: args, nodes: 1}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--job-name":
			j.name = v
		case "--comment":
			j.comment = v
		case "--partition":
			j.partition = v
		case "--account":
			j.account = v
		case "--nodelist":
			j.reqNode = v
		case "--time":
			m, _ := strconv.Atoi(v)
			j.timeLimit = time.Duration(m) * time.Minute
		case "--gres":
			parts := strings.Split(v, ":")
			j.gpusPerNode, _ = strconv.Atoi(parts[len(parts)-1])
			if len(parts) == 3 {
				j.gpuType = parts[1]
			}
		case "--wrap":
			j.script = v
		}
	}
	j.end = f.now.Add(j.timeLimit)
	if f.startPending {
		j.state, j.start, j.end, j.reason = "PENDING", time.Time{}, time.Time{}, f.pendingReason
	} else {
		j.nodeList = j.reqNode
	}
	f.jobs = append(f.jobs, j)
	return []byte(j.id + "\n"), nil
}

func (f *fakeSlurm) scancel(args []string) ([]byte, error) {
	id := args[len(args)-1]
	for _, j := range f.jobs {
		if j.id != id {
			continue
		}
		if finalStates[j.state] {
			return nil, &slurmcli.CommandError{Command: "scancel", Err: errors.New("exit status 1"),
				Stderr: "scancel: error: Kill job error on job id " + id + ": Job/step already completing or completed"}
		}
		if len(args) == 2 && args[0] == "--signal=TERM" {
			j.signalled++
			return nil, nil
		}
		j.state = "CANCELLED"
		return nil, nil
	}
	return nil, &slurmcli.CommandError{Command: "scancel", Err: errors.New("exit status 1"),
		Stderr: "scancel: error: Invalid job id " + id}
}

// rendezvous creates WORK/.easyscale/ID with coordinator and token files and
// returns WORK.
// userID is Options.UserID for the fake's jobs, whose users (alice, bob)
// need not exist here: the fake's name service gives each name fakeUID's
// uid (alice's is this process's, which owns the files rendezvous writes),
// except a name squeue printed as a uid and a name in f.unresolved (an
// outage), which do not resolve.
func (f *fakeSlurm) userID(name string) (uint32, error) {
	f.mu.Lock()
	down, uid := f.unresolved[name], f.uidFor(name)
	f.mu.Unlock()
	if down || slurmcli.Digits(name) {
		return 0, fmt.Errorf("user: unknown user %s", name)
	}
	id, err := strconv.ParseUint(uid, 10, 32)
	return uint32(id), err
}

// uidFor is user's uid on the fake cluster: f.uids's, or fakeUID's. Call
// it with f.mu held.
func (f *fakeSlurm) uidFor(user string) string {
	if uid, ok := f.uids[user]; ok {
		return uid
	}
	return fakeUID(user)
}

// shareFilesWith gives users this process's uid, as alice has: their
// elastic jobs' rendezvous files (written by this process) are then
// theirs.
func (f *fakeSlurm) shareFilesWith(users ...string) {
	f.set(func() {
		if f.uids == nil {
			f.uids = map[string]string{}
		}
		for _, u := range users {
			f.uids[u] = strconv.Itoa(os.Getuid())
		}
	})
}

// unresolve makes the fake's name service stop resolving names (an LDAP
// or sssd outage) until resolve.
func (f *fakeSlurm) unresolve(names ...string) {
	f.set(func() {
		if f.unresolved == nil {
			f.unresolved = map[string]bool{}
		}
		for _, n := range names {
			f.unresolved[n] = true
		}
	})
}

// resolve ends unresolve's outage.
func (f *fakeSlurm) resolve() { f.set(func() { f.unresolved = nil }) }

func rendezvous(t testing.TB, id string) string {
	t.Helper()
	work := t.TempDir()
	dir := filepath.Join(work, ".easyscale", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"coordinator": "n1:40000\n", "token": "secret\n", "job-id": id + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// batchHost is what squeue prints as a job's BatchHost: the first node of a
// running job's list (where Slurm runs its batch script), "n/a" otherwise.
func batchHost(j *fakeJob) string {
	names, _ := slurmcli.ExpandHostlist(j.nodeList)
	if j.state != "RUNNING" || len(names) == 0 {
		return "n/a"
	}
	return names[0]
}

// fakeReservation is a line of `scontrol show reservation -o` for an
// advance reservation of nodes (a hostlist) from start for d, at now, as Slurm
// 22.05 prints it (internal/slurmcli/testdata/scontrol-reservation.txt).
func fakeReservation(name, nodes string, now, start time.Time, d time.Duration, flags string) string {
	state := "INACTIVE"
	if !start.After(now) {
		state = "ACTIVE"
	}
	return fmt.Sprintf("ReservationName=%s StartTime=%s EndTime=%s Duration=%d Nodes=%s NodeCnt=1 CoreCnt=8 Features=(null) "+
		"PartitionName=(null) Flags=%s TRES=cpu=8 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=%s "+
		"BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)",
		name, slurmTime(start), slurmTime(start.Add(d)), int(d.Minutes()), nodes, flags, state)
}
