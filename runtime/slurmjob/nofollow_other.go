//go:build !unix

package slurmjob

// openNoFollow is not available outside unix.
const openNoFollow = 0
