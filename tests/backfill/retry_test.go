package backfill

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
	"github.com/easyscale/easyscale-slurm/statedb/backfillstore"
)

// TestAJobWhoseExtraJobsSbatchRefusesIsNotTriedEveryCycle is issue 20 item
// 2 for refused submissions, on the lab: the daemon's extra.partition does
// not exist, so slurmctld refuses every extra job ("Invalid partition name
// specified"). With [retry] base 2s, max 4s, stop_after 3 and a cycle a
// second, the daemon runs sbatch for the job 3 times (at about 0, 2 and
// 6 s) and then stops growing it with one warning, instead of once a
// cycle; 10 more cycles run no sbatch for it.
func TestAJobWhoseExtraJobsSbatchRefusesIsNotTriedEveryCycle(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n3"}, partition: "es-no-such-partition",
		extra: "[retry]\nbase = \"2s\"\nmax = \"4s\"\nstop_after = 3"}
	d := startDaemon(t, l, s, "backfilld")
	e, _ := submitElastic(t, l, "es-req min=1 max=3 lw=4 d1", "-w", "n3", "--gres=gpu:t4:1", "-t", "5")
	cancelExtrasAtEnd(t, l, e.ID)
	count := func(msg string) int {
		n := 0
		for _, m := range logLines(t, d.log) {
			if s, _ := m["@message"].(string); strings.HasPrefix(s, msg) && m["job_id"] == e.ID {
				n++
			}
		}
		return n
	}
	took := waitFor(t, 30*time.Second, "the daemon to stop growing job "+e.ID, func() bool { return count("not growing job") > 0 })
	cycles := func() int { return len(logMessages(t, d.log, "cycle done")) }
	after := cycles()
	waitFor(t, 30*time.Second, "10 more cycles", func() bool { return cycles() >= after+10 })
	refused := count("submitting extra job failed")
	d.stop(syscall.SIGTERM)
	t.Logf("stopped %v after the job ran; %d refused sbatch runs", took.Round(time.Millisecond), refused)
	if refused != 3 || count("not growing job") != 1 {
		t.Errorf("%d refused sbatch runs and %d stop lines for job %s, want 3 and 1", refused, count("not growing job"), e.ID)
	}
	if n := len(extrasOf(t, l, e.ID)); n != 0 {
		t.Errorf("%d extra jobs in Slurm, want none", n)
	}
	db, err := backfillstore.Open(filepath.Join(s.dir, "backfill.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ds, err := db.Decisions(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, x := range ds {
		if x.Kind == "grow-failed" && x.Job == e.ID {
			failed++
			if !strings.Contains(x.Detail, "Invalid partition") {
				t.Errorf("grow-failed detail %q: want sbatch's refusal", x.Detail)
			}
		}
	}
	if failed != 3 {
		t.Errorf("%d grow-failed decisions for job %s, want 3", failed, e.ID)
	}
}

// logMessages returns the JSON log lines of path whose message starts with
// msg and that name no job.
func logMessages(t *testing.T, path, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range logLines(t, path) {
		if s, _ := m["@message"].(string); strings.HasPrefix(s, msg) && m["job_id"] == nil {
			out = append(out, m)
		}
	}
	return out
}
