package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOnceDryRunHasNoSideEffectsAndLogsOneLine(t *testing.T) {
	tests := []struct {
		name string
		// setup adds jobs to the fake cluster.
		setup     func(t *testing.T, f *fakeSlurm)
		wantGrows string
		// level is [log] level ("": the default, info).
		level string
		// extra is more of the file; warn what stderr must then say.
		extra, warn string
	}{
		{"an idle cluster with nothing to do still logs the cycle", func(*testing.T, *fakeSlurm) {}, "grows=0", "", "", ""},
		{"a growable job is only logged", func(t *testing.T, f *fakeSlurm) {
			ownJob(t, f.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10")))
		}, "grows=1", "", "", ""},
		{"at debug level the cycle's line is logged once too (a tester saw it twice)", func(*testing.T, *fakeSlurm) {}, "grows=0", "debug", "", ""},
		{"a setting that does nothing is logged as a warning, and the daemon runs", func(*testing.T, *fakeSlurm) {}, "grows=0", "",
			"[admit]\nrule = \"longest-left\"\nhorizon = \"kept\"\n", `[WARN]  easyscale-backfilld: configuration: path=`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "var", "lib", "easyscale", "backfill.db")
			cfg := filepath.Join(dir, "backfill.toml")
			text := "metrics_address = \"127.0.0.1:0\"\nstate_db = \"" + db + "\"\n"
			if tc.level != "" {
				text += "[log]\nlevel = \"" + tc.level + "\"\n"
			}
			text += tc.extra
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			fake := newFake(time.Now())
			tc.setup(t, fake)
			var stderr bytes.Buffer
			code := mainWith(context.Background(), []string{"--config", cfg, "--once", "--dry-run"}, &stderr, fake.runner())
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "var")); err == nil {
				t.Errorf("dry run created %s", filepath.Join(dir, "var"))
			}
			if got := fake.commands(""); len(got) != 0 {
				t.Errorf("dry run ran %v", got)
			}
			warned := strings.Contains(stderr.String(), "does nothing")
			if tc.warn != "" && (!warned || !strings.Contains(stderr.String(), tc.warn)) || tc.warn == "" && warned {
				t.Errorf("stderr %q; want a warning %q: %v", stderr.String(), tc.warn, tc.warn != "")
			}
			var done []string
			for _, line := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(line, "cycle done") {
					done = append(done, line)
				}
			}
			level := "[INFO]"
			if tc.level == "debug" {
				level = "[DEBUG]"
			}
			if len(done) != 1 || !strings.Contains(done[0], level) || !strings.Contains(done[0], tc.wantGrows) ||
				!strings.Contains(done[0], "dry_run=true") {
				t.Fatalf("cycle lines %q, want one %s line with %s and dry_run=true; stderr:\n%s", done, level, tc.wantGrows, stderr.String())
			}
		})
	}
}

func TestOnceRecordWritesTheCyclesSnapshotAndDecisions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "backfill.toml")
	if err := os.WriteFile(cfg, []byte("metrics_address = \"off\"\nstate_db = \""+filepath.Join(dir, "b.db")+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := newFake(time.Now())
	ownJob(t, fake.running("10", elasticComment, "n1", 1, time.Hour, rendezvous(t, "10")))
	rec := filepath.Join(dir, "cycle.json")
	var stderr bytes.Buffer
	if code := mainWith(context.Background(), []string{"--config", cfg, "--once", "--dry-run", "--record", rec}, &stderr, fake.runner()); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var got Recording
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Snapshot.Nodes) != 4 || len(got.Snapshot.Running) != 1 || len(got.Actions.Grows) != 1 || got.Actions.Grows[0].Job != "10" {
		t.Errorf("recorded %d nodes, %d running jobs, grows %+v; want the fake's 4 nodes, job 10 and its one grow",
			len(got.Snapshot.Nodes), len(got.Snapshot.Running), got.Actions.Grows)
	}
	if code := mainWith(context.Background(), []string{"--config", cfg, "--record", rec}, &stderr, fake.runner()); code != 2 {
		t.Errorf("--record without --once: exit %d, want 2", code)
	}
}

// ownJob makes j this process's user's, as the system's user database
// names it: the command's daemon checks that a job's rendezvous files
// (written by this process) are its user's.
func ownJob(t *testing.T, j *fakeJob) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skipf("no user name for uid %d: %v", os.Getuid(), err)
	}
	j.user = u.Username
}

// TestCheckConfigLoadsTheFileAlone: --check-config exits 0 for a valid
// file (naming the settings that do nothing) and 2 for a bad one, naming
// the key and the choices, without running Slurm's commands or creating
// the state database.
func TestCheckConfigLoadsTheFileAlone(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		code       int
		want       []string
	}{
		{"a valid file", "[admit]\nhorizon = \"contested\"\n", 0, []string{"configuration OK"}},
		{"a setting that does nothing is named", "[admit]\nrule = \"longest-left\"\nhorizon = \"kept\"\n", 0,
			[]string{"warning: admit.horizon = \"kept\" does nothing", "configuration OK"}},
		{"a bad value names the key and the choices", "[admit]\nhorizon = \"Contested\"\n", 2,
			[]string{`admit.horizon = "Contested": must be "contested", "returned" or "kept"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "var", "backfill.db")
			cfg := filepath.Join(dir, "backfill.toml")
			if err := os.WriteFile(cfg, []byte("state_db = \""+db+"\"\n"+tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			fake := newFake(time.Now())
			var stderr bytes.Buffer
			code := mainWith(context.Background(), []string{"--config", cfg, "--check-config"}, &stderr, fake.runner())
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q, want %q", stderr.String(), w)
				}
			}
			if got := fake.commands(""); len(got) != 0 {
				t.Errorf("--check-config ran %v", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "var")); err == nil {
				t.Errorf("--check-config created %s", filepath.Join(dir, "var"))
			}
		})
	}
}

// --help's text before the flags is wrapped for a terminal and says what
// the daemon does (a new user saw one 150-character line that named only
// growth).
func TestHelpIsWrappedAndNamesEveryAction(t *testing.T) {
	var out bytes.Buffer
	if rc := Main(context.Background(), []string{"--help"}, &out); rc != 0 {
		t.Fatalf("--help exited %d: %s", rc, out.String())
	}
	text, _, ok := strings.Cut(out.String(), "\nFlags:")
	if !ok {
		t.Fatalf("no Flags: section in %q", out.String())
	}
	for _, l := range strings.Split(text, "\n")[1:] { // the usage line lists the flags
		if n := len([]rune(l)); n > 84 {
			t.Errorf("line of %d characters: %q", n, l)
		}
	}
	for _, want := range []string{"idle GPUs", "shrinks them", "admit waiting jobs", "small", "contrib/backfill.toml"} {
		if !strings.Contains(text, want) {
			t.Errorf("--help does not say %q:\n%s", want, text)
		}
	}
}
