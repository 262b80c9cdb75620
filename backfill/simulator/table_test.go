package simulator

import (
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// runTable replays the job table table (a header line and its rows) under
// cfg and returns each job's record by id with the run's result; a table
// that does not read or a failed run fails the test.
func runTable(t *testing.T, table string, cfg Config) (map[string]JobRecord, Result) {
	t.Helper()
	jobs, err := trace.Read(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := make(map[string]JobRecord, len(res.PerJob))
	for _, r := range res.PerJob {
		recs[r.ID] = r
	}
	return recs, res
}

// twoTypes is the daemon's default configuration on v100 V100s and t4
// T4s in nodes of perNode GPUs, the T4 at t4Speed of a V100.
func twoTypes(v100, t4, perNode int, t4Speed float64) Config {
	cfg := DaemonDefaults()
	cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", v100}, {"t4", t4}}, perNode
	cfg.Speeds = map[string]float64{"v100": 1, "t4": t4Speed}
	return cfg
}
