//go:build unix

package slurmjob

import "syscall"

// openNoFollow makes an open fail on a symbolic link.
const openNoFollow = syscall.O_NOFOLLOW
