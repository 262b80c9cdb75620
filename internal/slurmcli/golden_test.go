package slurmcli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the parsers' output")

// recordedSeps returns the separators the squeue and sinfo recordings were
// made with (testdata/separators.txt: the field separator, then the record
// separator, one per line; TestRecord writes it).
func recordedSeps(t testing.TB) Separators {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "separators.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("testdata/separators.txt holds %q, want two lines", b)
	}
	return Separators{Field: f[0], Record: f[1]}
}

// squeueGolden is what the golden file of a squeue recording holds.
type squeueGolden struct {
	Jobs    []Job    `json:"jobs"`
	Skipped []string `json:"skipped,omitempty"`
}

// parseRecording parses one recorded file by its name's prefix.
func parseRecording(t testing.TB, name string, data []byte) (any, error) {
	switch {
	case strings.HasPrefix(name, "squeue"):
		jobs, skipped, err := ParseSqueue(data, recordedSeps(t))
		g := squeueGolden{Jobs: jobs}
		for _, s := range skipped {
			g.Skipped = append(g.Skipped, s.Error())
		}
		return g, err
	case strings.HasPrefix(name, "sinfo"):
		return ParseSinfo(data, recordedSeps(t))
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

func TestGoldenFilesRecordedFromSlurm2205(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in testdata (err %v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			v, err := parseRecording(t, filepath.Base(f), data)
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
