package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

const objectiveHead = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism\n"

func readJobs(t *testing.T, rows string) []trace.Job {
	t.Helper()
	jobs, err := trace.Read(strings.NewReader(objectiveHead + rows))
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func startOf(t *testing.T, res Result, id string) JobRecord {
	t.Helper()
	for _, r := range res.PerJob {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("job %s did not complete", id)
	return JobRecord{}
}

// TestAJobBehindTheQueueHeadStartsSmall: A holds 4 of 6 GPUs until
// 10,000 s; B (4 GPUs, rigid) is the queue head, reserved at 10,000 s; C
// (3 GPUs, min 1) behind it does not fit. Under the objective with
// start-small on, C starts at once on the 2 idle GPUs (it ends long
// before B's reservation); before issue 17 only the head could start
// small, so C waited for B.
func TestAJobBehindTheQueueHeadStartsSmall(t *testing.T) {
	jobs := readJobs(t, "A,0,10000,4,,,1,4,4,4,d1\nB,1,1000,4,,,1,4,4,4,d1\nC,2,100,3,,,1,3,1,3,d1\n")
	for _, tc := range []struct {
		name      string
		objective bool
		wantStart int64
		wantGPUs  int
	}{{"the objective starts C small at once", true, 2, 2}, {"the old rule leaves C waiting", false, 10000, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(jobs, Config{GPUs: []GPUGroup{{"v100", 6}}, GPUsPerNode: 6, Policy: Elastic, ShrinkToAdmit: true,
				Objective: tc.objective, StartSmall: planner.StartSmallEndsEarlier})
			if err != nil {
				t.Fatal(err)
			}
			c := startOf(t, res, "C")
			if c.Start != tc.wantStart || (tc.wantGPUs > 0 && c.StartGPUs != tc.wantGPUs) {
				t.Errorf("C started at %d s on %d GPUs, want %d s on %d", c.Start, c.StartGPUs, tc.wantStart, tc.wantGPUs)
			}
			if res.MaxReservationDelay != 0 {
				t.Errorf("a reservation moved by %d s", res.MaxReservationDelay)
			}
		})
	}
}

// TestAJobThatMayRunAnywhereLeavesAPinnedJobsType: the cluster has 8 fast
// (v100) and 8 nearly as fast (p100, 0.9) GPUs. X holds 4 v100 GPUs until
// 1000 s and Y every p100 for 500 s of work; H (8 GPUs of any type, 100 s)
// heads the queue with Slurm's reservation when Y ends; P (pinned to v100,
// needing all 8) and then D (4 GPUs, d2, 5000 s) queue behind it. With
// KeepOffPinned D waits for the p100s (after H: at 0.9 Y ends at 556 s and
// H at 668 s), and P starts when X ends. Without it the same happens, as
// Slurm's backfill plans P before it tests D and starts D nowhere it would
// delay P (conservative backfill; EASY backfill, which plans the head
// alone, let D take the 4 free v100 GPUs and P wait for D's whole run). A pinned job queued behind D
// keeps nothing off: D has the queue's priority. Nor is a D of 500 s kept
// off: started on the free v100s at 3 s it ends at 503 s, before P could
// start there (planner.KeepOffRequest.PinnedStart).
func TestAJobThatMayRunAnywhereLeavesAPinnedJobsType(t *testing.T) {
	const head = "X,0,1000,4,v100,,1,4,4,4,d1\nY,0,500,8,p100,,1,8,8,8,d1\nH,1,100,8,,,1,8,8,8,d2\n"
	pinnedFirst := readJobs(t, head+"P,2,1000,8,v100,,1,8,8,8,d1\nD,3,5000,4,,,1,4,4,4,d2\n")
	pinnedLast := readJobs(t, head+"D,2,5000,4,,,1,4,4,4,d2\nP,3,1000,8,v100,,1,8,8,8,d1\n")
	shortD := readJobs(t, head+"P,2,1000,8,v100,,1,8,8,8,d1\nD,3,500,4,,,1,4,4,4,d2\n")
	for _, tc := range []struct {
		name     string
		jobs     []trace.Job
		keepOff  bool
		wantType string
		wantD    int64 // D's start
		wantP    int64 // P's start
	}{
		{"KeepOffPinned keeps D off the type P, ahead of it, needs", pinnedFirst, true, "p100", 668, 1000},
		{"without it Slurm's plan for P keeps D off the v100s all the same", pinnedFirst, false, "p100", 668, 1000},
		{"a pinned job behind D keeps it on the free v100s", pinnedLast, true, "v100", 2, 5002},
		{"a D that ends before P could start is not kept off", shortD, true, "v100", 3, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Equal weights: H then fits the free p100 node whole (with
			// v100 weighted first Slurm would spread it over X's 4 free
			// v100s and 4 p100s, and D's story would change).
			cfg := Config{GPUs: []GPUGroup{{"v100", 8}, {"p100", 8}}, GPUsPerNode: 8, Speeds: map[string]float64{"v100": 1, "p100": 0.9},
				Policy: Elastic, ShrinkToAdmit: true, Objective: true, KeepOffPinned: tc.keepOff, NodeWeights: WeightsEqual}
			res, err := Run(tc.jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := startOf(t, res, "D"); d.StartTypes != tc.wantType || d.Start != tc.wantD {
				t.Errorf("D started at %d s on %q, want %d s on %q", d.Start, d.StartTypes, tc.wantD, tc.wantType)
			}
			if p := startOf(t, res, "P"); p.Start != tc.wantP {
				t.Errorf("P started at %d s, want %d", p.Start, tc.wantP)
			}
		})
	}
}

func TestLowerBoundHandChecked(t *testing.T) {
	for _, tc := range []struct {
		name                string
		rows                string
		gpus                []GPUGroup
		speeds              map[string]float64 // nil: every type 1
		alone, capac, pools float64
		rigidJCT            float64 // 0: not checked
	}{
		// One 1-GPU job of 1000 s, default range (up to 2 GPUs, 2 logical
		// workers): on 2 GPUs its step takes 1 + 0.1·2 = 1.2 against 2 on
		// one, so it runs 600 s; its least area is 1000 GPU-s of 4.
		{"one job alone at its best size", "A,0,1000,1,,,1,,,,\n", []GPUGroup{{"v100", 4}}, nil, 600, 250, 600, 0},
		// Eight 4-GPU jobs that cannot resize, 100 s each, all at 0 on 4
		// GPUs: one at a time, completions 100, 200, ..., 800: mean 450,
		// which is also what FIFO gives.
		{"jobs that queue: the capacity bound", strings.Repeat("", 0) +
			"A,0,100,4,,,1,4,4,4,\nB,0,100,4,,,1,4,4,4,\nC,0,100,4,,,1,4,4,4,\nD,0,100,4,,,1,4,4,4,\n" +
			"E,0,100,4,,,1,4,4,4,\nF,0,100,4,,,1,4,4,4,\nG,0,100,4,,,1,4,4,4,\nH,0,100,4,,,1,4,4,4,\n", []GPUGroup{{"v100", 4}}, nil, 100, 450, 450, 450},
		// Four 4-GPU jobs pinned to the 8 T4s of a cluster that also has 8
		// V100s, 100 s each, all at 0: two at a time on the T4s,
		// completions 100, 100, 200, 200 (mean 150). Capacity counts only
		// the GPUs some job may use, the T4s, as does Pools (50 s each:
		// 50, 100, 150, 200, mean 125).
		{"jobs pinned to one type: the pools bound", "A,0,100,4,t4,,1,4,4,4,\n" +
			"B,0,100,4,t4,,1,4,4,4,\nC,0,100,4,t4,,1,4,4,4,\nD,0,100,4,t4,,1,4,4,4,\n", []GPUGroup{{"v100", 8}, {"t4", 8}}, nil, 100, 125, 125, 150},
		// Sixteen 1-GPU jobs of 100 s at 0 on 4 V100s (speed 1) and 4 T4s
		// (0.25). Counted by number, 8 GPUs: 12.5 s each, completions
		// 12.5, 25, ..., 200, mean 106.25. Counted by speed, the T4s are
		// a quarter of a V100 each for every job: 4 + 4·0.25 = 5 units,
		// 20 s each, mean 20·8.5 = 170. Alone each runs 100 s on a V100.
		{"slow GPUs count as the fraction of a fast one they are", numberedRows(16, ",0,100,1,,,1,1,1,1,\n"),
			[]GPUGroup{{"v100", 4}, {"t4", 4}}, map[string]float64{"v100": 1, "t4": 0.25}, 100, 170, 170, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := readJobs(t, tc.rows)
			cfg := Config{GPUs: tc.gpus, GPUsPerNode: tc.gpus[0].Count, Speeds: tc.speeds, Policy: Rigid}
			lb, err := ComputeLowerBound(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(lb.Alone-tc.alone) > 1e-6 || math.Abs(lb.Capacity-tc.capac) > 1e-6 || math.Abs(lb.Pools-tc.pools) > 1e-6 ||
				lb.MeanJCT != max(lb.Alone, lb.Capacity, lb.Pools) {
				t.Errorf("lower bound %+v, want alone %v, capacity %v, pools %v", lb, tc.alone, tc.capac, tc.pools)
			}
			res, err := Run(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.LowerBoundMeanJCT != lb.MeanJCT || (tc.rigidJCT > 0 && res.MeanJCT != tc.rigidJCT) {
				t.Errorf("rigid run: mean JCT %v, lower bound %v; want %v and the bound %v", res.MeanJCT, res.LowerBoundMeanJCT, tc.rigidJCT, lb.MeanJCT)
			}
		})
	}
}

// numberedRows is n trace rows J0, J1, ... each followed by rest.
func numberedRows(n int, rest string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "J%d%s", i, rest)
	}
	return b.String()
}

// TestNoPolicyBeatsTheLowerBound replays Pollux workload 1 on a mixed
// cluster under every policy, a third of its jobs pinned to the T4s (so
// that the pools bound is the largest): each mean JCT is at least the
// bound.
func TestNoPolicyBeatsTheLowerBound(t *testing.T) {
	jobs, err := trace.ReadFile(filepath.Join("testdata", "pollux_workload-1.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		switch {
		case i%3 == 0:
			jobs[i].Determinism = "d2"
		case i%3 == 1 && jobs[i].GPUs <= 16:
			jobs[i].GPUType = "t4"
		}
	}
	base := Config{GPUs: []GPUGroup{{"v100", 32}, {"p100", 16}, {"t4", 16}}, GPUsPerNode: 8,
		Speeds: map[string]float64{"v100": 1, "p100": 0.77, "t4": 0.32}, RescaleCost: DefaultRescaleCost}
	for _, cfg := range []Config{
		{Policy: Rigid}, {Policy: Elastic, ShrinkToAdmit: true}, {Policy: ElasticCapped},
		{Policy: Elastic, ShrinkToAdmit: true, Objective: true, StartSmall: planner.StartSmallEndsEarlier},
	} {
		cfg.GPUs, cfg.GPUsPerNode, cfg.Speeds, cfg.RescaleCost = base.GPUs, base.GPUsPerNode, base.Speeds, base.RescaleCost
		res, err := Run(jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !(res.LowerBoundMeanJCT > 0) || res.MeanJCT < res.LowerBoundMeanJCT || res.JCTOverLowerBound < 1 {
			t.Errorf("%s (objective %v): mean JCT %.0f s below the lower bound %.0f s", res.Policy, cfg.Objective, res.MeanJCT, res.LowerBoundMeanJCT)
		}
	}
	lb, err := ComputeLowerBound(jobs, base)
	if err != nil {
		t.Fatal(err)
	}
	if !(lb.Pools > lb.Capacity && lb.Pools > lb.Alone) {
		t.Errorf("lower bound %+v: the pools bound is not the largest, so this test does not check it", lb)
	}
}

// TestRoundsRunOnATimer: a job that may grow 1 → 8 GPUs while another
// waits (W, reserved when A and B end) at most doubles per round; with
// rounds only on events it would stay at 2 GPUs until its extra job ends,
// with rounds on a timer it reaches 8 within three round intervals.
func TestRoundsRunOnATimer(t *testing.T) {
	jobs := readJobs(t, "A,0,100000,1,,,1,8,1,8,d1\nB,0,100000,3,,,1,3,3,3,d1\nW,0,100,16,,,1,16,16,16,d1\n")
	res, err := Run(jobs, Config{GPUs: []GPUGroup{{"v100", 16}}, GPUsPerNode: 16, Policy: Elastic, Objective: true,
		RoundInterval: 10})
	if err != nil {
		t.Fatal(err)
	}
	a := startOf(t, res, "A")
	if a.PeakGPUs != 8 {
		t.Errorf("A peaked at %d GPUs, want 8", a.PeakGPUs)
	}
	reached := int64(-1)
	for _, smp := range res.Series {
		if smp.Lent >= 7 {
			reached = smp.T
			break
		}
	}
	if reached < 0 || reached > 3*10 {
		t.Errorf("A held 8 GPUs from %d s, want within three 10 s rounds", reached)
	}
}

// TestAQueuedJobIsAdmittedBelowItsRequest: C (rigid, 4 GPUs, 20,000 s)
// and A (elastic, 8 GPUs, may lose half) fill 12 GPUs; B asks for 8 (min
// 2, 100 s of work). A can free only 4, so admitting B at 8 is impossible
// and the old rule leaves it waiting for A's end; the objective admits it
// at 4 at once (its saved wait far exceeds A's loss; A is not the longest
// job, so the horizon allows it).
func TestAQueuedJobIsAdmittedBelowItsRequest(t *testing.T) {
	jobs := readJobs(t, "C,0,20000,4,,,1,4,4,4,d1\nA,0,10000,8,,,1,8,1,8,d1\nB,10,100,8,,,1,8,2,8,d1\n")
	for _, tc := range []struct {
		name      string
		objective bool
		wantStart int64
	}{{"the objective admits B at 4 GPUs at once", true, 10}, {"the old rule leaves B waiting for A", false, 10000}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(jobs, Config{GPUs: []GPUGroup{{"v100", 12}}, GPUsPerNode: 4, Policy: Elastic, ShrinkToAdmit: true,
				Objective: tc.objective, StartSmall: planner.StartSmallEndsEarlier, AdmitBelowRequest: true})
			if err != nil {
				t.Fatal(err)
			}
			b := startOf(t, res, "B")
			if b.Start != tc.wantStart {
				t.Errorf("B started at %d s, want %d", b.Start, tc.wantStart)
			}
			if tc.objective && (res.AdmitShrinks != 1 || b.StartGPUs != 4) {
				t.Errorf("%d admissions, B started on %d GPUs; want 1 admission at 4 GPUs", res.AdmitShrinks, b.StartGPUs)
			}
			// The donor's record keeps the GPUs it started with and the
			// base it ended with.
			if a := startOf(t, res, "A"); tc.objective && (a.StartGPUs != 8 || a.EndBaseGPUs != 4) {
				t.Errorf("A's record: started on %d GPUs, ended with a base of %d; want 8 and 4", a.StartGPUs, a.EndBaseGPUs)
			}
		})
	}
}

// TestPolicyElasticIsTheDaemonsDefaultConfiguration: easyscale-simulate
// --policy elastic, with no other flag, runs what easyscale-backfilld's
// default configuration runs (config.Default(): admit.rule objective,
// start_small.rule ends-earlier, rescale_cost 30 s, admit.max_loss 0.5,
// shed_slow_nodes, keep_off_pinned, move_to_faster with move_cost 150 s,
// drain_horizon, admit.horizon returned), --objective=false the rules
// before issue 17 and --admit-horizon kept admit.horizon = "kept".
func TestPolicyElasticIsTheDaemonsDefaultConfiguration(t *testing.T) {
	rows := "A,0,10000,4,,,1,4,4,4,d1\nB,1,1000,4,,,1,4,4,4,d1\nC,2,100,3,,,1,3,1,3,d1\nD,3,3000,2,,,1,2,1,2,d2\n"
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(objectiveHead+rows), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs := readJobs(t, rows)
	daemon := Config{GPUs: []GPUGroup{{"v100", 6}}, GPUsPerNode: 6, Policy: Elastic, ShrinkToAdmit: true, AdmitMaxLoss: 0.5,
		Objective: true, StartSmall: planner.StartSmallEndsEarlier, RescaleCost: 30, ShedSlowNodes: true, WeighCriticalDelay: true,
		KeepOffPinned: true, MoveToFaster: true, TradeUp: true, MoveCost: 150, DrainHorizon: true, AdmitHorizon: planner.HorizonReturned, AdmitAllowance: 0.75}
	if d := DaemonDefaults(); d.Policy != daemon.Policy || d.ShrinkToAdmit != daemon.ShrinkToAdmit || d.AdmitMaxLoss != daemon.AdmitMaxLoss ||
		d.Objective != daemon.Objective || d.StartSmall != daemon.StartSmall || d.RescaleCost != daemon.RescaleCost ||
		d.ShedSlowNodes != daemon.ShedSlowNodes || d.WeighCriticalDelay != daemon.WeighCriticalDelay || d.KeepOffPinned != daemon.KeepOffPinned ||
		d.MoveToFaster != daemon.MoveToFaster || d.TradeUp != daemon.TradeUp || d.MoveCost != daemon.MoveCost || d.DrainHorizon != daemon.DrainHorizon ||
		d.AdmitHorizon != daemon.AdmitHorizon || d.AdmitAllowance != daemon.AdmitAllowance {
		t.Errorf("DaemonDefaults() = %+v, want the policy of %+v", d, daemon)
	}
	legacy := daemon
	legacy.Objective = false
	kept, contested, noAllowance := daemon, daemon, daemon
	kept.AdmitHorizon, contested.AdmitHorizon, noAllowance.AdmitAllowance = planner.HorizonKept, planner.HorizonContested, 0
	for _, tc := range []struct {
		name  string
		flags []string
		cfg   Config
	}{{"defaults", nil, daemon}, {"--objective=false", []string{"--objective=false"}, legacy},
		{"--admit-horizon kept", []string{"--admit-horizon", "kept"}, kept},
		{"--admit-horizon contested", []string{"--admit-horizon", "contested"}, contested},
		{"--admit-allowance 0", []string{"--admit-allowance", "0"}, noAllowance}} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--trace", path, "--gpus", "v100:6", "--gpus-per-node", "6", "--policy", "elastic", "--json", "-"}, tc.flags...)
			if code := Main(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var got struct {
				MeanJCT  float64   `json:"mean_jct_s"`
				Makespan int64     `json:"makespan_s"`
				Settings *Settings `json:"settings"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want, err := Run(jobs, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got.MeanJCT != want.MeanJCT || got.Makespan != want.Makespan {
				t.Errorf("--policy elastic %v: mean JCT %v, makespan %d; the configuration %+v gives %v, %d",
					tc.flags, got.MeanJCT, got.Makespan, tc.cfg, want.MeanJCT, want.Makespan)
			}
			if got.Settings == nil || *got.Settings != *settingsOf(tc.cfg) {
				t.Errorf("--policy elastic %v: JSON settings %+v, want %+v", tc.flags, got.Settings, settingsOf(tc.cfg))
			}
		})
	}
	def, leg := mustRun(t, jobs, daemon), mustRun(t, jobs, legacy)
	if def.MeanJCT == leg.MeanJCT {
		t.Errorf("the objective and the old rules give the same mean JCT %v on this trace: the check above cannot tell them apart", def.MeanJCT)
	}
}

// easyscale-simulate --policy elastic releases the slow nodes a d2 job
// does not use, as the daemon's default does on Slurm 22.05
// (shed_slow_nodes), and --shed-slow-nodes=false does not: the trace of
// TestShedSlowNodesFreesTheT4sAD2JobDoesNotUse, through Main.
func TestPolicyElasticShedsAsTheDaemonDoesByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(path, []byte(objectiveHead+"A,0,2000,8,,,1,8,1,8,d2\nB,10,500,4,t4,,1,4,4,4,d1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mean := map[bool]float64{}
	for _, flags := range [][]string{nil, {"--shed-slow-nodes=false"}} {
		var out, errb bytes.Buffer
		args := append([]string{"--trace", path, "--gpus", "v100:4,t4:4", "--gpus-per-node", "4", "--speeds", "v100:3.1,t4:1",
			"--policy", "elastic", "--json", "-"}, flags...)
		if code := Main(args, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var got struct {
			MeanJCT float64 `json:"mean_jct_s"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		mean[flags == nil] = got.MeanJCT
	}
	if !(mean[true] < mean[false]) {
		t.Fatalf("mean JCT %v by default, %v with --shed-slow-nodes=false; want the default (shedding) lower", mean[true], mean[false])
	}
}

func mustRun(t *testing.T, jobs []trace.Job, cfg Config) Result {
	t.Helper()
	res, err := Run(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestNoPolicyBeatsTheLowerBoundOnRandomTraces replays random traces on
// mixed clusters, with ranges, d1 and d2 jobs, jobs pinned to a type and
// per-job speeds (some for which the slow type is nearly as fast), under
// rigid and the daemon's default elastic policy (moves of d1 jobs that
// start over included): each mean JCT is at least the lower bound.
func TestNoPolicyBeatsTheLowerBoundOnRandomTraces(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 60))
	capacityBinds := 0
	for iter := range 40 {
		var jobs []trace.Job
		at := int64(0)
		for k := range 30 {
			at += int64(r.IntN(1 + 200*(iter%3)))
			j := trace.Job{ID: fmt.Sprintf("J%d", k), Submit: at, Duration: 60 + int64(r.IntN(4000)),
				GPUs: []int{1, 1, 2, 4, 8, 12}[r.IntN(6)], Training: true, Determinism: []string{"d1", "d2"}[r.IntN(2)]}
			j.LogicalWorkers = j.GPUs * (1 + r.IntN(2))
			j.MinGPUs, j.MaxGPUs = 1+r.IntN(j.GPUs), j.LogicalWorkers
			switch r.IntN(4) {
			case 0:
				if j.GPUs <= 8 {
					j.GPUType = []string{"v100", "t4"}[r.IntN(2)]
				}
			case 1:
				j.Speeds = map[string]float64{"v100": 1 + 2*r.Float64(), "t4": 0.5 + 0.5*r.Float64()}
			}
			jobs = append(jobs, j)
		}
		var lb LowerBound
		for _, cfg := range []Config{{Policy: Rigid}, DaemonDefaults(), func() Config { c := DaemonDefaults(); c.MoveOneTypeAfresh = true; return c }()} {
			cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 8}, {"t4", 8}}, 4
			cfg.Speeds = map[string]float64{"v100": 2.5, "t4": 1}
			var err error
			if lb, err = ComputeLowerBound(jobs, cfg); err != nil {
				t.Fatal(err)
			}
			res, err := Run(jobs, cfg)
			if err != nil {
				t.Fatalf("trace %d, %s: %v", iter, cfg.Policy, err)
			}
			if math.Abs(res.LowerBoundMeanJCT-lb.MeanJCT) > 1e-9*lb.MeanJCT || res.MeanJCT < lb.MeanJCT*(1-1e-9) {
				t.Errorf("trace %d, %s: mean JCT %.1f s, lower bound %.1f s (%+v)", iter, cfg.Policy, res.MeanJCT, res.LowerBoundMeanJCT, lb)
			}
		}
		if lb.Capacity > lb.Alone {
			capacityBinds++
		}
	}
	if capacityBinds == 0 {
		t.Fatal("no random trace had a capacity bound above its alone bound: the test checks nothing of it")
	}
}

// TestTheLowerBoundHoldsWhereATesterFoundItBroken: a tester's two
// reproductions. A d2 job naming a type (gpu_type b) grew by extra jobs
// onto the faster type a, under a bound that lets it hold only b; and a d1
// job larger than any one type, which never starts under an elastic policy
// but spans types under rigid, was left out of the rigid run's bound while
// the rigid run's mean counted it.
func TestTheLowerBoundHoldsWhereATesterFoundItBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   string
		gpus   []GPUGroup
		speeds map[string]float64
	}{
		{"a d2 job naming a type grows only onto it", "J0,0,1000,1,b,,1,4,1,4,d2\n", []GPUGroup{{"a", 4}, {"b", 1}}, map[string]float64{"a": 2}},
		{"a d1 job spanning types under rigid is counted", "A,0,1000,1,,,1,1,1,1,\nB,0,1,6,,,1,,,,\n", []GPUGroup{{"v100", 4}, {"t4", 4}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := readJobs(t, tc.rows)
			for _, cfg := range []Config{{Policy: Rigid}, {Policy: Elastic}, {Policy: Elastic, ShrinkToAdmit: true}, DaemonDefaults()} {
				cfg.GPUs, cfg.GPUsPerNode, cfg.Speeds = tc.gpus, 4, tc.speeds
				res, err := Run(jobs, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !(res.LowerBoundMeanJCT > 0) || res.MeanJCT < res.LowerBoundMeanJCT*(1-1e-9) {
					t.Errorf("%s: mean JCT %.1f s below the lower bound %.1f s (skipped %d)", cfg.Policy, res.MeanJCT, res.LowerBoundMeanJCT, res.Skipped)
				}
			}
		})
	}
}
