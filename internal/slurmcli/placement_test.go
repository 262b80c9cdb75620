package slurmcli

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// The first lines are as the lab's squeue 22.05 printed them (squeue
// --noheader --states=PENDING -o '%i|%x|%Q|%v|%O|%f', 7 December 2026, %i
// and %A alike for a job that is no array task:
// `sbatch -x n2` queued behind a job on n1, Reason Resources; one without
// --exclude behind it, Reason Priority; one with --reservation=rtest; one
// with --contiguous; a held one); the others are hand-written edge cases:
// a constraint with '|', a malformed host list, no job id, an array
// task's %i (never printed by %A), too few fields,
// a priority that is not an integer, an empty reservation, a contiguous
// flag that is neither 0 nor 1, an id twice.
func TestParsePlacementsReadsExcludedNodesPriorityAndFeatures(t *testing.T) {
	out := "1880002|1880002|n2|4294901758|(null)|0|(null)\n1880005|1880005||4294901756|(null)|0|(null)\n" +
		"1880015|1880015||4294901746|rtest|0|(null)\n1880012|1880012||4294901748|(null)|1|(null)\n1880013|1880013||0|(null)|0|(null)\n" +
		"7|7|n[1-2],n4|12|(null)|0|a|b\n8|8|n3 x|1|(null)|0|(null)\nnot-a-job|not-a-job|n1|1|(null)|0|(null)\n15_[0-3]|15_[0-3]||1|(null)|0|(null)\n" +
		"16|x|n1|1|(null)|0|(null)\n9|9|n1|3|(null)|0\n" +
		"11|11|n1|-3|(null)|0|(null)\n12|12||high|(null)|0|(null)\n13|13||1||0|(null)\n14|14||1|(null)|yes|(null)\n" +
		"10|10|n2|5|(null)|0|(null)\n10|10|(null)|5|(null)|0|(null)\n" // an id twice: neither line is kept
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
// '%i|%x|%Q|%v|%O|%f', %A printing the same id): Runner.RunningPlacements
// reads them.
func TestParsePlacementsReadsRunningJobs(t *testing.T) {
	out := "1880006|1880006|n[1-2]|4294901755|(null)|0|(null)\n1880007|1880007|n[3-4]|4294901754|(null)|0|(null)\n"
	want := map[string]Placement{"1880006": {ExcNodes: "n[1-2]", Priority: 4294901755}, "1880007": {ExcNodes: "n[3-4]", Priority: 4294901754}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

// A job array's pending tasks and its started ones, and a heterogeneous
// job's components, as the labs printed them (squeue --noheader -o
// '%A|%i|%x|%Q|%v|%O|%f', 7 December 2026; `sbatch -N1 --gres=gpu:4 -a
// 0-7`, four started, and a held `sbatch -N1 : -N1` on 22.05, a held
// plain job beside the array on 24.11): each is keyed by its own id, the
// one --Format JobID prints (1880020, where %i prints "1880020_[4-7]"),
// so its priority is read, and marked Composite.
func TestParsePlacementsKeysJobArraysByTheirOwnIDs(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      map[string]Placement
	}{
		{"22.05", "1880020|1880020_[4-7]||4294901756|(null)|0|(null)\n1880022|1880021+1||0|(null)|0|(null)\n" +
			"1880021|1880021+0||0|(null)|0|(null)\n1880023|1880020_0||4294901756|(null)|0|(null)\n",
			map[string]Placement{"1880020": {Priority: 4294901756, Composite: "1880020_[4-7]"}, "1880022": {Composite: "1880021+1"},
				"1880021": {Composite: "1880021+0"}, "1880023": {Priority: 4294901756, Composite: "1880020_0"}}},
		{"24.11", "1890007|1890007_[4-7]||1|(null)|0|(null)\n1890009|1890007_0||1|(null)|0|(null)\n",
			map[string]Placement{"1890007": {Priority: 1, Composite: "1890007_[4-7]"}, "1890009": {Priority: 1, Composite: "1890007_0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParsePlacements([]byte(tc.out))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePlacements = %+v, want %+v", got, tc.want)
			}
			if whole := WholeJobs(got); len(whole) != 0 {
				t.Errorf("WholeJobs kept %+v", whole)
			}
		})
	}
	ps := ParsePlacements([]byte("5|5||1|(null)|0|(null)\n6|6_1||1|(null)|0|(null)\n"))
	if whole := WholeJobs(ps); !reflect.DeepEqual(whole, map[string]Placement{"5": {Priority: 1}}) {
		t.Errorf("WholeJobs = %+v, want job 5 alone", whole)
	}
	if WholeJobs(nil) != nil {
		t.Errorf("WholeJobs(nil) is not nil: a placement read that failed must stay unread")
	}
	if !strings.HasPrefix(PlacementFormat, "%A|%i|") {
		t.Errorf("PlacementFormat %q does not print each job's own id and then %%i", PlacementFormat)
	}
}

func FuzzParsePlacements(f *testing.F) {
	for _, s := range []string{"5|5||1|(null)|0|(null)\n", "4|4|n3|4294901758|r1|1|(null)\n", "7|7|n[1-2]|2|(null)|0|a|b", "|||||||", "\n\n", "12|12_[1-3]|n1|x|y|z|w", "3|3+1||1|(null)|0|(null)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for id, p := range ParsePlacements([]byte(s)) {
			if !isDigits(id) || !isHostList(p.ExcNodes) || p.Composite != "" && !isJobID(p.Composite) {
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
	out := "1890003|1890003||1|(null)|1|(null)\n1890001|1890001||1|(null)|0|(null)\n1890002|1890002||1|rtest|0|(null)\n"
	want := map[string]Placement{"1890003": {Priority: 1, Contiguous: true}, "1890001": {Priority: 1}, "1890002": {Priority: 1, Reservation: "rtest"}}
	if got := ParsePlacements([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePlacements = %+v, want %+v", got, want)
	}
}

// PendingPlacement and JobPlacement read a job by its own id, and say
// "not listed" for a job array's task or a heterogeneous job's component
// (the lab's lines: `squeue --jobs=2050006` lists the array's tasks, one
// of them under the array's id): the daemon never acts on those.
func TestOneJobsPlacementIsNotReadForAnArrayTask(t *testing.T) {
	out := "2050007|2050006_0||1|(null)|0|(null)\n2050006|2050006_1||1|(null)|0|(null)\n5|5|n1|2|(null)|0|(null)\n"
	r := Runner{Env: []string{}, Exec: func(_ context.Context, _ []string, _ string, _ ...string) ([]byte, error) { return []byte(out), nil }}
	for _, tc := range []struct {
		id string
		ok bool
	}{{"2050006", false}, {"2050007", false}, {"5", true}, {"6", false}} {
		if _, ok, err := r.PendingPlacement(context.Background(), tc.id); err != nil || ok != tc.ok {
			t.Errorf("PendingPlacement(%s) = %v, %v; want %v", tc.id, ok, err, tc.ok)
		}
		if p, ok, err := r.JobPlacement(context.Background(), tc.id); err != nil || ok != tc.ok || ok && p.ExcNodes != "n1" {
			t.Errorf("JobPlacement(%s) = %+v, %v, %v; want %v", tc.id, p, ok, err, tc.ok)
		}
	}
}
