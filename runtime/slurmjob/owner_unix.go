//go:build unix

package slurmjob

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the uid owning the file described by fi.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// openNoFollow makes an open fail on a symbolic link.
const openNoFollow = syscall.O_NOFOLLOW
