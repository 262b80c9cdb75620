package slurmcli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SqueueFields are the squeue --Format fields this package asks for, in order.
var SqueueFields = []string{
	"JobID", "Name", "State", "Partition", "NumNodes", "NumCPUs",
	"tres-per-node", "tres-per-job", "NodeList", "Reason",
	"StartTime", "EndTime", "TimeLimit", "SchedNodes", "BatchHost", "Comment",
	"UserName", "Account", "WorkDir", "ReqNodes",
	"tres-per-task", "tres-per-socket", "tres-alloc", "Requeue", "QOS",
	"UserId",
}

// SqueueArgs returns the arguments of `squeue` whose output [ParseSqueue] reads
// (no header); the format itself travels in the environment, see
// [SqueueFormatEnv]. Append filters such as "-j", "12" or "--states=PENDING".
func SqueueArgs() []string { return []string{"--noheader"} }

// SqueueFormatEnv returns the environment entry "SQUEUE_FORMAT2=..." that asks
// squeue for SqueueFields at unlimited width, delimited by s. squeue reads
// --Format from SQUEUE_FORMAT2, and a process's environment, unlike its
// command line, is readable only by its owner: another user who watches the
// daemon's squeue cannot learn s while the call runs. SQUEUE_FORMAT (which
// would win over it) must not be set; [Runner.ListJobs] removes it.
func SqueueFormatEnv(s Separators) string { return "SQUEUE_FORMAT2=" + s.format(SqueueFields) }

// TimeLayout is how Slurm prints times (in the local time zone of the command).
const TimeLayout = "2006-01-02T15:04:05"

// Job is one line of squeue output. Optional values Slurm prints as "(null)" or "N/A"
// are "". Times are kept as printed (see [Job.Start]); TimeLimit is as printed
// ("5:00", "1-00:00:00", "UNLIMITED").
type Job struct {
	ID          string `json:"id"` // "12", "12_3" (array task), "12+0" (het component)
	Name        string `json:"name"`
	State       string `json:"state"` // PENDING, RUNNING, COMPLETING, ...
	Partition   string `json:"partition"`
	Nodes       int    `json:"nodes"` // allocated nodes; for a pending job the minimum requested
	CPUs        int    `json:"cpus"`
	TRESPerNode string `json:"tres_per_node,omitempty"` // "gres:gpu:v100:2"
	TRESPerJob  string `json:"tres_per_job,omitempty"`  // "gres:gpu:3"
	NodeList    string `json:"node_list,omitempty"`     // "n[1-2]"
	Reason      string `json:"reason"`                  // "None", "Resources", "Priority", ...
	StartTime   string `json:"start_time,omitempty"`    // actual, or expected for a pending job
	// StartUnset is the word squeue printed instead of a StartTime ("" when
	// it printed a time): "N/A" for none (a job held by its begin time
	// once that has passed), "Unknown" for INFINITE, "None" for NO_VAL (a
	// begin time of 2106-02-07T06:28:15 or :14 prints so), "(null)".
	StartUnset string `json:"start_unset,omitempty"`
	EndTime    string `json:"end_time,omitempty"`
	TimeLimit  string `json:"time_limit"`
	SchedNodes string `json:"sched_nodes,omitempty"` // nodes backfill plans for a pending job
	BatchHost  string `json:"batch_host,omitempty"`
	Comment    string `json:"comment,omitempty"`
	// User is the owner's user name as squeue printed it: when the name
	// service does not resolve the owner's uid, Slurm 24.11 prints the uid
	// and 22.05 prints "nobody" instead (a stand-in; UID is still exact).
	User     string `json:"user"`
	Account  string `json:"account,omitempty"`   // "" when Slurm has none ("(null)")
	WorkDir  string `json:"work_dir,omitempty"`  // the job's working directory
	ReqNodes string `json:"req_nodes,omitempty"` // --nodelist as asked ("n3"), "" when none
	// TRESPerTask and TRESPerSocket are the job's --gpus-per-task and
	// --gpus-per-socket requests ("gres:gpu:2"; 24.11 also puts
	// --cpus-per-task here, "cpu=2"), "" when none.
	TRESPerTask   string `json:"tres_per_task,omitempty"`
	TRESPerSocket string `json:"tres_per_socket,omitempty"`
	// TRESAlloc is what a running job holds ("cpu=8,node=1,billing=8,
	// gres/gpu=4"); for a pending job, what it asked for at submission
	// (Slurm 22.05 does not recompute it after `scontrol update`).
	TRESAlloc string `json:"tres_alloc,omitempty"`
	// Requeue is whether Slurm requeues the job on a node failure or
	// preemption, and whether `scontrol requeue` may (squeue's Requeue, 0 for
	// --no-requeue; its owner may set it while the job waits).
	Requeue bool `json:"requeue,omitempty"`
	// QOS is the job's quality of service ("normal"; "" when Slurm has
	// none, "(null)").
	QOS string `json:"qos,omitempty"`
	// UID is the owner's numeric user id ("1001"): squeue's UserId, printed
	// from the job record, so it names the owner whether or not the name
	// service resolves it, unlike User.
	UID string `json:"uid"`
}

// ParseSqueue parses the output of `squeue` run with [SqueueArgs] and
// [SqueueFormatEnv](s). A record that cannot be read (wrong field count, an
// unreadable count, no job id) is left out of jobs and returned in skipped
// (a *ParseError naming line, job id when known, and field); the others are
// kept. err (a *ParseError wrapping [ErrNotDelimited], or bad separators) is
// set only when the output as a whole is not in the requested format.
func ParseSqueue(out []byte, s Separators) (jobs []Job, skipped []*ParseError, err error) {
	recs, skipped, err := splitRecords("squeue", out, SqueueFields, s)
	if err != nil {
		return nil, nil, err
	}
	jobs = make([]Job, 0, len(recs))
	for _, r := range recs {
		j, field, err := jobFromRecord(r.values)
		if err != nil {
			skipped = append(skipped, &ParseError{Source: "squeue", Line: r.line, ID: idOf(r.values[0]), Field: field, Err: err})
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, skipped, nil
}

func jobFromRecord(r []string) (Job, string, error) {
	if !isJobID(r[0]) {
		return Job{}, "JobID", fmt.Errorf("not a job id: %q", truncate(r[0]))
	}
	nodes, err := leadingInt(r[4])
	if err != nil {
		return Job{}, "NumNodes", err
	}
	cpus, err := leadingInt(r[5])
	if err != nil {
		return Job{}, "NumCPUs", err
	}
	if r[23] != "0" && r[23] != "1" {
		return Job{}, "Requeue", fmt.Errorf("not 0 or 1: %q", truncate(r[23]))
	}
	if !isDigits(r[25]) || len(r[25]) > 10 {
		return Job{}, "UserId", fmt.Errorf("not a numeric user id: %q", truncate(r[25]))
	}
	return Job{
		ID: r[0], Name: r[1], State: r[2], Partition: r[3], Nodes: nodes, CPUs: cpus,
		TRESPerNode: optional(r[6]), TRESPerJob: optional(r[7]), NodeList: optional(r[8]),
		Reason: r[9], StartTime: optionalTime(r[10]), StartUnset: unsetTime(r[10]), EndTime: optionalTime(r[11]),
		TimeLimit: r[12], SchedNodes: optional(r[13]), BatchHost: optional(r[14]),
		Comment: optional(r[15]), User: r[16], Account: optional(r[17]), WorkDir: optional(r[18]),
		ReqNodes: optional(r[19]), TRESPerTask: optional(r[20]), TRESPerSocket: optional(r[21]), TRESAlloc: optional(r[22]),
		Requeue: r[23] == "1", QOS: optional(r[24]), UID: r[25],
	}, "", nil
}

// isJobID reports whether s is a job id as squeue prints it: "12", "12_3"
// (array task), "12_[1-5%2]" (pending array), "12+0" (het component).
func isJobID(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "0123456789_+[]-,%") == ""
}

// leadingInt parses "4" and the "1-4" Slurm prints for a node range (giving 1).
func leadingInt(s string) (int, error) {
	head, _, _ := strings.Cut(s, "-")
	if !isDigits(head) {
		return 0, fmt.Errorf("not a count: %q", s)
	}
	n, err := strconv.Atoi(head)
	if err != nil {
		return 0, fmt.Errorf("not a count: %q: %w", s, err)
	}
	return n, nil
}

// optionalTime maps Slurm's "no time" spellings to "".
// unsetTime is the word s is when optionalTime drops it, else "".
func unsetTime(s string) string {
	if optionalTime(s) == "" {
		return s
	}
	return ""
}

func optionalTime(s string) string {
	switch s {
	case "N/A", "Unknown", "None", "NONE", "(null)":
		return ""
	}
	return s
}

// GPUs returns the GPUs the job asked for in total: its TRES-per-job GPU count
// (--gpus) or TRES-per-node GPUs times Nodes (--gres=gpu:N), whichever is more
// (a job may carry both, and Slurm then allocates the larger: a tester's job of
// --gpus=2 and --gres=gpu:4 on one node held 4). Errors are *ParseError from
// [ParseGRES].
func (j Job) GPUs() (int, error) {
	return gpusOf(j.TRESPerJob, j.TRESPerNode, j.Nodes)
}

func gpusOf(perJob, perNode string, nodes int) (int, error) {
	g, err := ParseGRES(perJob)
	if err != nil {
		return 0, err
	}
	job := GPUs(g)
	if g, err = ParseGRES(perNode); err != nil {
		return 0, err
	}
	n := GPUs(g)
	if nodes > 0 && n > MaxCount/nodes {
		return 0, fmt.Errorf("%d GPUs per node on %d nodes: %w", n, nodes, ErrBadCount)
	}
	return max(job, n*nodes), nil
}

// AllocatedGPUs returns the GPUs TRESAlloc lists (the untyped gres/gpu
// entry when there is one, else the typed entries summed, so that
// "gres/gpu=4,gres/gpu:v100=4" is 4), 0 when it lists none. Only a running
// job's figure is what it holds. Errors are *ParseError from [ParseGRES].
func (j Job) AllocatedGPUs() (int, error) {
	g, err := ParseGRES(j.TRESAlloc)
	if err != nil {
		return 0, err
	}
	typed := 0
	for _, e := range g {
		switch {
		case e.Name != "gpu":
		case e.Type == "":
			return e.Count, nil
		default:
			typed += e.Count
		}
	}
	return min(typed, MaxCount), nil
}

// Start returns StartTime as a time in loc (Slurm prints the local time of the
// command, so pass time.Local for live output). ok is false when there is no time.
func (j Job) Start(loc *time.Location) (t time.Time, ok bool, err error) {
	if j.StartTime == "" {
		return time.Time{}, false, nil
	}
	t, err = time.ParseInLocation(TimeLayout, j.StartTime, loc)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("start time of job %s: %w", j.ID, err)
	}
	return t, true, nil
}
