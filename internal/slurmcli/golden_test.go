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

// parseRecording parses one recorded file by its name's prefix.
func parseRecording(name string, data []byte) (any, error) {
	switch {
	case strings.HasPrefix(name, "squeue"):
		return ParseSqueue(data)
	case strings.HasPrefix(name, "sinfo"):
		return ParseSinfo(data)
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
			v, err := parseRecording(filepath.Base(f), data)
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
