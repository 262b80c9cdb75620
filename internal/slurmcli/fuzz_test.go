package slurmcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func addRecordings(f *testing.F, glob string) {
	files, _ := filepath.Glob(filepath.Join("testdata", glob))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil {
			f.Add(b)
		}
	}
}

// FuzzParseSqueue: for any output, no panic, every job has a job id and no
// negative count, and the jobs and skipped records never outnumber the
// records the output could hold. For any user-set name and comment (the
// second and third inputs), a record printed with them parses back to
// exactly that job, and the job after it is still read: no text can forge a
// field or record boundary.
func FuzzParseSqueue(f *testing.F) {
	s := Separators{Field: "ESF0123456789abcdef0123456789abcdef", Record: "ESRfedcba9876543210fedcba9876543210"}
	files, _ := filepath.Glob(filepath.Join("testdata", "squeue*.txt"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b, "bad\x1fname\n", "es-extra parent=1")
		}
	}
	f.Add([]byte("1\x1f\x1f"), forgedOldRecord("7"), "\x1f\n")
	f.Add(delimited(s, squeueRow("1", "a", "b")), "ESF", "ESR\n")
	f.Fuzz(func(t *testing.T, data []byte, name, comment string) {
		for _, seps := range []Separators{s, recordedSeps(t)} {
			jobs, skipped, err := ParseSqueue(data, seps)
			if err != nil {
				continue
			}
			for _, j := range jobs {
				if !isJobID(j.ID) || j.Nodes < 0 || j.CPUs < 0 {
					t.Fatalf("bad job %+v", j)
				}
				_, _ = j.GPUs()
				_, _ = j.AllocatedGPUs()
			}
			if n := strings.Count(string(data), seps.Record) + 1; len(jobs)+len(skipped) > n {
				t.Fatalf("%d jobs and %d skipped from output with %d record separators", len(jobs), len(skipped), n-1)
			}
		}
		out := delimited(s, squeueRow("10", name, comment), squeueRow("11", "next", "(null)"))
		jobs, skipped, err := ParseSqueue(out, s)
		if strings.Contains(name+comment, s.Field) || strings.Contains(name+comment, s.Record) {
			return // the 128-bit secret itself: no user knows it
		}
		if err != nil || len(skipped) != 0 || len(jobs) != 2 || jobs[0].ID != "10" || jobs[0].Name != name ||
			jobs[0].Comment != optional(comment) || jobs[1].ID != "11" {
			t.Fatalf("name %q comment %q: jobs %+v skipped %v err %v", name, comment, jobs, skipped, err)
		}
	})
}

// FuzzParseSinfo: no panic; node names are unique and non-empty.
func FuzzParseSinfo(f *testing.F) {
	addRecordings(f, "sinfo*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ParseSinfo(data, recordedSeps(t))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if n.Name == "" || seen[n.Name] || len(n.Partitions) == 0 {
				t.Fatalf("bad node list %+v", nodes)
			}
			seen[n.Name] = true
		}
	})
}

// FuzzParseScontrol: no panic for either kind; every record has at least one key and
// keys are never empty.
func FuzzParseScontrol(f *testing.F) {
	addRecordings(f, "scontrol*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kind := range []Kind{KindJob, KindNode} {
			recs, err := ParseScontrol(data, kind)
			if err != nil {
				continue
			}
			for _, r := range recs {
				if len(r) == 0 || r[0].Key == "" {
					t.Fatalf("empty record %v", r)
				}
				_, _ = JobDetailOf(r)
				_, _ = NodeDetailOf(r)
			}
		}
	})
}

// FuzzParseGRES: no panic; counts are never negative; an accepted list re-parses to
// the same entries when printed back in Slurm's sinfo spelling.
func FuzzParseGRES(f *testing.F) {
	for _, s := range []string{"gres:gpu:v100:2", "gres/gpu:v100:2", "gpu:t4:4(S:0)", "cpu=1,gres/gpu=3", "gpu:v100:3(IDX:0-2),mps:100", "N/A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseGRES(s)
		if err != nil {
			return
		}
		for _, g := range list {
			if g.Count < 0 {
				t.Fatalf("negative count in %q: %+v", s, g)
			}
			back, err := ParseGRES(g.String())
			if err != nil || len(back) != 1 || back[0] != g {
				t.Fatalf("%q: entry %+v printed as %q re-parses to %+v, %v", s, g, g.String(), back, err)
			}
		}
	})
}

// FuzzParseReservations: for any output, no panic, and every reservation
// read has a name, a window that does not end before it starts, and only
// node names that are not empty.
func FuzzParseReservations(f *testing.F) {
	addRecordings(f, "scontrol-reservation*.txt")
	addRecordings(f, "slurm-24.11/scontrol-reservation*.txt")
	f.Add([]byte("ReservationName=x StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:00:00 Nodes=n[1-3,7]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseReservations(data, time.UTC)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Name == "" || r.End.Before(r.Start) {
				t.Fatalf("bad reservation %+v", r)
			}
			for _, n := range r.Nodes {
				if n == "" {
					t.Fatalf("reservation %+v names an empty node", r)
				}
			}
		}
	})
}
