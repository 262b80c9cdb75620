package slurmjob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Rendezvous files: the coordinator's HOST:PORT, and its exit status when
// it ends (the step's real outcome, which the batch script should return:
// srun also fails when Slurm killed tasks of released nodes).
const (
	CoordinatorFile = "coordinator"
	ExitCodeFile    = "exit-code"
)

// PublishCoordinator writes addr into dir/coordinator atomically (temp file
// and rename), so a reader never sees a partial address.
func PublishCoordinator(dir, addr string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the rendezvous directory: %w", err)
	}
	tmp := filepath.Join(dir, CoordinatorFile+".tmp")
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o600); err != nil {
		return fmt.Errorf("publishing the coordinator address: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, CoordinatorFile)); err != nil {
		return fmt.Errorf("publishing the coordinator address: %w", err)
	}
	return nil
}

// ErrStale marks a rendezvous file older than the caller accepts.
var ErrStale = errors.New("stale coordinator address")

// WaitCoordinator polls dir/coordinator until it holds a HOST:PORT written
// no earlier than notBefore (a file of a previous run of the job is
// ignored), or ctx ends.
func WaitCoordinator(ctx context.Context, dir string, notBefore time.Time) (string, error) {
	path := filepath.Join(dir, CoordinatorFile)
	for {
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
