package slurmcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
		{"a count above MaxCount is refused (two such summed wrapped negative)", "gres:gpu:4611686018427387904,gres:gpu:4611686018427387904"},
		{"a TRES count above MaxCount is refused", "gres/gpu=1073741825"},
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

// A job's GPUs are per job, else per node times its nodes; a product beyond
// MaxCount is an error, never a wrapped count.
func TestJobGPUsNeverWraps(t *testing.T) {
	tests := []struct {
		name    string
		j       Job
		want    int
		wantErr bool
	}{
		{name: "per job", j: Job{TRESPerJob: "gres:gpu:3", Nodes: 2}, want: 3},
		{name: "per node times nodes", j: Job{TRESPerNode: "gres:gpu:v100:4", Nodes: 2}, want: 8},
		// A tester's job: --gpus=2 and --gres=gpu:t4:4 on one node held 4.
		{name: "both: the larger", j: Job{TRESPerJob: "gres:gpu:t4:2", TRESPerNode: "gres:gpu:t4:4", Nodes: 1}, want: 4},
		{name: "both, per job larger", j: Job{TRESPerJob: "gres:gpu:6", TRESPerNode: "gres:gpu:2", Nodes: 2}, want: 6},
		{name: "MaxCount per node on 2 nodes is refused", j: Job{TRESPerNode: "gres:gpu:1073741824", Nodes: 2}, wantErr: true},
		{name: "a huge node count is refused", j: Job{TRESPerNode: "gres:gpu:8", Nodes: 1 << 62}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.j.GPUs()
			if tc.wantErr {
				if !errors.Is(err, ErrBadCount) {
					t.Fatalf("GPUs() = %d, %v; want ErrBadCount", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("GPUs() = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// testSeps are fixed separators for hand-written output.
var testSeps = Separators{Field: "ESFtest", Record: "ESRtest"}

// delimited prints rows as squeue/sinfo do with s.format: values joined by
// s.Field, then s.Record and a newline.
func delimited(s Separators, rows ...[]string) []byte {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(strings.Join(r, s.Field) + s.Record + "\n")
	}
	return []byte(b.String())
}

// squeueRow returns a valid squeue record of job id with the given name and
// comment (user-set text).
func squeueRow(id, name, comment string) []string {
	return []string{id, name, "RUNNING", "normal", "1", "1", "gres:gpu:2", "N/A", "n1", "None",
		"2026-01-02T03:04:05", "N/A", "5:00", "(null)", "n1", comment, "alice", "(null)", "/home/alice", "",
		"N/A", "N/A", "cpu=1,node=1,billing=1,gres/gpu=2", "1", "normal", "1001"}
}

func TestDamagedSqueueRecordsAreSkippedNamingLineJobAndField(t *testing.T) {
	good := squeueRow("1", "ok", "(null)")
	badCount := squeueRow("7", "x", "(null)")
	badCount[4] = "many"
	badRequeue := squeueRow("9", "x", "(null)")
	badRequeue[23] = "yes"
	badUID := squeueRow("11", "x", "(null)")
	badUID[25] = "alice"
	tests := []struct {
		name  string
		out   []byte
		line  int
		id    string
		field string
		err   error
	}{
		{"a record with a field too few names the job and the last field it has",
			append(delimited(testSeps, squeueRow("5", "a", "b")[:19]), delimited(testSeps, good)...), 1, "5", "WorkDir", ErrFieldCount},
		{"a record with a field too many names the job and the last field",
			append(delimited(testSeps, append(squeueRow("6", "a", "b"), "extra")), delimited(testSeps, good)...), 1, "6", "UserId", ErrFieldCount},
		{"a non-numeric node count names NumNodes and the job", append(delimited(testSeps, good), delimited(testSeps, badCount)...), 2, "7", "NumNodes", nil},
		{"a Requeue other than 0 or 1 names Requeue and the job", append(delimited(testSeps, badRequeue), delimited(testSeps, good)...), 1, "9", "Requeue", nil},
		{"a UserId that is not a number names UserId and the job", append(delimited(testSeps, good), delimited(testSeps, badUID)...), 2, "11", "UserId", nil},
		{"the line number counts newlines inside names",
			append(delimited(testSeps, squeueRow("1", "a\nb", "c\nd")), []byte("8"+testSeps.Field+"cut short")...), 4, "8", "Name", ErrTruncatedRecord},
		{"an empty job id is skipped without a name", append(delimited(testSeps, squeueRow("", "a", "b")), delimited(testSeps, good)...), 1, "", "JobID", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs, skipped, err := ParseSqueue(tc.out, testSeps)
			if err != nil {
				t.Fatalf("ParseSqueue: %v, want the damaged record skipped", err)
			}
			if len(skipped) != 1 {
				t.Fatalf("skipped %v, want one record", skipped)
			}
			pe := skipped[0]
			if pe.Line != tc.line || pe.ID != tc.id || pe.Field != tc.field || pe.Source != "squeue" {
				t.Errorf("skipped %s line %d job %q field %s, want squeue line %d job %q field %s", pe.Source, pe.Line, pe.ID, pe.Field, tc.line, tc.id, tc.field)
			}
			if tc.err != nil && !errors.Is(pe, tc.err) {
				t.Errorf("skipped record error %v, want %v", pe, tc.err)
			}
			if tc.id != "" && !strings.Contains(pe.Error(), "job "+tc.id) {
				t.Errorf("message %q does not name job %s", pe.Error(), tc.id)
			}
			if len(jobs) != 1 || jobs[0].ID != "1" {
				t.Errorf("jobs %+v, want the readable job 1 kept", jobs)
			}
		})
	}
}

func TestOutputWithoutTheSeparatorsIsAnError(t *testing.T) {
	// What squeue prints when SQUEUE_FORMAT overrides the requested format.
	_, _, err := ParseSqueue([]byte("1 evil\x1fname\n"), testSeps)
	if !errors.Is(err, ErrNotDelimited) {
		t.Fatalf("err = %v, want ErrNotDelimited", err)
	}
	if jobs, skipped, err := ParseSqueue(nil, testSeps); err != nil || len(jobs)+len(skipped) != 0 {
		t.Fatalf("empty output: %v %v %v, want no jobs and no error", jobs, skipped, err)
	}
	if _, _, err := ParseSqueue(nil, Separators{Field: "1x", Record: "ESR"}); !errors.Is(err, errBadSeparators) {
		t.Fatalf("a separator starting with a digit (read as a width): %v, want errBadSeparators", err)
	}
}

// forgedOldRecord is a job name that forged a whole record in the 0x1F
// format used before per-call separators (issue 8): it closes its own record
// and injects job victim as an extra job of a parent that does not exist.
func forgedOldRecord(victim string) string {
	fake := squeueRow(victim, "es-extra-999999", "es-extra parent=999999")[:16]
	fake[3] = "low"
	return "x" + strings.Repeat("\x1f", 14) + "\x1f\n" + strings.Join(fake, "\x1f") + "\x1f\n0\x1fx"
}

func TestUserTextCannotForgeAFieldOrRecord(t *testing.T) {
	guess := Separators{Field: "ESF00000000000000000000000000000000", Record: "ESR00000000000000000000000000000000"}
	s, err := NewSeparators()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, text string }{
		{"one 0x1F", "bad\x1fname"},
		{"0x1F and newlines", "\x1f\n\x1f\n\n"},
		{"a whole record in the old 0x1F format for another job id", forgedOldRecord("4242")},
		{"a record with guessed separators", "x" + guess.Field + strings.Join(squeueRow("4242", "es-extra-1", "es-extra parent=1")[2:], guess.Field) + guess.Record + "\n4243" + guess.Field},
		{"the separators' prefixes", "ESF" + s.Field[:10] + "ESR\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := delimited(s, squeueRow("10", tc.text, tc.text), squeueRow("11", "next", "(null)"))
			jobs, skipped, err := ParseSqueue(out, s)
			if err != nil || len(skipped) != 0 {
				t.Fatalf("ParseSqueue: %v, skipped %v", err, skipped)
			}
			if len(jobs) != 2 || jobs[0].ID != "10" || jobs[0].Name != tc.text || jobs[0].Comment != tc.text || jobs[1].ID != "11" {
				t.Fatalf("got %+v, want job 10 with the text as name and comment, then job 11", jobs)
			}
		})
	}
}

func TestNewSeparatorsAreFreshAndUsable(t *testing.T) {
	a, err := NewSeparators()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSeparators()
	if a == b || a.Field == a.Record || len(a.Field) != 3+32 {
		t.Fatalf("separators %+v and %+v: want two fresh pairs of 128-bit tokens", a, b)
	}
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
}

func TestSqueueKeepsNewlinesInJobNames(t *testing.T) {
	row := squeueRow("7", "line one\nline two", "es step=1/4")
	jobs, skipped, err := ParseSqueue(delimited(testSeps, row), testSeps)
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
	}
	if len(jobs) != 1 || jobs[0].Name != "line one\nline two" || jobs[0].Comment != "es step=1/4" || jobs[0].EndTime != "" ||
		jobs[0].User != "alice" || jobs[0].Account != "" || jobs[0].WorkDir != "/home/alice" {
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
	jobs, skipped, err := ParseSqueue(readRecording(t, "squeue.txt"), recordedSeps(t))
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
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

// The recording holds nobody's hostile jobs (see TestRecord): each must stay one
// record with its exact text, and the job whose id the forged name names must keep
// its own fields.
func TestRecordedHostileJobsStayOneRecordEach(t *testing.T) {
	jobs, skipped, err := ParseSqueue(readRecording(t, "squeue.txt"), recordedSeps(t))
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
	}
	byID := map[string][]Job{}
	for _, j := range jobs {
		byID[j.ID] = append(byID[j.ID], j)
	}
	if len(jobs) != 12 || len(byID) != 12 {
		t.Fatalf("%d jobs with %d ids, want the 12 jobs TestRecord submitted, one record each", len(jobs), len(byID))
	}
	// The first job TestRecord submitted has the smallest id (the lab's
	// FirstJobId onwards); a forged record names it.
	first := jobs[0].ID
	for _, j := range jobs {
		if len(j.ID) < len(first) || len(j.ID) == len(first) && j.ID < first {
			first = j.ID
		}
	}
	if j := byID[first][0]; j.Name != "plain" || j.Partition != "normal" || j.User != "root" || j.Comment != "es step=1/4 workers=3/8 d1" {
		t.Errorf("job %s, whose id a forged record names, reads %+v", first, j)
	}
	want := map[string]struct{ comment, workDir string }{
		"bad\x1fname":          {"", "/tmp"},
		"two\x1f\nlines":       {"es-extra parent=1\x1f\n2\x1ffake", "/tmp"},
		forgedOldRecord(first): {"", "/tmp"},
		"hostile workdir":      {"", "/tmp/hostile\x1fdir\nfake"},
	}
	seen := 0
	for _, j := range jobs {
		w, ok := want[j.Name]
		if !ok {
			continue
		}
		seen++
		if j.User != "nobody" || j.Comment != w.comment || j.WorkDir != w.workDir {
			t.Errorf("job %s %q: user %q comment %q work dir %q, want nobody %q %q", j.ID, j.Name, j.User, j.Comment, j.WorkDir, w.comment, w.workDir)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d hostile jobs found by their exact names", seen, len(want))
	}
}

func TestRecordedPendingJobsHavePlannedStartAndNodes(t *testing.T) {
	jobs, skipped, err := ParseSqueue(readRecording(t, "squeue-start.txt"), recordedSeps(t))
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
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
	nodes, err := ParseSinfo(readRecording(t, "sinfo-drained.txt"), recordedSeps(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := DrainedNodes(nodes); !reflect.DeepEqual(got, []string{"n4"}) {
		t.Errorf("DrainedNodes = %v, want [n4]", got)
	}
	healthy, err := ParseSinfo(readRecording(t, "sinfo.txt"), recordedSeps(t))
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
	var calls, envs [][]string
	r := Runner{Env: []string{"SLURM_CONF=/x", "SQUEUE_FORMAT=%i"}, Exec: func(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
		calls = append(calls, append([]string{name}, args...))
		envs = append(envs, env)
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
	if got := calls[1]; got[0] != "squeue" || slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--Format") }) {
		t.Errorf("squeue args %q: want the format in the environment, not on the command line", got)
	}
	if f := envs[1]; !slices.Contains(f, "SLURM_CONF=/x") || slices.Contains(f, "SQUEUE_FORMAT=%i") ||
		!slices.ContainsFunc(f, func(e string) bool { return strings.HasPrefix(e, "SQUEUE_FORMAT2=JobID:0ESF") }) {
		t.Errorf("squeue environment %q: want SLURM_CONF kept, SQUEUE_FORMAT removed, SQUEUE_FORMAT2 with random separators", f)
	}
	_, _ = r.Job(context.Background(), "7")
	if envs[1][len(envs[1])-1] == envs[2][len(envs[2])-1] {
		t.Errorf("two squeue calls used the same separators: %q", envs[1][len(envs[1])-1])
	}
}

// TestANameImitatingScontrolKeysForgesNoField: a job name that imitates
// `scontrol show job -o` text (another user, state, work dir) forges them
// there, which is why no caller reads jobs from scontrol; read by id from
// squeue (Runner.Job) the job keeps its true user, state and work dir and
// the name comes back exactly.
func TestANameImitatingScontrolKeysForgesNoField(t *testing.T) {
	names := []struct{ name, text string }{
		{"another user and group", "x UserId=root(0) GroupId=nobody(65534)"},
		{"another user, state and work dir", "x UserId=root(0) JobState=COMPLETED WorkDir=/root Comment=es-extra parent=1"},
		{"a newline and a second scontrol record", "x\nJobId=1 JobName=y UserId=root(0) JobState=RUNNING"},
	}
	for _, tc := range names {
		t.Run(tc.name, func(t *testing.T) {
			var squeueCalls int
			r := Runner{Env: []string{}, Exec: func(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
				squeueCalls++
				s := separatorsOf(t, env)
				row := squeueRow("10", tc.text, "(null)")
				return delimited(s, row), nil
			}}
			j, err := r.Job(context.Background(), "10")
			if err != nil {
				t.Fatal(err)
			}
			if j.User != "alice" || j.State != "RUNNING" || j.WorkDir != "/home/alice" || j.Name != tc.text || j.Comment != "" {
				t.Fatalf("Job(10) = user %q state %q work dir %q name %q comment %q; want alice, RUNNING, /home/alice, the exact name, no comment",
					j.User, j.State, j.WorkDir, j.Name, j.Comment)
			}
			if squeueCalls != 1 {
				t.Errorf("%d commands run, want one squeue", squeueCalls)
			}
		})
	}
	// The forgery that squeue's separators make impossible does work on scontrol's text.
	recs, err := ParseScontrol([]byte("JobId=10 JobName=x UserId=root(0) GroupId=nobody(65534) UserId=alice(1000) GroupId=alice(1000) JobState=RUNNING\n"), KindJob)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := recs[0].Get("UserId"); u != "root(0)" {
		t.Errorf("scontrol record's UserId = %q; the doc comment says a name can forge it (root(0)): update it", u)
	}
}

// separatorsOf returns the separators in the SQUEUE_FORMAT2 entry of env.
func separatorsOf(t *testing.T, env []string) Separators {
	t.Helper()
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "SQUEUE_FORMAT2="); ok {
			parts := strings.Split(v, ",")
			return Separators{
				Field:  strings.TrimPrefix(parts[0], SqueueFields[0]+":0"),
				Record: strings.TrimPrefix(parts[len(parts)-1], SqueueFields[len(SqueueFields)-1]+":0"),
			}
		}
	}
	t.Fatalf("no SQUEUE_FORMAT2 in the squeue environment %q", env)
	return Separators{}
}

// TestJobReportsOnlyItsOwnUnreadableRecord: Runner.Job fails naming the
// job when its own record cannot be read, and ignores another record's
// damage (an array task of the same id).
func TestJobReportsOnlyItsOwnUnreadableRecord(t *testing.T) {
	bad := func(id string) []string { r := squeueRow(id, "x", "(null)"); r[4] = "many"; return r }
	tests := []struct {
		name    string
		rows    [][]string
		wantErr bool
	}{
		{"its own record damaged", [][]string{bad("10")}, true},
		{"another record damaged", [][]string{bad("10_1"), squeueRow("10", "ok", "(null)")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Runner{Env: []string{}, Exec: func(_ context.Context, env []string, _ string, _ ...string) ([]byte, error) {
				return delimited(separatorsOf(t, env), tc.rows...), nil
			}}
			j, err := r.Job(context.Background(), "10")
			var pe *ParseError
			switch {
			case tc.wantErr && (!errors.As(err, &pe) || pe.ID != "10" || !strings.Contains(err.Error(), "job 10")):
				t.Fatalf("Job(10) = %+v, %v; want a *ParseError naming job 10", j, err)
			case !tc.wantErr && (err != nil || j.Name != "ok"):
				t.Fatalf("Job(10) = %+v, %v; want job 10 named ok", j, err)
			}
		})
	}
}

// TestSqueueAndSinfoIgnoreTheCallersFiltersAndTimeFormat: squeue and sinfo
// read filters (SQUEUE_USERS, SQUEUE_PARTITION, SQUEUE_NAMES, SINFO_PARTITION,
// ...) and SLURM_TIME_FORMAT from the environment. Set for the daemon (a
// profile, sudo -E), they hid jobs from Runner.Job (ErrNoSuchJob for a job
// that runs, measured on the lab with SQUEUE_USERS=nobody) and turned
// StartTime into "09:50:27" (SLURM_TIME_FORMAT=relative), which the daemon
// silently read as "no planned start": no reservation was seen. The
// commands must get none of those, and the standard time format.
func TestSqueueAndSinfoIgnoreTheCallersFiltersAndTimeFormat(t *testing.T) {
	caller := []string{"SLURM_CONF=/x", "SQUEUE_USERS=nobody", "SQUEUE_PARTITION=low", "SQUEUE_NAMES=zz", "SQUEUE_STATES=PENDING",
		"SQUEUE_ACCOUNT=a", "SQUEUE_QOS=q", "SQUEUE_SORT=-i", "SINFO_PARTITION=low", "SINFO_SORT=-N", "SLURM_TIME_FORMAT=relative"}
	tests := []struct {
		name string
		call func(r Runner) error
	}{
		{"squeue ListJobs", func(r Runner) error { _, _, err := r.ListJobs(context.Background()); return err }},
		{"squeue Job", func(r Runner) error { _, err := r.Job(context.Background(), "7"); return err }},
		{"sinfo", func(r Runner) error { _, err := r.Sinfo(context.Background()); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			r := Runner{Env: caller, Exec: func(_ context.Context, env []string, _ string, _ ...string) ([]byte, error) {
				got = env
				return nil, nil
			}}
			_ = tt.call(r)
			if !slices.Contains(got, "SLURM_CONF=/x") {
				t.Errorf("environment %q: SLURM_CONF dropped", got)
			}
			for _, e := range got {
				k, _, _ := strings.Cut(e, "=")
				if (strings.HasPrefix(k, "SQUEUE_") && k != "SQUEUE_FORMAT2") || strings.HasPrefix(k, "SINFO_") {
					t.Errorf("environment keeps the caller's %s: it filters or reorders what the daemon reads", e)
				}
			}
			if !slices.Contains(got, "SLURM_TIME_FORMAT=standard") {
				t.Errorf("environment %q: want SLURM_TIME_FORMAT=standard, the layout TimeLayout parses", got)
			}
		})
	}
}

func TestNodeDetailOfReadsWeightsAndNamesTheBadKey(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    NodeDetail
		wantErr string // "" when it parses
	}{
		{line: "NodeName=n1 Port=16811 Gres=gpu:v100:4 Weight=1", want: NodeDetail{Name: "n1", Port: 16811, Weight: 1,
			GRES: []GRES{{Name: "gpu", Type: "v100", Count: 4}}}},
		{line: "NodeName=n3 Gres=gpu:t4:4 Weight=4294967295", want: NodeDetail{Name: "n3", Weight: 4294967295,
			GRES: []GRES{{Name: "gpu", Type: "t4", Count: 4}}}},
		{line: "NodeName=n1 Gres=(null)", want: NodeDetail{Name: "n1"}},
		// a weight that does not read leaves it 0 and the rest of the record readable
		{line: "NodeName=n1 NodeAddr=10.0.0.1 Weight=heavy", want: NodeDetail{Name: "n1", Address: "10.0.0.1"}},
		{line: "NodeName=n1 Weight=-1", want: NodeDetail{Name: "n1"}},
		{line: "NodeName=n1 Weight=4294967296", want: NodeDetail{Name: "n1"}},
		{line: "NodeName=n1 Port=x", wantErr: "node n1: Port: "},
		{line: "NodeName=n1 Gres=gpu:v100:x", wantErr: "node n1: Gres: "},
		{line: "Arch=x86_64 Weight=1", wantErr: "no NodeName"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			recs, err := ParseScontrol([]byte(tc.line+"\n"), KindNode)
			if err != nil {
				t.Fatal(err)
			}
			d, err := NodeDetailOf(recs[0])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, tc.want) {
				t.Errorf("got %+v, want %+v", d, tc.want)
			}
		})
	}
}
