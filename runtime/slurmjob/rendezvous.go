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

// CoordinatorFile is the rendezvous file holding the coordinator's HOST:PORT.
const CoordinatorFile = "coordinator"

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
