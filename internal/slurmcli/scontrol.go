package slurmcli

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Field is one Key=Value pair of `scontrol show ... -o` output.
type Field struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Record is one line of `scontrol show job|node -o`: its fields in printed order.
type Record []Field

// Get returns the value of key and whether the record has it.
func (r Record) Get(key string) (string, bool) {
	for _, f := range r {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Kind selects the key set of a scontrol record.
type Kind int

// The kinds of scontrol records this package parses.
const (
	KindJob  Kind = iota // scontrol show job -o
	KindNode             // scontrol show node -o
	// KindReservation is scontrol show reservation -o.
	KindReservation
)

// jobKeys and nodeKeys are the keys Slurm 22.05.8 prints (recorded from the lab;
// see testdata). Inside a free-text value only these start a new field. Slurm
// 24.11.5 (testdata/slurm-24.11) prints none that 22.05 did not print right after
// a free-text key; it prints ReqTRES and AllocTRES instead of TRES, no Power,
// and, for nodes, no CapWatts and ExtSensors*.
var jobKeys = keySet(`JobId JobName UserId GroupId MCS_label Priority Nice Account QOS
JobState Reason Dependency Requeue Restarts BatchFlag Reboot ExitCode DerivedExitCode
RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime EndTime Deadline
PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval ResizeTime
Scheduler Partition AllocNode:Sid ReqNodeList ExcNodeList NodeList BatchHost SchedNodeList
NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES Socks/Node NtasksPerN:B:S:C CoreSpec
MinCPUsNode MinMemoryNode MinMemoryCPU MinTmpDiskNode Features DelayBoot OverSubscribe
Contiguous Licenses Network Command WorkDir AdminComment Comment StdErr StdIn StdOut
Power TresPerJob TresPerNode TresPerSocket TresPerTask CpusPerTres MemPerTres TresBind
TresFreq NtasksPerTRES HetJobId HetJobOffset HetJobIdSet ArrayJobId ArrayTaskId
ArrayTaskThrottle Reservation BurstBuffer BurstBufferState MailUser MailType
CPU_IDs Mem GRES Nodes Partitions KillOnInvalidDependent Container`)

var nodeKeys = keySet(`NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad
AvailableFeatures ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port
Version OS RealMemory AllocMem FreeMem Sockets Boards State ThreadsPerCore TmpDisk
Weight Owner MCS_label Partitions BootTime SlurmdStartTime LastBusyTime CfgTRES
AllocTRES CapWatts CurrentWatts AveWatts ExtSensorsJoules ExtSensorsWatts
ExtSensorsTemp Reason Comment Extra InstanceId InstanceType ResumeAfterTime`)

// reservationKeys are the keys of `scontrol show reservation -o`, as
// Slurm 22.05.8 prints them (testdata/scontrol-reservation.txt); only root
// and Slurm operators create reservations.
var reservationKeys = keySet(`ReservationName StartTime EndTime Duration Nodes NodeCnt
CoreCnt Features PartitionName Flags TRES Users Groups Accounts Licenses State
BurstBuffer Watts MaxStartDelay Comment`)

// freeText are keys whose values may hold spaces and "key=value"-looking text.
var freeText = keySet(`JobName Comment AdminComment Reason OS Command WorkDir StdErr StdIn StdOut Extra Features`)

func keySet(s string) map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(s) {
		m[k] = true
	}
	return m
}

// ParseScontrol parses `scontrol show job|node|reservation -o` output: one
// record per non-empty line. Values with spaces are not quoted by Slurm, so a token
// continues the previous value unless it is "Key=..." with Key looking like a Slurm
// key (capitalised); after a free-text key (JobName, Comment, Reason, OS, ...) only a
// key that Slurm 22.05 is known to print ends the value. Errors are *ParseError with
// Source "scontrol show job", "scontrol show node" or "scontrol show reservation".
//
// Unsafe for jobs whose names users set: a name such as
// "x UserId=root(0) JobState=COMPLETED WorkDir=/elsewhere" reads back as those
// fields (the first occurrence of a key wins), and a newline in a name starts a
// forged record. Read jobs from squeue ([Runner.Job], [Runner.ListJobs]), whose
// random separators no user text can forge; KindNode text is set only by root and
// slurmd.
func ParseScontrol(out []byte, kind Kind) ([]Record, error) {
	source, known := "scontrol show job", jobKeys
	switch kind {
	case KindNode:
		source, known = "scontrol show node", nodeKeys
	case KindReservation:
		source, known = "scontrol show reservation", reservationKeys
	}
	if trimmed := bytes.TrimSpace(out); bytes.HasPrefix(trimmed, []byte("No jobs in the system")) ||
		bytes.HasPrefix(trimmed, []byte("No reservations in the system")) {
		return nil, nil
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), " \r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		rec, err := parseRecord(text, known)
		if err != nil {
			return nil, &ParseError{Source: source, Line: line, Field: "", Err: err}
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Source: source, Line: line + 1, Err: err}
	}
	return recs, nil
}

func parseRecord(text string, known map[string]bool) (Record, error) {
	var rec Record
	for _, tok := range strings.Split(text, " ") {
		key, val, isPair := strings.Cut(tok, "=")
		startsField := isPair && looksLikeKey(key)
		if startsField && len(rec) > 0 && freeText[rec[len(rec)-1].Key] {
			startsField = known[key]
		}
		switch {
		case startsField:
			rec = append(rec, Field{Key: key, Value: val})
		case len(rec) == 0:
			return nil, fmt.Errorf("line does not start with Key=Value: %q", truncate(tok))
		case tok == "":
			rec[len(rec)-1].Value += " "
		default:
			rec[len(rec)-1].Value += " " + tok
		}
	}
	for i := range rec {
		rec[i].Value = strings.TrimRight(rec[i].Value, " ")
	}
	return rec, nil
}

// looksLikeKey: a capital letter, then letters, digits, '_', ':' or '/'.
func looksLikeKey(k string) bool {
	if k == "" || k[0] < 'A' || k[0] > 'Z' {
		return false
	}
	for _, c := range k {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// JobDetail is the part of a `scontrol show job -o` record the project's tests
// read from their own jobs (e.g. Restarts, which squeue does not print). Its
// fields can be forged by the job's name (see [ParseScontrol]): nothing that
// acts on, or reports about, a job a user submitted reads it.
type JobDetail struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	Partition   string `json:"partition"`
	NodeList    string `json:"node_list,omitempty"`
	BatchHost   string `json:"batch_host,omitempty"`
	NumNodes    int    `json:"num_nodes"`
	NumCPUs     int    `json:"num_cpus"`
	TRES        string `json:"tres"`
	TRESPerNode string `json:"tres_per_node,omitempty"`
	TRESPerJob  string `json:"tres_per_job,omitempty"`
	Comment     string `json:"comment,omitempty"`
	Restarts    int    `json:"restarts"`
	// WorkDir is the job's working directory (where its rendezvous
	// directory .easyscale/<id> lives).
	WorkDir string `json:"work_dir,omitempty"`
}

// JobDetailOf picks the JobDetail fields out of a job record. A missing JobId or a
// non-numeric NumNodes, NumCPUs or Restarts is an error naming the key.
func JobDetailOf(r Record) (JobDetail, error) {
	get := func(k string) string { v, _ := r.Get(k); return v }
	d := JobDetail{
		ID: get("JobId"), Name: get("JobName"), State: get("JobState"), Reason: get("Reason"),
		Partition: get("Partition"), NodeList: optional(get("NodeList")), BatchHost: optional(get("BatchHost")),
		TRES: get("TRES"), TRESPerNode: get("TresPerNode"), TRESPerJob: get("TresPerJob"),
		Comment: optional(get("Comment")), WorkDir: optional(get("WorkDir")),
	}
	if _, ok := r.Get("TRES"); !ok {
		// 24.11 prints ReqTRES and AllocTRES where 22.05 printed TRES (allocated, once running)
		if d.TRES = optional(get("AllocTRES")); d.TRES == "" {
			d.TRES = get("ReqTRES")
		}
	}
	if d.ID == "" {
		return JobDetail{}, fmt.Errorf("job record: no JobId")
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"NumNodes", &d.NumNodes}, {"NumCPUs", &d.NumCPUs}, {"Restarts", &d.Restarts}} {
		v, ok := r.Get(f.key)
		if !ok {
			continue
		}
		n, err := leadingInt(v)
		if err != nil {
			return JobDetail{}, fmt.Errorf("job %s: %s: %w", d.ID, f.key, err)
		}
		*f.dst = n
	}
	return d, nil
}

// GPUs returns the job's GPUs in total, like [Job.GPUs].
func (d JobDetail) GPUs() (int, error) { return gpusOf(d.TRESPerJob, d.TRESPerNode, d.NumNodes) }

// NodeDetail is the part of a `scontrol show node -o` record the project uses.
type NodeDetail struct {
	Name       string   `json:"name"`
	State      string   `json:"state"` // "IDLE", "MIXED", "IDLE+DRAIN", ...
	Address    string   `json:"address"`
	Port       int      `json:"port"`
	GRES       []GRES   `json:"gres"`
	Partitions []string `json:"partitions"`
	Reason     string   `json:"reason,omitempty"`
	// Weight is the node's scheduling weight (slurm.conf(5) Weight=, 1 by
	// default, changed by `scontrol update NodeName= Weight=`): Slurm
	// allocates nodes of lower weight first. 0 when the record has none or
	// it is not a number from 0 to 2^32-1 (read leniently: the node's
	// address and state, which other callers need, still read).
	Weight int `json:"weight"`
}

// NodeDetailOf picks the NodeDetail fields out of a node record. A missing NodeName,
// a non-numeric Port or a bad Gres is an error naming the key.
func NodeDetailOf(r Record) (NodeDetail, error) {
	get := func(k string) string { v, _ := r.Get(k); return v }
	d := NodeDetail{Name: get("NodeName"), State: get("State"), Address: get("NodeAddr"), Reason: get("Reason")}
	if d.Name == "" {
		return NodeDetail{}, fmt.Errorf("node record: no NodeName")
	}
	if p := get("Port"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return NodeDetail{}, fmt.Errorf("node %s: Port: %w", d.Name, err)
		}
		d.Port = n
	}
	if n, err := strconv.ParseUint(get("Weight"), 10, 32); err == nil {
		d.Weight = int(n)
	}
	g, err := ParseGRES(get("Gres"))
	if err != nil {
		return NodeDetail{}, fmt.Errorf("node %s: Gres: %w", d.Name, err)
	}
	d.GRES = g
	if p := optional(get("Partitions")); p != "" {
		d.Partitions = strings.Split(p, ",")
	}
	return d, nil
}

// Drained reports whether the node state has DRAIN, DOWN or FAIL in it.
func (d NodeDetail) Drained() bool {
	for _, s := range strings.Split(d.State, "+") {
		switch strings.TrimRight(s, "*~#!%$@^-") {
		case "DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING":
			return true
		}
	}
	return false
}
