package sqlitefile

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// networkFS maps statfs(2) f_type magic numbers of network and cluster
// filesystems to names. Sources: statfs(2) and linux/magic.h for NFS, SMB,
// CIFS, SMB2, Ceph, AFS, 9p; the Lustre (0x0BD00BD0), GPFS ("GPFS"),
// BeeGFS (0x19830326) and OrangeFS/PVFS2 (0x20030528) client sources. FUSE
// is not listed: it is as often local as remote.
var networkFS = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x01021997: "9p",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
	0x19830326: "beegfs",
	0x20030528: "orangefs",
}

// StatfsType returns the filesystem magic of path (statfs(2) f_type).
func StatfsType(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	// Type's width differs by architecture; the magic is 32-bit.
	return int64(uint32(st.Type)), nil
}

// CheckLocalFS refuses dir, with a *NetworkFSError, when it is on a network
// filesystem; statfs is a parameter (StatfsType) so tests can pretend to be
// on NFS.
func CheckLocalFS(dir string, statfs func(string) (int64, error)) error {
	magic, err := statfs(dir)
	if err != nil {
		return fmt.Errorf("checking filesystem of state directory %s: %w", dir, err)
	}
	if name, ok := networkFS[magic]; ok {
		return &NetworkFSError{Dir: dir, FS: name}
	}
	return nil
}
