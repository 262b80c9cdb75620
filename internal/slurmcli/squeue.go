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
}

// SqueueArgs returns the arguments of `squeue` whose output [ParseSqueue] reads:
// no header, SqueueFields at unlimited width, each ending in 0x1F. Append filters
// such as "-j", "12" or "--start" (pending jobs with their planned start).
func SqueueArgs() []string {
	return []string{"--noheader", "--Format=" + formatArg(SqueueFields)}
}

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
	EndTime     string `json:"end_time,omitempty"`
	TimeLimit   string `json:"time_limit"`
	SchedNodes  string `json:"sched_nodes,omitempty"` // nodes backfill plans for a pending job
	BatchHost   string `json:"batch_host,omitempty"`
	Comment     string `json:"comment,omitempty"`
}

// ParseSqueue parses the output of `squeue` run with [SqueueArgs]. Errors are
// *ParseError with Source "squeue".
func ParseSqueue(out []byte) ([]Job, error) {
	recs, err := splitRecords("squeue", out, SqueueFields)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(recs))
	for i, r := range recs {
		j, field, err := jobFromRecord(r)
		if err != nil {
			return nil, &ParseError{Source: "squeue", Line: i + 1, Field: field, Err: err}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func jobFromRecord(r []string) (Job, string, error) {
	nodes, err := leadingInt(r[4])
	if err != nil {
		return Job{}, "NumNodes", err
	}
	cpus, err := leadingInt(r[5])
	if err != nil {
		return Job{}, "NumCPUs", err
	}
	if r[0] == "" {
		return Job{}, "JobID", fmt.Errorf("empty job id")
	}
	return Job{
		ID: r[0], Name: r[1], State: r[2], Partition: r[3], Nodes: nodes, CPUs: cpus,
		TRESPerNode: optional(r[6]), TRESPerJob: optional(r[7]), NodeList: optional(r[8]),
		Reason: r[9], StartTime: optionalTime(r[10]), EndTime: optionalTime(r[11]),
		TimeLimit: r[12], SchedNodes: optional(r[13]), BatchHost: optional(r[14]),
		Comment: optional(r[15]),
	}, "", nil
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
func optionalTime(s string) string {
	switch s {
	case "N/A", "Unknown", "None", "NONE", "(null)":
		return ""
	}
	return s
}

// GPUs returns the GPUs the job asked for in total: its TRES-per-job GPU count if it
// has one (--gpus), else TRES-per-node GPUs times Nodes (--gres=gpu:N). Errors are
// *ParseError from [ParseGRES].
func (j Job) GPUs() (int, error) {
	return gpusOf(j.TRESPerJob, j.TRESPerNode, j.Nodes)
}

func gpusOf(perJob, perNode string, nodes int) (int, error) {
	g, err := ParseGRES(perJob)
	if err != nil {
		return 0, err
	}
	if n := GPUs(g); n > 0 {
		return n, nil
	}
	g, err = ParseGRES(perNode)
	if err != nil {
		return 0, err
	}
	return GPUs(g) * nodes, nil
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
