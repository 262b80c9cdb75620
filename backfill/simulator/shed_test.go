package simulator

import "testing"

// TestShedSlowNodesFreesTheT4sAD2JobDoesNotUse: on one V100 node and one
// T4 node of 4 GPUs each, A (d2, elastic 1-8 GPUs, 8 logical workers)
// starts on both nodes; its 8 logical workers run two per V100 (a T4 is
// 3.1 times slower), so the T4s only slow its all-reduce. B (4 GPUs,
// pinned to the T4s) waits for A's end unless Config.ShedSlowNodes
// releases A's T4 node right after A's start: then B starts at once and A
// ends no later than without (its rate on the V100s alone is at least its
// rate on both, less one rescale).
func TestShedSlowNodesFreesTheT4sAD2JobDoesNotUse(t *testing.T) {
	const csv = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n" +
		"A,0,2000,8,,,1,8,1,8,d2\n" +
		"B,10,500,4,t4,,1,4,4,4,d1\n"
	run := func(shed bool) Result {
		cfg := twoTypes(4, 4, 4, 1/3.1)
		cfg.ShedSlowNodes = shed
		_, res := runTable(t, csv, cfg)
		return res
	}
	rec := func(res Result, id string) JobRecord {
		for _, r := range res.PerJob {
			if r.ID == id {
				return r
			}
		}
		t.Fatalf("no record of %s", id)
		return JobRecord{}
	}
	off, on := run(false), run(true)
	if off.Shed != 0 || on.Shed != 1 {
		t.Fatalf("shed %d without the option, %d with; want 0 and 1", off.Shed, on.Shed)
	}
	aOff, aOn, bOff, bOn := rec(off, "A"), rec(on, "A"), rec(off, "B"), rec(on, "B")
	if aOff.StartTypes != "t4,v100" || aOn.StartTypes != "v100" {
		t.Fatalf("A started on %q without shedding and kept %q with it; want both types (Slurm places it on both nodes), then the V100s", aOff.StartTypes, aOn.StartTypes)
	}
	if bOff.Start < aOff.End-1 {
		t.Fatalf("without shedding B started at %d s, before A's end at %d s: the test does not show the waste", bOff.Start, aOff.End)
	}
	if bOn.Start > bOn.Submit+1 {
		t.Fatalf("with shedding B started at %d s (submitted at %d s), want at once", bOn.Start, bOn.Submit)
	}
	if aOn.End > aOff.End {
		t.Fatalf("A ended at %d s with shedding, %d s without: shedding slowed it", aOn.End, aOff.End)
	}
	t.Logf("A ends %d → %d s; B starts %d → %d s", aOff.End, aOn.End, bOff.Start, bOn.Start)
}
