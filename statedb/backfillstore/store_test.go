package backfillstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"

	"golang.org/x/sys/unix"
)

func openBackfillTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "sub", "backfill.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestBackfillExtraRoundTripsAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := ExtraJob{ID: "12", Parent: "7", User: "alice", Partition: "low", Node: "n2", GPUType: "v100", GPUs: 2,
		Submitted: time.Unix(1700000000, 5), End: time.Unix(1700000600, 0), State: ExtraSubmitted,
		Name: "es-extra-7", Comment: "es-extra parent=7"}
	if err := db.RecordExtra(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("database file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer db.Close()
	got, err := db.Extra(ctx, "12")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Submitted.Equal(want.Submitted) || !got.End.Equal(want.End) {
		t.Errorf("times %v/%v, want %v/%v", got.Submitted, got.End, want.Submitted, want.End)
	}
	got.Submitted, got.End, want.Submitted, want.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
}

func TestBackfillExtraLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openBackfillTest(t)
	for _, id := range []string{"9", "10", "100"} {
		if err := db.RecordExtra(ctx, ExtraJob{ID: id, Parent: "1", Node: "n1", GPUs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	if err := db.MarkSignalled(ctx, "10", t1, "reservation of job 5"); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkSignalled(ctx, "10", t2, "reservation of job 5"); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkEnded(ctx, "9", t2, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	active, err := db.ActiveExtras(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 2 || active[0].ID != "10" || active[1].ID != "100" {
		t.Fatalf("active extras %+v, want 10 and 100 in numeric order", active)
	}
	if active[0].State != ExtraSignalled || !active[0].Signalled.Equal(t1) {
		t.Errorf("extra 10: state %s signalled %v, want signalled at the first signal %v", active[0].State, active[0].Signalled, t1)
	}
	if active[1].State != ExtraSubmitted {
		t.Errorf("extra 100 state %s, want the default %s", active[1].State, ExtraSubmitted)
	}
	if err := db.MarkSignalled(ctx, "9", t2, "late"); err != nil {
		t.Fatal(err)
	}
	if x, _ := db.Extra(ctx, "9"); x.State != ExtraEnded || x.Reason != "COMPLETED" {
		t.Errorf("signalling an ended extra changed it to %s %q", x.State, x.Reason)
	}
	all, err := db.Extras(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("Extras: %d records, %v; want 3", len(all), err)
	}
}

func TestBackfillErrors(t *testing.T) {
	ctx := context.Background()
	db := openBackfillTest(t)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"an extra job without a node is refused", db.RecordExtra(ctx, ExtraJob{ID: "1", Parent: "2"}), ErrInvalid},
		{"negative GPUs are refused", db.RecordExtra(ctx, ExtraJob{ID: "1", Parent: "2", Node: "n1", GPUs: -1}), ErrInvalid},
		{"a decision without a kind is refused", db.RecordDecision(ctx, Decision{Job: "1"}), ErrInvalid},
		{"signalling an unknown extra says so", db.MarkSignalled(ctx, "404", time.Now(), ""), ErrNoExtra},
		{"ending an unknown extra says so", db.MarkEnded(ctx, "404", time.Now(), ""), ErrNoExtra},
		{"reading an unknown extra says so", func() error { _, err := db.Extra(ctx, "404"); return err }(), ErrNoExtra},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("error %v, want one wrapping %v", tc.err, tc.want)
			}
		})
	}
}

// TestDeletingTheBackfillLockFileDoesNotLetASecondDaemonIn: the daemon's
// lock is held on the database file itself. With PATH.lock deleted, emptied
// or overwritten, a second Open is refused naming the first holder
// (this process), and the first still writes.
func TestDeletingTheBackfillLockFileDoesNotLetASecondDaemonIn(t *testing.T) {
	host, _ := os.Hostname()
	cases := []struct {
		name   string
		tamper func(path string) error
	}{
		{"the lock file deleted", os.Remove},
		{"the lock file deleted and recreated empty", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.WriteFile(p, nil, 0o600)
		}},
		{"the lock file overwritten with another holder", func(p string) error {
			return os.WriteFile(p, []byte("pid=1 host=elsewhere\n"), 0o600)
		}},
		// A helper's finding: the locks were taken on PATH.lock and
		// PATH.lock.lock, not on the database file; deleting both let a
		// second daemon in.
		{"every file beside the database whose name starts with the lock file's deleted", func(p string) error {
			others, err := filepath.Glob(p + "*")
			for _, o := range others {
				if err := os.Remove(o); err != nil {
					return err
				}
			}
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "backfill.db")
			first, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			if err := c.tamper(path + ".lock"); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
				t.Errorf("flock of the database file itself: %v, want it held by the first daemon (EWOULDBLOCK)", err)
			}
			f.Close()
			second, err := Open(path)
			if !errors.Is(err, ErrLocked) {
				if second != nil {
					second.Close()
				}
				t.Fatalf("second Open after %s: err = %v, want ErrLocked", c.name, err)
			}
			if want := fmt.Sprintf("process %d on host %q", os.Getpid(), host); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name the holder: %s", err, want)
			}
			if err := first.RecordDecision(context.Background(), Decision{Time: time.Now(), Kind: "skip", Job: "1"}); err != nil {
				t.Fatalf("first daemon after the refusal: %v", err)
			}
			first.Close()
			third, err := Open(path)
			if err != nil {
				t.Fatalf("Open after the first closed: %v", err)
			}
			third.Close()
		})
	}
}

func TestBackfillSecondOpenIsRefusedWhileTheFirstHoldsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	db2.Close()
}

func TestBackfillNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backfill.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.sql.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open: %v, want ErrSchemaTooNew", err)
	}
}

func TestBackfillDecisionsArePagedInOrder(t *testing.T) {
	ctx := context.Background()
	db := openBackfillTest(t)
	kinds := []string{"grow", "signal", "cancel", "adopt"}
	for i, k := range kinds {
		d := Decision{Time: time.Unix(int64(i+1), 0), Kind: k, Job: "7", Extra: "8", Node: "n1", GPUs: i, DryRun: i == 1, Detail: "x"}
		if err := db.RecordDecision(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	first, err := db.Decisions(ctx, 0, 2)
	if err != nil || len(first) != 2 {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	rest, err := db.Decisions(ctx, first[1].Seq, 0)
	if err != nil || len(rest) != 2 {
		t.Fatalf("second page: %+v, %v", rest, err)
	}
	got := append(first, rest...)
	for i, d := range got {
		if d.Kind != kinds[i] || d.GPUs != i || d.DryRun != (i == 1) || !d.Time.Equal(time.Unix(int64(i+1), 0)) {
			t.Errorf("decision %d = %+v, want kind %s", i, d, kinds[i])
		}
	}
}

// dirState lists a directory's files with their sizes and modification times.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprint(info.Size(), info.ModTime().UnixNano())
	}
	return out
}

func TestADryRunStoreLeavesTheDiskAlone(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup prepares dir and returns the state_db path and the extra
		// jobs the dry run must see.
		setup     func(t *testing.T, dir string) (string, []string)
		wantFiles bool
	}{
		{"a missing database is not created (nor its directory)", func(t *testing.T, dir string) (string, []string) {
			return filepath.Join(dir, "var", "backfill.db"), nil
		}, false},
		{"an existing database is read, not written", func(t *testing.T, dir string) (string, []string) {
			path := filepath.Join(dir, "backfill.db")
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.RecordExtra(ctx, ExtraJob{ID: "12", Parent: "7", Node: "n2", GPUs: 1}); err != nil {
				t.Fatal(err)
			}
			return path, []string{"12"}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, want := tc.setup(t, dir)
			before := dirState(t, filepath.Dir(path))
			db, err := OpenDryRun(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.RecordDecision(ctx, Decision{Kind: "grow", Job: "7", DryRun: true}); err != nil {
				t.Fatal(err)
			}
			if err := db.RecordExtra(ctx, ExtraJob{ID: "99", Parent: "7", Node: "n1"}); err != nil {
				t.Fatal(err)
			}
			xs, err := db.ActiveExtras(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, x := range xs {
				ids = append(ids, x.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(append(want, "99")) {
				t.Errorf("dry-run store holds %v, want the file's %v plus the new 99", ids, want)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if after := dirState(t, filepath.Dir(path)); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("directory changed: before %v, after %v", before, after)
			}
			if _, err := os.Stat(path); (err == nil) != tc.wantFiles {
				t.Errorf("database file exists=%v, want %v", err == nil, tc.wantFiles)
			}
		})
	}
}

func TestADryRunStoreReadsTheFileOfARunningDaemon(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "backfill.db")
	live, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.RecordExtra(ctx, ExtraJob{ID: "12", Parent: "7", Node: "n2", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDryRun(path)
	if err != nil {
		t.Fatalf("dry run beside the lock holder: %v", err)
	}
	defer db.Close()
	if x, err := db.Extra(ctx, "12"); err != nil || x.Parent != "7" {
		t.Fatalf("extra 12 in the dry-run copy: %+v, %v", x, err)
	}
	if err := live.RecordExtra(ctx, ExtraJob{ID: "13", Parent: "7", Node: "n2", GPUs: 1}); err != nil {
		t.Errorf("the daemon cannot write while a dry run has its copy: %v", err)
	}
}

func TestBackfillIntentsAreKeptUntilDeleted(t *testing.T) {
	ctx := context.Background()
	db := openBackfillTest(t)
	in := Intent{Parent: "7", User: "alice", Name: "es-extra-7", Comment: "es-extra parent=7", Partition: "low", Node: "n2",
		Lent: 20 * time.Minute, GPUs: 2, Time: time.Unix(1700000000, 0)}
	seq, err := db.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordIntent(ctx, Intent{Parent: "7"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an intent without user, name, comment, partition and node: %v, want ErrInvalid", err)
	}
	bad := in
	bad.Lent = -time.Second
	if _, err := db.RecordIntent(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("an intent lent for %v: %v, want ErrInvalid", bad.Lent, err)
	}
	got, err := db.Intents(ctx)
	in.Seq = seq
	if err != nil || len(got) != 1 || got[0] != in {
		t.Fatalf("Intents = %+v, %v; want [%+v]", got, err, in)
	}
	if err := db.DeleteIntent(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteIntent(ctx, seq); err != nil {
		t.Errorf("deleting a deleted intent: %v, want nil", err)
	}
	if got, err := db.Intents(ctx); err != nil || len(got) != 0 {
		t.Errorf("Intents after delete = %+v, %v", got, err)
	}
}

func TestBackfillVersion1FileIsMigratedKeepingItsExtras(t *testing.T) {
	ctx := context.Background()
	path := oldBackfillFile(t, 1,
		`INSERT INTO extras (`+extraColumnsV1+`) VALUES ('12','7','alice','n2','v100',2,'low',1,2,'submitted',0,0,'',0)`)
	dry, err := OpenDryRun(path)
	if err != nil {
		t.Fatalf("dry run of a version 1 file: %v", err)
	}
	if x, err := dry.Extra(ctx, "12"); err != nil || x.User != "alice" || x.Name != "" {
		t.Errorf("dry-run copy of a version 1 row: %+v, %v", x, err)
	}
	dry.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if x, err := db.Extra(ctx, "12"); err != nil || x.User != "alice" || x.Partition != "low" || x.Name != "" || x.Comment != "" {
		t.Errorf("version 1 row after migration: %+v, %v", x, err)
	}
	if _, err := db.RecordIntent(ctx, Intent{Parent: "7", User: "alice", Name: "n", Comment: "c", Partition: "low", Node: "n2"}); err != nil {
		t.Errorf("intents after migration: %v", err)
	}
}

// TestBackfillVersion8FileIsMigratedKeepingItsIntents: an extra job and a
// submission intent written by schema version 8 read back with no time
// lent and no GPUs in the intent (not known), from a dry-run copy and after
// the migration, and new rows keep them.
func TestBackfillVersion8FileIsMigratedKeepingItsIntents(t *testing.T) {
	ctx := context.Background()
	path := oldBackfillFile(t, 8,
		`INSERT INTO extras (`+extraColumnsV2+`) VALUES ('12','7','alice','n2','v100',2,'low',1,2,'submitted',0,0,'',0,'es-extra-7','c')`,
		`INSERT INTO intents (`+intentColumnsV2+`) VALUES (NULL,'7','alice','es-extra-7','c','low','n3',5)`)
	check := func(what string, db *DB) {
		t.Helper()
		if x, err := db.Extra(ctx, "12"); err != nil || x.Name != "es-extra-7" || x.Lent != 0 {
			t.Errorf("%s: version 8 extra %+v, %v; want it with no time lent", what, x, err)
		}
		in, err := db.Intents(ctx)
		if err != nil || len(in) != 1 || in[0].Node != "n3" || in[0].Lent != 0 || in[0].GPUs != 0 {
			t.Errorf("%s: version 8 intents %+v, %v; want one on n3, lent and GPUs unknown", what, in, err)
		}
	}
	db := checkDryRunThenMigrated(t, path, check)
	x := ExtraJob{ID: "13", Parent: "7", Node: "n2", GPUs: 1, Lent: 90 * time.Minute}
	if err := db.RecordExtra(ctx, x); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Extra(ctx, "13"); err != nil || got.Lent != x.Lent {
		t.Errorf("a new extra after the migration: %+v, %v; want lent %v", got, err, x.Lent)
	}
	if err := db.RecordExtra(ctx, ExtraJob{ID: "14", Parent: "7", Node: "n2", Lent: -time.Minute}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an extra lent for a negative time: %v, want ErrInvalid", err)
	}
}

// TestBackfillVersion9FileIsMigratedKeepingItsOwners opens a file of schema
// version 9, whose records name their owner only by the name squeue
// printed: the dry-run copy and the migrated file read every record with
// its UID unknown (""), and records written after the migration keep
// theirs.
func TestBackfillVersion9FileIsMigratedKeepingItsOwners(t *testing.T) {
	ctx := context.Background()
	path := oldBackfillFile(t, 9,
		`INSERT INTO extras (`+extraColumnsV9+`) VALUES ('12','7','alice','n2','v100',2,'low',1,2,'submitted',0,0,'',0,'es-extra-7','c',600)`,
		`INSERT INTO intents (`+intentColumnsV9+`) VALUES (NULL,'7','alice','es-extra-7','c','low','n3',5,600,2)`,
		`INSERT INTO admit_shrinks (`+admitColumnsV3+`) VALUES (NULL,'7','9','alice','normal',4,4,2,600,900,'done',5,'')`,
		`INSERT INTO started_small (job_id, user, from_nodes, to_nodes, old_limit_s, new_limit_s, at_ns, restored, gpus)
			VALUES ('8','bob',4,2,600,1200,5,0,8)`)
	check := func(what string, db *DB) {
		t.Helper()
		if x, err := db.Extra(ctx, "12"); err != nil || x.User != "alice" || x.UID != "" || x.Lent != 10*time.Minute {
			t.Errorf("%s: version 9 extra %+v, %v; want alice's, uid unknown, lent 10m", what, x, err)
		}
		if in, err := db.Intents(ctx); err != nil || len(in) != 1 || in[0].User != "alice" || in[0].UID != "" || in[0].GPUs != 2 {
			t.Errorf("%s: version 9 intents %+v, %v; want alice's, uid unknown, 2 GPUs", what, in, err)
		}
		if a, err := db.AdmitShrinks(ctx); err != nil || len(a) != 1 || a[0].User != "alice" || a[0].UID != "" || a[0].ToNodes != 2 {
			t.Errorf("%s: version 9 shrink-to-admit records %+v, %v; want alice's, uid unknown, to 2 nodes", what, a, err)
		}
	}
	db := checkDryRunThenMigrated(t, path, check)
	if ss, err := db.StartedSmallJobs(ctx); err != nil || ss["8"].User != "bob" || ss["8"].UID != "" || ss["8"].GPUs != 8 {
		t.Errorf("migrated: version 9 start-small records %+v, %v; want bob's, uid unknown", ss, err)
	}

	if err := db.RecordExtra(ctx, ExtraJob{ID: "13", Parent: "7", User: "alice", UID: "1001", Node: "n2", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if x, err := db.Extra(ctx, "13"); err != nil || x.UID != "1001" {
		t.Errorf("a new extra: %+v, %v; want uid 1001", x, err)
	}
	if _, err := db.RecordIntent(ctx, Intent{Parent: "7", User: "alice", UID: "1001", Name: "n", Comment: "c", Partition: "low", Node: "n4"}); err != nil {
		t.Fatal(err)
	}
	if in, err := db.Intents(ctx); err != nil || len(in) != 2 || in[1].UID != "1001" {
		t.Errorf("a new intent: %+v, %v; want uid 1001", in, err)
	}
	if _, err := db.RecordAdmitShrink(ctx, AdmitShrink{Job: "7", Queued: "10", User: "alice", UID: "1001", OrigNodes: 4, FromNodes: 2, ToNodes: 1}); err != nil {
		t.Fatal(err)
	}
	if a, err := db.AdmitShrinks(ctx); err != nil || len(a) != 2 || a[1].UID != "1001" {
		t.Errorf("a new shrink-to-admit record: %+v, %v; want uid 1001", a, err)
	}
	if err := db.PutStartedSmall(ctx, StartedSmall{Job: "8", User: "bob", UID: "1002", FromNodes: 4, ToNodes: 2, OldLimit: time.Minute, NewLimit: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ss, err := db.StartedSmallJobs(ctx); err != nil || ss["8"].UID != "1002" {
		t.Errorf("a replaced start-small record: %+v, %v; want uid 1002", ss, err)
	}
}

// oldBackfillFile writes a backfill database of schema version as a
// binary of that version left it (its migrations, its user_version) with
// rows, and returns its path.
func oldBackfillFile(t *testing.T, version int, rows ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backfill.db")
	s, err := sql.Open("sqlite3", sqlitefile.DSN(path, url.Values{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range append(append(slices.Clone(backfillMigrations[:version]), fmt.Sprintf("PRAGMA user_version = %d", version)), rows...) {
		if _, err := s.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}

// checkDryRunThenMigrated runs check on a dry-run copy of the file at path,
// then on the file opened (and so migrated), and returns the latter (closed
// when the test ends).
func checkDryRunThenMigrated(t *testing.T, path string, check func(what string, db *DB)) *DB {
	t.Helper()
	dry, err := OpenDryRun(path)
	if err != nil {
		t.Fatalf("dry run of %s: %v", path, err)
	}
	check("dry-run copy", dry)
	dry.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	check("migrated", db)
	return db
}
