//go:build !unix

package slurmjob

import "io/fs"

// fileOwner is unknown outside unix; only the mode bits are checked there.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

// openNoFollow is not available outside unix.
const openNoFollow = 0
