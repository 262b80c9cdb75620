//go:build unix

package auth

import (
	"io/fs"
	"syscall"
)

// FileOwner returns the uid owning the file described by fi (from its
// stat); ok is false where the platform does not say.
func FileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
