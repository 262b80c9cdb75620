package slurmjob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Rendezvous files: the coordinator's HOST:PORT, and its exit status when
// it ends (the step's real outcome, which the batch script should return:
// srun also fails when Slurm killed tasks of released nodes). Each is
// written twice: under its plain name (the newest run's, read by batch
// scripts and by extra jobs with `$(cat DIR/coordinator)`) and under
// [RunFile] for the run (SLURM_RESTART_COUNT) that wrote it, which is what
// the tasks of a step read: a requeued job's directory still holds the
// files of its earlier runs, and only the run's own name tells them apart
// without trusting clocks.
const (
	CoordinatorFile = "coordinator"
	ExitCodeFile    = "exit-code"
)

// RunFile is the name of rendezvous file name as written by run restart
// of the job: "coordinator.2" for the coordinator of the job's second
// requeue.
func RunFile(name string, restart int) string { return fmt.Sprintf("%s.%d", name, restart) }

// PublishCoordinator writes addr into dir/coordinator.RESTART and
// dir/coordinator, each atomically (temp file and rename), so a reader
// never sees a partial address.
func PublishCoordinator(dir, addr string, restart int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the rendezvous directory: %w", err)
	}
	for _, name := range []string{RunFile(CoordinatorFile, restart), CoordinatorFile} {
		if err := writeAtomic(filepath.Join(dir, name), addr+"\n"); err != nil {
			return fmt.Errorf("publishing the coordinator address: %w", err)
		}
	}
	return nil
}

// RecordExit writes the coordinator's exit status code into
// dir/exit-code.RESTART and dir/exit-code: the job's run restart has
// ended, and its workers, which poll [Ended], stop.
func RecordExit(dir string, restart, code int) error {
	for _, name := range []string{RunFile(ExitCodeFile, restart), ExitCodeFile} {
		if err := writeAtomic(filepath.Join(dir, name), fmt.Sprintf("%d\n", code)); err != nil {
			return fmt.Errorf("recording the exit status: %w", err)
		}
	}
	return nil
}

// Ended reports whether the coordinator of run restart has ended, and
// with which exit status (-1 when the file does not hold a number).
func Ended(dir string, restart int) (code int, ended bool) {
	b, err := os.ReadFile(filepath.Join(dir, RunFile(ExitCodeFile, restart)))
	if err != nil {
		return 0, false
	}
	code, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1, true
	}
	return code, true
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ErrStale marks a rendezvous file older than the caller accepts.
var ErrStale = errors.New("stale coordinator address")

// ErrEnded is returned by [WaitCoordinator] when the coordinator of the
// run already ended (a requeued job that had finished ends at once).
var ErrEnded = errors.New("the coordinator of this run has ended")

// WaitCoordinator polls dir/coordinator.RESTART until it holds a HOST:PORT
// written no earlier than notBefore (a file of an earlier job with the same
// id is ignored), the run's coordinator has ended (an error wrapping
// ErrEnded), or ctx ends.
func WaitCoordinator(ctx context.Context, dir string, restart int, notBefore time.Time) (string, error) {
	path := filepath.Join(dir, RunFile(CoordinatorFile, restart))
	for {
		if code, ended := Ended(dir, restart); ended {
			return "", fmt.Errorf("%w (exit status %d in %s)", ErrEnded, code, filepath.Join(dir, RunFile(ExitCodeFile, restart)))
		}
		if fi, err := os.Stat(path); err == nil && !fi.ModTime().Before(notBefore) {
			b, err := os.ReadFile(path)
			if err == nil {
				addr := strings.TrimSpace(string(b))
				if _, _, err := net.SplitHostPort(addr); err != nil {
					return "", fmt.Errorf("%s holds %q, not HOST:PORT: %w", path, addr, err)
				}
				return addr, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the coordinator address in %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RetireStale moves an existing rendezvous directory aside when this is the
// job's first run (restartCount 0): it then belongs to an earlier job that
// had the same id (ids restart after a cluster is reset, and two clusters
// may share a filesystem). A requeued job (restartCount > 0) keeps it and
// resumes from its state. It returns the new name of the moved directory,
// or "" when nothing was moved.
func RetireStale(dir string, restartCount int, now time.Time) (string, error) {
	if restartCount > 0 {
		return "", nil
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("checking the rendezvous directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("rendezvous path %s is not a directory; remove it or set EASYSCALE_RENDEZVOUS_DIR", dir)
	}
	old := fmt.Sprintf("%s.old-%s", dir, now.UTC().Format("20060102T150405.000"))
	if err := os.Rename(dir, old); err != nil {
		return "", fmt.Errorf("moving the stale rendezvous directory %s aside: %w (remove it, or set EASYSCALE_RENDEZVOUS_DIR)", dir, err)
	}
	return old, nil
}
