package slurmcli

import (
	"reflect"
	"testing"
)

// The lines are as the lab's squeue 22.05 printed them for `sbatch -x n3`,
// a job without --exclude, and a job with -C 'a|b' (recorded by hand:
// squeue --noheader --states=PENDING -o '%i|%x|%f').
func TestParsePlacementsReadsExcludedNodesAndFeatures(t *testing.T) {
	out := "5||(null)\n4|n3|(null)\n7|n[1-2],n4|a|b\n8|n3 x|(null)\nnot-a-job|n1|(null)\n9|n1\n" +
		"10|n2|(null)\n10|(null)|(null)\n" // an id twice: neither line is kept
	want := map[string]Placement{
		"5": {},
		"4": {ExcNodes: "n3"},
		"7": {ExcNodes: "n[1-2],n4", Features: "a|b"},
	}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

// Running jobs print the same fields (the lab's squeue 22.05, `sbatch -x
// n1,n2` and `-x 'n[3-4]'` started: squeue --noheader --states=RUNNING -o
// '%i|%x|%f'): Runner.RunningPlacements reads them.
func TestParsePlacementsReadsRunningJobs(t *testing.T) {
	out := "1880001|n[1-2]|(null)\n1880003|n[3-4]|(null)\n"
	want := map[string]Placement{"1880001": {ExcNodes: "n[1-2]"}, "1880003": {ExcNodes: "n[3-4]"}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

func FuzzParsePlacements(f *testing.F) {
	for _, s := range []string{"5||(null)\n", "4|n3|(null)\n", "7|n[1-2]|a|b", "|||", "\n\n", "12_[1-3]|n1|x"} {
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
