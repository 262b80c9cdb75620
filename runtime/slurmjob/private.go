package slurmjob

import (
	"fmt"
	"io"
	"os"
)

// maxRendezvousFile bounds what readOwnFile reads (bytes): an environment
// is at most a few hundred KiB (Linux caps a process's at about 2 MiB).
const maxRendezvousFile = 8 << 20

// readOwnFile reads the rendezvous file path (at most maxRendezvousFile
// bytes) when it is a regular file owned by this process's user that
// neither its group nor others may write: a rendezvous directory may sit
// in a shared working directory, and a file another user wrote there
// would choose the interpreter or the environment a worker of this user
// runs. os.ErrNotExist (wrapped) when there is none; otherwise an error
// naming the file and the fix.
func readOwnFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %v)", path, fi.Mode())
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
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
