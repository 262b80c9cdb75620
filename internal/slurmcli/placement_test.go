package slurmcli

import (
	"reflect"
	"testing"
)

// The first lines are as the lab's squeue 22.05 printed them (squeue
// --noheader --states=PENDING -o '%i|%x|%Q|%v|%O|%f', 7 December 2026:
// `sbatch -x n2` queued behind a job on n1, Reason Resources; one without
// --exclude behind it, Reason Priority; one with --reservation=rtest; one
// with --contiguous; a held one); the others are hand-written edge cases:
// a constraint with '|', a malformed host list, no job id, too few fields,
// a priority that is not an integer, an empty reservation, a contiguous
// flag that is neither 0 nor 1, an id twice.
func TestParsePlacementsReadsExcludedNodesPriorityAndFeatures(t *testing.T) {
	out := "1880002|n2|4294901758|(null)|0|(null)\n1880005||4294901756|(null)|0|(null)\n" +
		"1880015||4294901746|rtest|0|(null)\n1880012||4294901748|(null)|1|(null)\n1880013||0|(null)|0|(null)\n" +
		"7|n[1-2],n4|12|(null)|0|a|b\n8|n3 x|1|(null)|0|(null)\nnot-a-job|n1|1|(null)|0|(null)\n9|n1|3|(null)|0\n" +
		"11|n1|-3|(null)|0|(null)\n12||high|(null)|0|(null)\n13||1||0|(null)\n14||1|(null)|yes|(null)\n" +
		"10|n2|5|(null)|0|(null)\n10|(null)|5|(null)|0|(null)\n" // an id twice: neither line is kept
	want := map[string]Placement{
		"1880002": {ExcNodes: "n2", Priority: 4294901758},
		"1880005": {Priority: 4294901756},
		"1880015": {Priority: 4294901746, Reservation: "rtest"},
		"1880012": {Priority: 4294901748, Contiguous: true},
		"1880013": {},
		"7":       {ExcNodes: "n[1-2],n4", Priority: 12, Features: "a|b"},
	}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

// Running jobs print the same fields (the lab's squeue 22.05, `sbatch -x
// n1,n2` and `-x 'n[3-4]'` started: squeue --noheader --states=RUNNING -o
// '%i|%x|%Q|%v|%O|%f'): Runner.RunningPlacements reads them.
func TestParsePlacementsReadsRunningJobs(t *testing.T) {
	out := "1880006|n[1-2]|4294901755|(null)|0|(null)\n1880007|n[3-4]|4294901754|(null)|0|(null)\n"
	want := map[string]Placement{"1880006": {ExcNodes: "n[1-2]", Priority: 4294901755}, "1880007": {ExcNodes: "n[3-4]", Priority: 4294901754}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

func FuzzParsePlacements(f *testing.F) {
	for _, s := range []string{"5||1|(null)|0|(null)\n", "4|n3|4294901758|r1|1|(null)\n", "7|n[1-2]|2|(null)|0|a|b", "||||||", "\n\n", "12_[1-3]|n1|x|y|z|w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for id, p := range ParsePlacements([]byte(s)) {
			if !isJobID(id) || !isHostList(p.ExcNodes) {
				t.Fatalf("kept %q: %+v", id, p)
			}
		}
	})
}

// Slurm 24.11 prints the same fields (the current lab, 7 December 2026:
// squeue --noheader --states=PENDING -o '%i|%x|%Q|%v|%O|%f' with a
// --contiguous job, one behind a reservation of its node, and one with
// --reservation=rtest).
func TestParsePlacementsReadsSlurm2411(t *testing.T) {
	out := "1890003||1|(null)|1|(null)\n1890001||1|(null)|0|(null)\n1890002||1|rtest|0|(null)\n"
	want := map[string]Placement{"1890003": {Priority: 1, Contiguous: true}, "1890001": {Priority: 1}, "1890002": {Priority: 1, Reservation: "rtest"}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}
