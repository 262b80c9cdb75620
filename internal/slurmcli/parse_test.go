package slurmcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseGRES(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []GRES
		gpus int
	}{
		{"a typed per-node request from squeue counts its GPUs", "gres:gpu:v100:2", []GRES{{Name: "gpu", Type: "v100", Count: 2}}, 2},
		{"an untyped per-job request counts its GPUs", "gres:gpu:3", []GRES{{Name: "gpu", Count: 3}}, 3},
		{"sinfo's used GRES keeps the index detail", "gpu:v100:3(IDX:0-2)", []GRES{{Name: "gpu", Type: "v100", Count: 3, Detail: "IDX:0-2"}}, 3},
		{"an index list with commas stays one entry", "gpu:a100:2(IDX:0,2),mps:100", []GRES{{Name: "gpu", Type: "a100", Count: 2, Detail: "IDX:0,2"}, {Name: "mps", Count: 100}}, 2},
		{"a TRES string skips cpu, node and billing", "cpu=2,node=2,billing=2,gres/gpu=4", []GRES{{Name: "gpu", Count: 4}}, 4},
		{"a typed TRES entry keeps the type", "gres/gpu:t4=1", []GRES{{Name: "gpu", Type: "t4", Count: 1}}, 1},
		{"a name without count counts one", "gpu:v100", []GRES{{Name: "gpu", Type: "v100", Count: 1}}, 1},
		{"Slurm's null placeholder is no GRES", "(null)", nil, 0},
		{"N/A is no GRES", "N/A", nil, 0},
		{"types of several entries add up", "gpu:v100:2,gpu:t4:1", []GRES{{Name: "gpu", Type: "v100", Count: 2}, {Name: "gpu", Type: "t4", Count: 1}}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseGRES(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseGRES(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if n := GPUs(got); n != tc.gpus {
				t.Errorf("GPUs = %d, want %d", n, tc.gpus)
			}
		})
	}
}

func TestParseGRESRejectsBadInput(t *testing.T) {
	tests := []struct{ name, in string }{
		{"a negative TRES count is refused", "gres/gpu=-1"},
		{"a TRES count with letters is refused", "gres/gpu=4x"},
		{"too many colons are refused", "gpu:a:b:c:1"},
		{"an unclosed index list is refused", "gpu:v100:2(IDX:0-1"},
		{"an empty entry is refused", "gpu:1,,gpu:2"},
		{"a count too large for int is refused", "gres/gpu=99999999999999999999999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGRES(tc.in)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Source != "gres" {
				t.Fatalf("ParseGRES(%q) error = %v, want a *ParseError from gres", tc.in, err)
			}
		})
	}
}

func TestDelimitedErrorsNameLineAndField(t *testing.T) {
	ok := strings.Repeat("x\x1f", len(SqueueFields)-1)
	tests := []struct {
		name      string
		in        string
		line      int
		field     string
		sentinel  error
		wantRecds int
	}{
		{"a record cut short names the first missing field", "12\x1fname\x1f", 1, "State", ErrTruncatedRecord, 0},
		{"a separator inside the last field is caught", "1\x1f" + ok + "extra\x1f\n", 1, "Comment", ErrSeparatorInField, 0},
		{"the line number counts newlines inside names", "1\x1fa\nb\x1fR\x1fp\x1f1\x1f1\x1f" + strings.Repeat("\x1f", 10) + "\n" + "bad", 3, "JobID", ErrTruncatedRecord, 0},
		{"a non-numeric node count names NumNodes", "1\x1fn\x1fR\x1fp\x1fx\x1f1\x1f" + strings.Repeat("\x1f", 10) + "\n", 1, "NumNodes", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSqueue([]byte(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tc.line || pe.Field != tc.field || pe.Source != "squeue" {
				t.Errorf("got %s line %d field %s, want squeue line %d field %s", pe.Source, pe.Line, pe.Field, tc.line, tc.field)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("err = %v, want %v", err, tc.sentinel)
			}
		})
	}
}

func TestSqueueKeepsNewlinesInJobNames(t *testing.T) {
	in := "7\x1fline one\nline two\x1fRUNNING\x1fnormal\x1f1\x1f1\x1fgres:gpu:2\x1fN/A\x1fn1\x1fNone\x1f" +
		"2026-01-02T03:04:05\x1fN/A\x1f5:00\x1f(null)\x1fn1\x1fes step=1/4\x1f\n"
	jobs, err := ParseSqueue([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Name != "line one\nline two" || jobs[0].Comment != "es step=1/4" || jobs[0].EndTime != "" {
		t.Fatalf("got %+v", jobs)
	}
	start, ok, err := jobs[0].Start(time.UTC)
	if err != nil || !ok || !start.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("Start = %v %v %v", start, ok, err)
	}
}

func readRecording(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The recordings hold jobs with awkward names; check what matters by value, so a
// parser change that breaks them fails here even after a careless -update.
func TestRecordedJobsKeepNamesCommentsAndGPUs(t *testing.T) {
	jobs, err := ParseSqueue(readRecording(t, "squeue.txt"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Job{}
	for _, j := range jobs {
		byName[j.Name] = j
	}
	tests := []struct {
		name    string
		job     string
		gpus    int
		comment string
		state   string
	}{
		{"a name with spaces and --gpus=3 asks 3 GPUs per job", "my training job", 3, "", "RUNNING"},
		{"two nodes of gres gpu:v100:2 ask 4 GPUs and keep the status comment", "plain", 4, "es step=1/4 workers=3/8 d1", "RUNNING"},
		{"a 300-character name arrives whole", strings.Repeat("long-", 60), 0, "", "RUNNING"},
		{"a name with tab, pipe and '=' arrives whole", "tab\there|pipe x=y Foo=bar", 1, "", "RUNNING"},
		{"a pending job waiting for all nodes has no GPUs", "waits for all", 0, "", "PENDING"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, ok := byName[tc.job]
			if !ok {
				t.Fatalf("job %q not in recording", tc.job)
			}
			if g, err := j.GPUs(); err != nil || g != tc.gpus {
				t.Errorf("GPUs = %d, %v; want %d", g, err, tc.gpus)
			}
			if j.Comment != tc.comment || j.State != tc.state {
				t.Errorf("comment %q state %s, want %q %s", j.Comment, j.State, tc.comment, tc.state)
			}
		})
	}
}

func TestRecordedPendingJobsHavePlannedStartAndNodes(t *testing.T) {
	jobs, err := ParseSqueue(readRecording(t, "squeue-start.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 {
		t.Fatal("no pending jobs in recording")
	}
	for _, j := range jobs {
		if _, ok, err := j.Start(time.UTC); !ok || err != nil || j.SchedNodes == "" || j.State != "PENDING" {
			t.Errorf("job %s %q: start %q (%v) sched nodes %q state %s", j.ID, j.Name, j.StartTime, err, j.SchedNodes, j.State)
		}
	}
}

func TestRecordedScontrolJobsKeepFreeText(t *testing.T) {
	recs, err := ParseScontrol(readRecording(t, "scontrol-job.txt"), KindJob)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plain": "es step=1/4 workers=3/8 d1"}
	names := map[string]bool{}
	for _, r := range recs {
		d, err := JobDetailOf(r)
		if err != nil {
			t.Fatal(err)
		}
		names[d.Name] = true
		if c, ok := want[d.Name]; ok && d.Comment != c {
			t.Errorf("job %s comment %q, want %q", d.Name, d.Comment, c)
		}
		if user, _ := r.Get("UserId"); user != "root(0)" {
			t.Errorf("job %s UserId %q: the name swallowed the next field", d.Name, user)
		}
	}
	for _, n := range []string{"tab\there|pipe x=y Foo=bar", "my training job", strings.Repeat("long-", 60)} {
		if !names[n] {
			t.Errorf("job name %q not parsed whole; names: %v", n, names)
		}
	}
}

func TestRecordedDrainedNodeIsReported(t *testing.T) {
	nodes, err := ParseSinfo(readRecording(t, "sinfo-drained.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := DrainedNodes(nodes); !reflect.DeepEqual(got, []string{"n4"}) {
		t.Errorf("DrainedNodes = %v, want [n4]", got)
	}
	healthy, err := ParseSinfo(readRecording(t, "sinfo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := DrainedNodes(healthy); len(got) != 0 {
		t.Errorf("healthy cluster: DrainedNodes = %v", got)
	}
	types := map[string]int{}
	for _, n := range healthy {
		total, _ := n.GPUs()
		for _, g := range n.GRES {
			types[g.Type] += total
		}
		if !reflect.DeepEqual(n.Partitions, []string{"normal", "low"}) || n.Default != "normal" {
			t.Errorf("node %s partitions %v default %q", n.Name, n.Partitions, n.Default)
		}
	}
	if !reflect.DeepEqual(types, map[string]int{"v100": 8, "t4": 8}) {
		t.Errorf("GPUs by type = %v, want 8 v100 and 8 t4", types)
	}
	recs, err := ParseScontrol(readRecording(t, "scontrol-node-drained.txt"), KindNode)
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	d, err := NodeDetailOf(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !d.Drained() || !strings.HasPrefix(d.Reason, "lab test: drained by TestRecord") || d.Port != 16814 {
		t.Errorf("drained node detail %+v", d)
	}
}

func TestRecordedNodeOSWithSpacesStaysOneValue(t *testing.T) {
	recs, err := ParseScontrol(readRecording(t, "scontrol-node.txt"), KindNode)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		os, _ := r.Get("OS")
		mem, ok := r.Get("RealMemory")
		if !strings.HasPrefix(os, "Linux ") || strings.Contains(os, "RealMemory") || !ok || mem != "16000" {
			t.Errorf("OS %q RealMemory %q", os, mem)
		}
	}
}

func TestScontrolRejectsLinesWithoutKey(t *testing.T) {
	_, err := ParseScontrol([]byte("JobId=1 JobName=a\n  garbage here\n"), KindJob)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Source != "scontrol show job" {
		t.Fatalf("err = %v, want scontrol show job line 2", err)
	}
}

func TestRunnerUsesFormatsAndReportsFailures(t *testing.T) {
	var calls [][]string
	r := Runner{Env: []string{"SLURM_CONF=/x"}, Exec: func(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
		calls = append(calls, append([]string{name}, args...))
		if name == "sbatch" {
			return []byte("42;lab\n"), nil
		}
		return nil, &CommandError{Command: name, Stderr: "slurm_load_jobs error: Invalid job id specified", Err: errors.New("exit status 1")}
	}}
	id, err := r.Sbatch(context.Background(), "job.sh", "-N2")
	if err != nil || id != "42" {
		t.Fatalf("Sbatch = %q, %v", id, err)
	}
	if want := []string{"sbatch", "--parsable", "-N2", "job.sh"}; !reflect.DeepEqual(calls[0], want) {
		t.Errorf("sbatch args %q, want %q", calls[0], want)
	}
	if _, err := r.Job(context.Background(), "7"); !errors.Is(err, ErrNoSuchJob) {
		t.Errorf("Job of unknown id: %v, want ErrNoSuchJob", err)
	}
	if got := calls[1]; got[0] != "squeue" || !strings.HasPrefix(got[2], "--Format=JobID:0\x1f,") {
		t.Errorf("squeue args %q", got)
	}
}
