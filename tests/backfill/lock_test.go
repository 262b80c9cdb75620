package backfill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// TestASecondDaemonOnTheSameStateDBIsRefusedEvenWithoutTheLockFile: while
// one easyscale-backfilld runs, deleting its state_db's .lock file does not
// let a second one (`--once`, same config) in: it exits 1 naming the first
// daemon's PID, and the first goes on.
func TestASecondDaemonOnTheSameStateDBIsRefusedEvenWithoutTheLockFile(t *testing.T) {
	l := slurmlab.Require(t)
	s := settings{dir: t.TempDir(), nodes: []string{"n2"}}
	first := startDaemon(t, l, s, "first")
	waitFor(t, 20*time.Second, "a cycle of the first daemon", func() bool {
		for _, m := range logLines(t, first.log) {
			if m["@message"] == "cycle done" {
				return true
			}
		}
		return false
	})
	lock := filepath.Join(s.dir, "backfill.db.lock")
	if err := os.Remove(lock); err != nil {
		t.Fatalf("deleting the first daemon's lock file: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--config", filepath.Join(s.dir, "backfill.toml"), "--once")
	cmd.Env = append(append([]string{}, l.Env...), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second easyscale-backfilld --once with the lock file deleted: %v, want exit 1 (refused); output:\n%s", err, out)
	}
	holder := fmt.Sprintf("locked by process %d", first.cmd.Process.Pid)
	if !strings.Contains(string(out), holder) || !strings.Contains(string(out), "only one easyscale-backfilld") {
		t.Errorf("the refusal does not say %q and why:\n%s", holder, out)
	}
	if strings.Contains(string(out), "cycle done") {
		t.Errorf("the second daemon ran a cycle:\n%s", out)
	}
	select {
	case <-first.done:
		t.Fatalf("the first daemon stopped")
	default:
	}
}
