package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// A running elastic job is "ready" (its coordinator is up, so the daemon
// may grow, shrink or shed it) when its rendezvous directory
// WorkDir/.easyscale/JOBID holds its coordinator and token files. The
// working directory is the user's choice and may be writable by others
// (/tmp, a shared scratch or project directory), so existence is not
// enough: anyone could create those files for another user's job and make
// this root daemon act on it (a tester's attack, 3 December 2026). The
// runtime writes them as the job's owner, directories 0700 and files 0600
// (runtime/slurmjob PublishCoordinator, runtime/cluster ensureToken), and
// publishes the coordinator file anew at each run's start. So each of
// .easyscale, .easyscale/JOBID, coordinator and token must be owned by the
// job's user, not writable by group or others, and not a symbolic link (a
// directory or a regular file as the case may be), the token readable by
// its owner alone (as auth.LoadSecret demands), and the coordinator file no
// older than the job's current run (a renamed directory of an earlier job
// does not count). The files are examined with lstat only, never opened or
// read.

// rendezvousSlack is how much older than the run's start (Slurm prints it
// to the second) the coordinator file may be.
const rendezvousSlack = 2 * time.Second

// rendezvousFiles returns the coordinator and token files of the job whose
// rendezvous directory is dir (WorkDir/.easyscale/JOBID), owned by uid,
// whose current run started at start (zero: unknown, never ready). err
// says which rule the first failing path broke (fs.ErrNotExist wrapped
// when a file is missing); coord and token are returned when they exist
// whatever err is, for the job's status key.
func rendezvousFiles(dir string, uid uint32, start time.Time) (coord, token os.FileInfo, err error) {
	coord, errC := os.Lstat(filepath.Join(dir, "coordinator"))
	token, errT := os.Lstat(filepath.Join(dir, "token"))
	for _, c := range []struct {
		path string
		dir  bool
	}{{filepath.Dir(dir), true}, {dir, true}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			return coord, token, fmt.Errorf("rendezvous directory: %w", err)
		}
		if err := ownedBy(c.path, fi, uid, true, 0o022); err != nil {
			return coord, token, err
		}
	}
	if errC != nil {
		return coord, token, fmt.Errorf("coordinator file: %w", errC)
	}
	if errT != nil {
		return coord, token, fmt.Errorf("token file: %w", errT)
	}
	if err := ownedBy(filepath.Join(dir, "coordinator"), coord, uid, false, 0o022); err != nil {
		return coord, token, err
	}
	if err := ownedBy(filepath.Join(dir, "token"), token, uid, false, 0o077); err != nil {
		return coord, token, err
	}
	if start.IsZero() {
		return coord, token, errors.New("the job's start time is unknown, so the coordinator file's run cannot be told")
	}
	if coord.ModTime().Before(start.Add(-rendezvousSlack)) {
		return coord, token, fmt.Errorf("%s was written at %s, before this run of the job started (%s)",
			filepath.Join(dir, "coordinator"), coord.ModTime().UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	return coord, token, nil
}

// ownedBy checks that fi (of path, from lstat) is a directory (dir) or a
// regular file, owned by uid, with none of the permission bits in deny.
func ownedBy(path string, fi os.FileInfo, uid uint32, dir bool, deny fs.FileMode) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link", path)
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner known", path)
	}
	if st.Uid != uid {
		return fmt.Errorf("%s is owned by uid %d, not by the job's user (uid %d)", path, st.Uid, uid)
	}
	if fi.Mode().Perm()&deny != 0 {
		return fmt.Errorf("%s has mode %v: writable or readable by others", path, fi.Mode().Perm())
	}
	return nil
}

// systemUserID returns the uid of user name (os/user: the system's user
// database, NSS included); Snapshotter.UserID's default.
func systemUserID(name string) (uint32, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, fmt.Errorf("looking up the job's user %q: %w", name, err)
	}
	id, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("user %q has uid %q: %w", name, u.Uid, err)
	}
	return uint32(id), nil
}
