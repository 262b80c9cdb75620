package slurmcli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the parsers' output")

// Where the recordings of each Slurm release are: Slurm 22.05.8 (Debian 12)
// in testdata itself, Slurm 24.11.5 (Debian 13, the current lab of
// tests/lab) in testdata/slurm-24.11, with the same file names.
const (
	recordings2205 = "testdata"
	recordings2411 = "testdata/slurm-24.11"
)

// recordedSeps returns the separators the 22.05 squeue and sinfo recordings
// were made with (see [recordedSepsIn]).
func recordedSeps(t testing.TB) Separators { return recordedSepsIn(t, recordings2205) }

// recordedSepsIn returns the separators the squeue and sinfo recordings in
// dir were made with (dir/separators.txt: the field separator, then the
// record separator, one per line; TestRecord writes it).
func recordedSepsIn(t testing.TB, dir string) Separators {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "separators.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("%s/separators.txt holds %q, want two lines", dir, b)
	}
	return Separators{Field: f[0], Record: f[1]}
}

// squeueGolden is what the golden file of a squeue recording holds.
type squeueGolden struct {
	Jobs    []Job    `json:"jobs"`
	Skipped []string `json:"skipped,omitempty"`
}

// parseRecording parses one recorded file of dir by its name's prefix.
func parseRecording(t testing.TB, dir, name string, data []byte) (any, error) {
	switch {
	case strings.HasPrefix(name, "partitions"):
		// sinfo --all -o PartitionFormat (TestRecordPartitions): MaxTime
		// set on normal and low, and a hidden partition of tier 5.
		return ParsePartitions(data), nil
	case strings.HasPrefix(name, "squeue"):
		jobs, skipped, err := ParseSqueue(data, recordedSepsIn(t, dir))
		g := squeueGolden{Jobs: jobs}
		for _, s := range skipped {
			g.Skipped = append(g.Skipped, s.Error())
		}
		return g, err
	case strings.HasPrefix(name, "sinfo"):
		return ParseSinfo(data, recordedSepsIn(t, dir))
	case strings.HasPrefix(name, "scontrol-job"):
		recs, err := ParseScontrol(data, KindJob)
		if err != nil {
			return nil, err
		}
		var out []JobDetail
		for _, r := range recs {
			d, err := JobDetailOf(r)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	case strings.HasPrefix(name, "scontrol-config"):
		return ParseSchedulerConfig(data)
	case strings.HasPrefix(name, "scontrol-reservation"):
		// the lab's slurmctld runs in UTC
		return ParseReservations(data, time.UTC)
	case strings.HasPrefix(name, "scontrol-node"):
		recs, err := ParseScontrol(data, KindNode)
		if err != nil {
			return nil, err
		}
		var out []NodeDetail
		for _, r := range recs {
			d, err := NodeDetailOf(r)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}
	return nil, nil
}

func TestGoldenFilesRecordedFromSlurm2205(t *testing.T) { checkGoldenFiles(t, recordings2205) }

// The parsers read Slurm 24.11's output as they read 22.05's: same commands,
// same --Format fields and scontrol keys (recorded from the current lab:
// EASYSCALE_LAB_CURRENT=1, see testdata/slurm-24.11/README.md).
func TestGoldenFilesRecordedFromSlurm2411(t *testing.T) { checkGoldenFiles(t, recordings2411) }

// checkGoldenFiles parses every recording dir/*.txt and compares the result
// with dir/*.golden.json (rewritten with -update).
func checkGoldenFiles(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s (err %v)", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v, err := parseRecording(t, dir, filepath.Base(f), data)
			if err != nil {
				t.Fatalf("parsing a real recording: %v", err)
			}
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".txt") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the parse of %s; got:\n%s", golden, f, got)
			}
		})
	}
}

// TestRecord submits the same jobs to each release: read from either
// release's recordings, they ask for the same GPUs (squeue and scontrol show
// job), and the nodes have the same GRES (sinfo and scontrol show node). 22.05
// spells a GPU request "gres:gpu:v100:2", 24.11 "gres/gpu:v100:2".
func TestBothReleasesReadAsTheSameRequests(t *testing.T) {
	read := func(dir, name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	squeueGPUs := func(dir string) map[string]int {
		jobs, _, err := ParseSqueue(read(dir, "squeue.txt"), recordedSepsIn(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, j := range jobs {
			n, err := j.GPUs()
			if err != nil {
				t.Errorf("%s: squeue job %s (%q): %v", dir, j.ID, j.Name, err)
			}
			m[j.Name] = n
		}
		return m
	}
	scontrolGPUs := func(dir string) map[string]int {
		recs, err := ParseScontrol(read(dir, "scontrol-job.txt"), KindJob)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, r := range recs {
			d, err := JobDetailOf(r)
			if err != nil {
				t.Fatal(err)
			}
			n, err := d.GPUs()
			if err != nil {
				t.Errorf("%s: scontrol job %s (%q): %v", dir, d.ID, d.Name, err)
			}
			if d.TRES == "" {
				t.Errorf("%s: scontrol job %s (%q): no TRES", dir, d.ID, d.Name)
			}
			m[d.Name] = n
		}
		return m
	}
	sinfoGRES := func(dir string) map[string]string {
		nodes, err := ParseSinfo(read(dir, "sinfo.txt"), recordedSepsIn(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, n := range nodes {
			m[n.Name] = fmt.Sprint(n.GRES)
		}
		recs, err := ParseScontrol(read(dir, "scontrol-node.txt"), KindNode)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			d, err := NodeDetailOf(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(d.GRES); got != m[d.Name] {
				t.Errorf("%s: node %s: scontrol says GRES %s, sinfo %s", dir, d.Name, got, m[d.Name])
			}
		}
		return m
	}
	want := map[string]int{"plain": 4, "my training job": 3, "tab\there|pipe x=y Foo=bar": 1, "low prio": 1, "waits for all": 0}
	for _, c := range []struct {
		what string
		read func(dir string) map[string]int
	}{{"squeue", squeueGPUs}, {"scontrol show job", scontrolGPUs}} {
		old, cur := c.read(recordings2205), c.read(recordings2411)
		for name, n := range want {
			if old[name] != n || cur[name] != n {
				t.Errorf("%s: job %q asks for %d GPUs in 22.05 and %d in 24.11, want %d", c.what, name, old[name], cur[name], n)
			}
		}
		for name, n := range old {
			if m, ok := cur[name]; ok && m != n {
				t.Errorf("%s: job %q asks for %d GPUs in 22.05 and %d in 24.11", c.what, name, n, m)
			}
		}
	}
	// --gpus-per-task=1 on 2 tasks: per task in tres-per-task (22.05
	// "gres:gpu:1", 24.11 "gres/gpu=1"), nothing per node or job, and 2 in
	// tres-alloc (a pending job's request); --no-requeue reads Requeue 0.
	for _, dir := range []string{recordings2205, recordings2411} {
		jobs, _, err := ParseSqueue(read(dir, "squeue.txt"), recordedSepsIn(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, j := range jobs {
			if j.Name == "plain" && !j.Requeue {
				t.Errorf("%s: job %q reads Requeue 0, want the lab's default (JobRequeue=1)", dir, j.Name)
			}
			if j.Name != "per task" {
				continue
			}
			found = true
			perTask, err := ParseGRES(j.TRESPerTask)
			alloc, aerr := j.AllocatedGPUs()
			if err != nil || GPUs(perTask) != 1 || aerr != nil || alloc != 2 {
				t.Errorf("%s: job %q: %d GPUs per task (%v), tres-alloc %d (%v); want 1 and 2", dir, j.Name, GPUs(perTask), err, alloc, aerr)
			}
			if j.Requeue {
				t.Errorf("%s: job %q, submitted --no-requeue, reads Requeue 1", dir, j.Name)
			}
		}
		if !found {
			t.Errorf("%s: no job \"per task\" in squeue.txt", dir)
		}
	}
	old, cur := sinfoGRES(recordings2205), sinfoGRES(recordings2411)
	if fmt.Sprint(old) != fmt.Sprint(cur) {
		t.Errorf("node GRES differ:\n22.05 %v\n24.11 %v", old, cur)
	}
}

// TestBothReleasesPrintTheOwnersUID checks squeue's UserId on both
// releases' recordings: TestRecord submits as root and, with sbatch --uid,
// as nobody, so each job reads the uid of the name printed beside it
// (the daemon compares owners by it: a name squeue prints may be a
// stand-in, see Job.User).
func TestBothReleasesPrintTheOwnersUID(t *testing.T) {
	want := map[string]string{"root": "0", "nobody": "65534"}
	for _, dir := range []string{recordings2205, recordings2411} {
		for _, f := range []string{"squeue.txt", "squeue-start.txt"} {
			jobs, skipped, err := ParseSqueue(readFile(t, filepath.Join(dir, f)), recordedSepsIn(t, dir))
			if err != nil || len(skipped) > 0 {
				t.Fatalf("%s/%s: %v %v", dir, f, err, skipped)
			}
			users := map[string]bool{}
			for _, j := range jobs {
				users[j.User] = true
				if w, ok := want[j.User]; !ok || j.UID != w {
					t.Errorf("%s/%s: job %s of %q reads uid %q, want %q", dir, f, j.ID, j.User, j.UID, w)
				}
			}
			if f == "squeue.txt" && (!users["root"] || !users["nobody"]) {
				t.Errorf("%s/%s: users %v, want jobs of root and nobody", dir, f, users)
			}
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
