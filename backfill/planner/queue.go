package planner

import (
	"cmp"
	"fmt"
	"math"
)

// QueueOrder orders two jobs waiting for resources as shrink-to-admit and
// start-small consider them, like cmp.Compare: the earlier planned start
// first (Unix seconds; 0, none planned, after every planned one), then the
// lower job id, numeric ids by value ("9" before "10"). The first job in
// this order is the queue head: the job Slurm's backfill plans to start
// first.
func QueueOrder(aStart int64, aID string, bStart int64, bID string) int {
	planned := func(t int64) int64 {
		if t == 0 {
			return math.MaxInt64
		}
		return t
	}
	return cmp.Or(cmp.Compare(planned(aStart), planned(bStart)), cmp.Compare(jobOrder(aID), jobOrder(bID)))
}

// jobOrder pads a job id so that numeric ids compare by value.
func jobOrder(id string) string { return fmt.Sprintf("%020s", id) }
