package slurmjob

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// maxRendezvousFile bounds what readOwnFile reads (bytes): an environment
// is at most a few hundred KiB (Linux caps a process's at about 2 MiB).
const maxRendezvousFile = 8 << 20

// CheckPrivateDir checks that dir, a job's rendezvous directory, is one no
// other user can change: a real directory (not a symbolic link) owned by
// this process's user that neither its group nor others may write, in a
// parent that passes [CheckPrivateParent]. A rendezvous directory in
// a working directory other users may write would otherwise let them plant
// or swap the files that choose a worker's interpreter and environment, or
// read the environment through a planted link. The error names the path
// and the fix.
func CheckPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking the rendezvous directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("rendezvous directory %s is not a directory (mode %v): remove it, or set EASYSCALE_RENDEZVOUS_DIR to a directory of your own", dir, fi.Mode())
	}
	if uid, ok := auth.FileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("rendezvous directory %s belongs to uid %d, not to this user (uid %d): another user made it; remove it, or set EASYSCALE_RENDEZVOUS_DIR to a directory of your own", dir, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("rendezvous directory %s may be written by its group or others (mode %v): chmod 700 it", dir, fi.Mode().Perm())
	}
	return CheckPrivateParent(filepath.Dir(dir))
}

// CheckPrivateParent checks that parent, the directory holding a
// rendezvous directory (.easyscale by default), is a real directory (not a
// symbolic link) owned by this process's user or root that only its owner
// may write, or that has the sticky bit: no other user can move the
// rendezvous directory away and put one of theirs in its place. The error
// names the path and the fix.
func CheckPrivateParent(parent string) error {
	pi, err := os.Lstat(parent)
	if err != nil {
		return fmt.Errorf("checking the rendezvous directory's parent: %w", err)
	}
	if !pi.IsDir() {
		return fmt.Errorf("the rendezvous directory's parent %s is not a directory (mode %v): remove it, or set EASYSCALE_RENDEZVOUS_DIR to a directory in a private directory of your own", parent, pi.Mode())
	}
	if uid, ok := auth.FileOwner(pi); ok && uid != os.Getuid() && uid != 0 {
		return fmt.Errorf("the rendezvous directory's parent %s belongs to uid %d, neither this user (uid %d) nor root: it could swap the job's files; remove it, or set EASYSCALE_RENDEZVOUS_DIR to a directory in a private directory of your own", parent, uid, os.Getuid())
	}
	if pi.Mode().Perm()&0o022 != 0 && pi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("the rendezvous directory's parent %s may be written by its group or others (mode %v) and is not sticky: set EASYSCALE_RENDEZVOUS_DIR to a directory in a private directory of your own", parent, pi.Mode().Perm())
	}
	return nil
}

// readOwnFile reads the rendezvous file path (at most maxRendezvousFile
// bytes) when its directory passes [CheckPrivateDir] and it is a regular
// file, not a symbolic link, owned by this process's user that neither its
// group nor others may write: a file another user wrote would choose the
// interpreter or the environment a worker of this user runs.
// os.ErrNotExist (wrapped) when there is none; otherwise an error naming
// the file and the fix.
func readOwnFile(path string) ([]byte, error) {
	// A missing file is not an error, and its directory is then not
	// checked: `easyscale worker` also reads a local run's state directory
	// (easyscale run --procs), which may sit in any directory.
	if _, err := os.Lstat(path); err != nil {
		return nil, err
	}
	if err := CheckPrivateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s (a symbolic link is refused): %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %v)", path, fi.Mode())
	}
	if uid, ok := auth.FileOwner(fi); ok && uid != os.Getuid() {
		return nil, fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): another user wrote it; remove it and rerun the job", path, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s may be written by its group or others (mode %v): chmod go-w it, or remove it and rerun the job", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRendezvousFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRendezvousFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxRendezvousFile)
	}
	return b, nil
}
