package simulator

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

// TestTheQueueHeadStartsSmallWhenTheRuleSaysSo: A holds 3 of 4 GPUs until
// 1000 s (lw=3: it cannot grow); B (2 GPUs, min 1, lw=2) arrives at 10 s
// and is reserved at 1000 s. On one GPU its work takes work·2/1.1 s
// (planner.DefaultModel).
func TestTheQueueHeadStartsSmallWhenTheRuleSaysSo(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus\n"
	const a = "A,0,1000,3,,,1,3,\n"
	tests := []struct {
		name     string
		bWork    int
		policy   Policy
		rule     planner.StartSmallRule
		wantBJCT int64
		wantBGPU int // B's GPUs at its start
	}{
		{"off: B waits for its reservation", 100, Elastic, planner.StartSmallOff, 1090, 2},
		{"before-reservation: B ends small at 192 s, before its reservation", 100, Elastic, planner.StartSmallBeforeReservation, 182, 1},
		{"before-reservation: B would outlive its reservation small (1829 s), so it waits", 1000, Elastic, planner.StartSmallBeforeReservation, 1990, 2},
		// Small it would end at 1829 s, by waiting at 2000 s; it starts on one
		// GPU (544.5 s of work done at 1000 s, rate 0.55) and grows into A's
		// GPUs when A ends: 455.5 s left at rate 1, done at 1456 s.
		{"ends-earlier: B starts small, then grows when A ends", 1000, Elastic, planner.StartSmallEndsEarlier, 1446, 1},
		{"ends-earlier: B waits when that ends it sooner (3646 s small, 3000 s waiting)", 2000, Elastic, planner.StartSmallEndsEarlier, 2990, 2},
		{"the rigid policy never starts small", 100, Rigid, planner.StartSmallEndsEarlier, 1090, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := trace.Read(strings.NewReader(head + a + "B,10," + strconv.Itoa(tc.bWork) + ",2,,,1,2,1\n"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(jobs, Config{GPUs: []GPUGroup{{"v100", 4}}, GPUsPerNode: 4, Policy: tc.policy, StartSmall: tc.rule})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range res.PerJob {
				if rec.ID == "B" && (rec.End-rec.Submit != tc.wantBJCT || rec.StartGPUs != tc.wantBGPU) {
					t.Errorf("B: JCT %d s on %d GPUs; want %d s on %d", rec.End-rec.Submit, rec.StartGPUs, tc.wantBJCT, tc.wantBGPU)
				}
			}
			if small := res.SmallStarts; (small == 1) != (tc.wantBGPU == 1) {
				t.Errorf("%d small starts", small)
			}
		})
	}
}

// TestStartingSmallNeverDelaysAReservation runs random traces under both
// start-small rules: no reserved start moves, no job runs below its minimum
// (the per-pass check), every job completes.
func TestStartingSmallNeverDelaysAReservation(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	small := 0
	for iter := range 40 {
		var jobs []trace.Job
		at := int64(0)
		for k := range 40 {
			at += int64(r.IntN(600))
			jobs = append(jobs, job("j"+strconv.Itoa(k), at, 60+int64(r.IntN(5000)), []int{1, 2, 4, 8, 16}[r.IntN(5)]))
		}
		for _, rule := range []planner.StartSmallRule{planner.StartSmallBeforeReservation, planner.StartSmallEndsEarlier} {
			cfg := Config{GPUs: []GPUGroup{{"a100", 8}, {"v100", 16}}, GPUsPerNode: 4, Speeds: map[string]float64{"a100": 2},
				Policy: Elastic, StartSmall: rule, ShrinkToAdmit: iter%2 == 1}
			res, err := Run(jobs, cfg)
			if err != nil {
				t.Fatalf("trace %d, %s: %v", iter, rule, err)
			}
			if res.MaxReservationDelay != 0 || res.ReservedStartPreemptions != 0 || res.Jobs != len(jobs) {
				t.Errorf("trace %d, %s: reservation delay %d s, %d preemptions at reserved starts, %d of %d jobs done",
					iter, rule, res.MaxReservationDelay, res.ReservedStartPreemptions, res.Jobs, len(jobs))
			}
			small += res.SmallStarts
		}
	}
	if small == 0 {
		t.Fatal("no job started small: the traces do not exercise the rules")
	}
}

// TestRescalesCountEachChangeOfAJobsGPUs: a 1-GPU elastic job on 2 GPUs
// grows once (its extra job outlives it, see TestRunHandChecked) and a job
// squeezed by an extra job's end changes twice; rigid jobs never rescale.
func TestRescalesCountEachChangeOfAJobsGPUs(t *testing.T) {
	tests := []struct {
		name   string
		jobs   []trace.Job
		policy Policy
		want   int
	}{
		{"a job grown once rescales once", []trace.Job{job("A", 0, 1000, 1)}, Elastic, 1},
		{"a rigid job never rescales", []trace.Job{job("A", 0, 1000, 1)}, Rigid, 0},
		// A grows to 2 GPUs with an extra job that ends an hour later (the
		// daemon's max_lend), before A: down to 1, then up again.
		{"a long job's extra jobs end and are granted again", []trace.Job{job("A", 0, 10000, 1)}, Elastic, 3},
		// On 1-GPU nodes A (2 GPUs, up to 4) grows by two extra jobs, one per
		// node, that end together an hour later: one shrink, not two
		// (the runtime reconfigures once), then it grows again.
		{"extra jobs ended at one instant are one rescale", []trace.Job{job("A", 0, 10000, 2)}, Elastic, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{GPUs: []GPUGroup{{"v100", 2}}, GPUsPerNode: 2, Policy: tc.policy}
			if strings.Contains(tc.name, "one instant") {
				cfg.GPUs, cfg.GPUsPerNode = []GPUGroup{{"v100", 4}}, 1
			}
			res, err := Run(tc.jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.PerJob) != 1 || res.PerJob[0].Rescales != tc.want || res.Rescales != tc.want {
				t.Errorf("rescales %+v (total %d), want %d", res.PerJob, res.Rescales, tc.want)
			}
		})
	}
}
