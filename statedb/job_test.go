package statedb

import (
	"errors"
	"strings"
	"testing"
	"time"
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
