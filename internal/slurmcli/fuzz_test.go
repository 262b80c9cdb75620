package slurmcli

import (
	"os"
	"path/filepath"
	"testing"
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

// FuzzParseSqueue: no panic; every parsed job has an id; the count of records equals
// the jobs returned.
func FuzzParseSqueue(f *testing.F) {
	addRecordings(f, "squeue*.txt")
	f.Add([]byte("1\x1f\x1f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseSqueue(data)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == "" || j.Nodes < 0 || j.CPUs < 0 {
				t.Fatalf("bad job %+v", j)
			}
			_, _ = j.GPUs()
		}
	})
}

// FuzzParseSinfo: no panic; node names are unique and non-empty.
func FuzzParseSinfo(f *testing.F) {
	addRecordings(f, "sinfo*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ParseSinfo(data)
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
	for _, s := range []string{"gres:gpu:v100:2", "gpu:t4:4(S:0)", "cpu=1,gres/gpu=3", "gpu:v100:3(IDX:0-2),mps:100", "N/A"} {
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
