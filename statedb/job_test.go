package statedb

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/statedb/internal/sqlitefile"
)

func TestInitJob(t *testing.T) {
	mnist := Job{ID: "aaaa", Name: "mnist", Spec: "[job]\nname='mnist'\n", LogicalWorkers: 8,
		Created: time.Unix(1700000000, 5).UTC()}
	charlm := Job{ID: "bbbb", Name: "charlm", Spec: "x", LogicalWorkers: 4}

	t.Run("a fresh directory stores the job and returns it", func(t *testing.T) {
		db := openTest(t, Options{})
		if _, err := db.Job(); !errors.Is(err, ErrNoJob) {
			t.Fatalf("Job before InitJob: err = %v, want ErrNoJob", err)
		}
		existing, err := db.InitJob(mnist)
		if err != nil || existing {
			t.Fatalf("InitJob = %v, %v; want false, nil", existing, err)
		}
		got, err := db.Job()
		if err != nil || got.ID != mnist.ID || got.Name != mnist.Name || got.Spec != mnist.Spec ||
			got.LogicalWorkers != 8 || !got.Created.Equal(mnist.Created) {
			t.Fatalf("Job() = %+v, %v; want %+v", got, err, mnist)
		}
	})
	t.Run("the same job again reports existing and keeps the first record", func(t *testing.T) {
		db := openTest(t, Options{})
		db.InitJob(mnist)
		again := mnist
		again.Created = time.Time{}
		existing, err := db.InitJob(again)
		if err != nil || !existing {
			t.Fatalf("InitJob again = %v, %v; want true, nil", existing, err)
		}
		if got, _ := db.Job(); !got.Created.Equal(mnist.Created) {
			t.Fatalf("Created changed to %v", got.Created)
		}
	})
	t.Run("another job is refused naming both jobs and the fix", func(t *testing.T) {
		db := openTest(t, Options{})
		db.InitJob(mnist)
		_, err := db.InitJob(charlm)
		var me *JobMismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrJobMismatch) {
			t.Fatalf("err = %v, want JobMismatchError", err)
		}
		for _, want := range []string{"mnist", "aaaa", "charlm", "bbbb", "--state"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message %q lacks %q", err, want)
			}
		}
		if got, _ := db.Job(); got.ID != mnist.ID {
			t.Fatalf("stored job changed to %+v", got)
		}
	})
	t.Run("a job without ID is invalid", func(t *testing.T) {
		db := openTest(t, Options{})
		if _, err := db.InitJob(Job{Name: "x", LogicalWorkers: 1}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
	t.Run("a job without logical workers is invalid", func(t *testing.T) {
		db := openTest(t, Options{})
		if _, err := db.InitJob(Job{ID: "x"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
}

func TestInitJobComparesTheTrainingData(t *testing.T) {
	images := DataFile{Name: "train-images-idx3-ubyte.gz", Size: 9912422, SHA256: strings.Repeat("a", 64)}
	labels := DataFile{Name: "train-labels-idx1-ubyte.gz", Size: 28881, SHA256: strings.Repeat("b", 64)}
	oneByte := images
	oneByte.SHA256 = strings.Repeat("c", 64)
	job := func(files ...DataFile) Job {
		return Job{ID: "aaaa", Name: "mnist", Spec: "{}", LogicalWorkers: 8, Data: files}
	}
	cases := []struct {
		name     string
		given    []DataFile
		wantFile string // "" = accepted
	}{
		{"the same files are the same job", []DataFile{images, labels}, ""},
		{"a changed file is refused naming it", []DataFile{oneByte, labels}, images.Name},
		{"a missing file is refused naming it", []DataFile{images}, labels.Name},
		{"an extra file is refused naming it", []DataFile{images, labels, {Name: "extra", Size: 1, SHA256: "d"}}, "extra"},
		{"no data at all is refused naming the first file", nil, images.Name},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.InitJob(job(images, labels)); err != nil {
				t.Fatal(err)
			}
			existing, err := db.InitJob(job(tc.given...))
			if tc.wantFile == "" {
				if err != nil || !existing {
					t.Fatalf("InitJob = %v, %v; want true, nil", existing, err)
				}
				return
			}
			var me *DataMismatchError
			if !errors.As(err, &me) || !errors.Is(err, ErrDataMismatch) || me.File != tc.wantFile {
				t.Fatalf("InitJob = %v; want a DataMismatchError naming %s", err, tc.wantFile)
			}
			for _, want := range []string{tc.wantFile, dir, "--state"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
			if got, _ := db.Job(); firstDataDifference(got.Data, []DataFile{images, labels}) >= 0 {
				t.Fatalf("stored data changed to %+v", got.Data)
			}
		})
	}
}

func TestAJobStoredBeforeDataWasRecordedAdoptsTheData(t *testing.T) {
	// A state directory written by a binary of schema version 1.
	dir := t.TempDir()
	raw, err := sql.Open("sqlite3", sqlitefile.DSN(filepath.Join(dir, DBFile), url.Values{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigration(raw, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO job (singleton, job_id, name, spec, logical_workers, created_ns) VALUES (1, 'aaaa', 'mnist', '{}', 2, 1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Job(); err != nil || got.Data != nil {
		t.Fatalf("Job() of the migrated directory = %+v, %v; want no data", got, err)
	}
	files := []DataFile{{Name: "t.txt", Size: 3, SHA256: strings.Repeat("e", 64)}}
	if existing, err := db.InitJob(Job{ID: "aaaa", Name: "mnist", LogicalWorkers: 2, Data: files}); err != nil || !existing {
		t.Fatalf("InitJob = %v, %v; want true, nil", existing, err)
	}
	db.Close()
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.Job(); err != nil || len(got.Data) != 1 || got.Data[0] != files[0] {
		t.Fatalf("Job() = %+v, %v; want the adopted data %+v", got, err, files)
	}
}

// TestAChangedJobRowIsRefused changes the job row behind statedb's back
// (its data_files emptied, which would make a resume adopt any data; its
// name): opening the job then fails naming the row, and nothing is adopted.
func TestAChangedJobRowIsRefused(t *testing.T) {
	for name, update := range map[string]string{
		"the training data emptied": `UPDATE job SET data_files = ''`,
		"the name changed":          `UPDATE job SET name = 'other'`,
		"the creation time changed": `UPDATE job SET created_ns = created_ns + 1`,
	} {
		t.Run(name, func(t *testing.T) {
			db := openTest(t, Options{})
			j := Job{ID: "sha256:ab", Name: "j", Spec: "{}", LogicalWorkers: 2, Created: time.Unix(5, 0),
				Data: []DataFile{{Name: "train.gz", Size: 3, SHA256: "aa"}}}
			if _, err := db.InitJob(j); err != nil {
				t.Fatal(err)
			}
			if _, err := db.sql.Exec(update); err != nil {
				t.Fatal(err)
			}
			other := j
			other.Data = []DataFile{{Name: "train.gz", Size: 3, SHA256: "bb"}}
			_, err := db.InitJob(other)
			var cr *CorruptRowError
			if !errors.As(err, &cr) || !errors.Is(err, ErrCorruptRow) || !strings.Contains(err.Error(), "the job row") {
				t.Fatalf("InitJob after %s: %v, want a CorruptRowError naming the job row", name, err)
			}
			if _, err := db.Job(); !errors.As(err, &cr) {
				t.Fatalf("Job after %s: %v, want a CorruptRowError", name, err)
			}
		})
	}
}
