package slurmcli

import (
	"reflect"
	"testing"
)

// The lines are as the lab's squeue 22.05 printed them (squeue --noheader
// --states=PENDING -o '%i|%x|%Q|%f', 7 December 2026: `sbatch -x n2`
// queued behind a job on n1, Reason Resources, and one without --exclude
// behind it, Reason Priority); the others are hand-written edge cases: a
// constraint with '|', a malformed host list, no job id, too few fields,
// a priority that is not an integer, an id twice.
func TestParsePlacementsReadsExcludedNodesPriorityAndFeatures(t *testing.T) {
	out := "1880002|n2|4294901758|(null)\n1880005||4294901756|(null)\n" +
		"7|n[1-2],n4|12|a|b\n8|n3 x|1|(null)\nnot-a-job|n1|1|(null)\n9|n1|3\n11|n1|-3|(null)\n12||high|(null)\n" +
		"10|n2|5|(null)\n10|(null)|5|(null)\n" // an id twice: neither line is kept
	want := map[string]Placement{
		"1880002": {ExcNodes: "n2", Priority: 4294901758},
		"1880005": {Priority: 4294901756},
		"7":       {ExcNodes: "n[1-2],n4", Priority: 12, Features: "a|b"},
	}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

// Running jobs print the same fields (the lab's squeue 22.05, `sbatch -x
// n1,n2` and `-x 'n[3-4]'` started: squeue --noheader --states=RUNNING -o
// '%i|%x|%Q|%f'): Runner.RunningPlacements reads them.
func TestParsePlacementsReadsRunningJobs(t *testing.T) {
	out := "1880006|n[1-2]|4294901755|(null)\n1880007|n[3-4]|4294901754|(null)\n"
	want := map[string]Placement{"1880006": {ExcNodes: "n[1-2]", Priority: 4294901755}, "1880007": {ExcNodes: "n[3-4]", Priority: 4294901754}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

func FuzzParsePlacements(f *testing.F) {
	for _, s := range []string{"5||1|(null)\n", "4|n3|4294901758|(null)\n", "7|n[1-2]|2|a|b", "||||", "\n\n", "12_[1-3]|n1|x|y"} {
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
