package planner

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Model is a job's throughput as a function of the GPUs it runs on, after
// Pollux's iteration-time model (Qiao et al., OSDI'21, §3.1):
//
//	T_iter = (T_compute^γ + T_sync^γ)^(1/γ)
//
// with EasyScale's fixed global batch (EasyScale, arXiv 2208.14228, §4): the
// job always runs LogicalWorkers ESTs per step, so T_compute is the
// bottleneck max_i(load_i/speed_i) of the placement (in units of one EST's
// compute time on a reference GPU) and
//
//	T_sync(k) = 0                                   for k = 1 GPU,
//	T_sync(k) = (SyncAlpha + SyncBeta·(k−2))·C_ref / s_min   for k ≥ 2,
//
// where C_ref = ceil(LogicalWorkers/RefGPUs) is the compute time at the
// reference size and s_min the speed of the slowest GPU the job runs on.
// Pollux fits T_sync per job and per placement; we express it as a fraction
// of the job's own compute time, which is what a relative speed scales: a
// job whose steps take half as long on a type (speed 2) also spends half as
// long in each step's synchronisation (its gradients are ready sooner and
// the all-reduce of a faster GPU generation runs over a faster link), so on
// k GPUs of one type of speed s the job runs exactly s times as fast as on k
// reference GPUs, the ratio the speed table (or the job's own speeds) says.
// On a mix of types the all-reduce waits for the slowest participant, hence
// s_min. Throughput is reported in reference-GPU equivalents: RefGPUs
// reference GPUs give exactly RefGPUs.
type Model struct {
	// LogicalWorkers is the job's EST count (≥ 1), fixed for its life.
	LogicalWorkers int
	// RefGPUs is the size (≥ 1) at which the job's nominal runtime is
	// measured, on reference-speed GPUs (the trace's requested size).
	RefGPUs int
	// SyncAlpha and SyncBeta (≥ 0) give the all-reduce cost as a fraction
	// of the reference compute time: fixed, and per GPU beyond 2.
	SyncAlpha, SyncBeta float64
	// Gamma (≥ 1) is Pollux's overlap exponent: 1 = no overlap of compute
	// and synchronisation, large = full overlap.
	Gamma float64
}

// DefaultModel returns the model the simulator uses for a trace job:
// SyncAlpha 0.10, SyncBeta 0.005, Gamma 1 (no overlap). These are
// illustrative values of the size Pollux fits for data-parallel jobs, not
// fitted to any trace; with them doubling a 1-GPU job gives a 1.67× speedup
// and doubling a 16-GPU job 1.59×.
func DefaultModel(logicalWorkers, refGPUs int) Model {
	return Model{LogicalWorkers: logicalWorkers, RefGPUs: refGPUs, SyncAlpha: 0.10, SyncBeta: 0.005, Gamma: 1}
}

func (m Model) validate() error {
	if m.LogicalWorkers < 1 || m.RefGPUs < 1 {
		return fmt.Errorf("logical workers %d and reference GPUs %d must be ≥ 1: %w", m.LogicalWorkers, m.RefGPUs, ErrInvalidSnapshot)
	}
	if m.SyncAlpha < 0 || m.SyncBeta < 0 || m.Gamma < 1 || math.IsNaN(m.SyncAlpha+m.SyncBeta+m.Gamma) {
		return fmt.Errorf("sync alpha %v, beta %v must be ≥ 0 and gamma %v ≥ 1: %w", m.SyncAlpha, m.SyncBeta, m.Gamma, ErrInvalidSnapshot)
	}
	return nil
}

// SpeedCount is n GPUs of one relative speed.
type SpeedCount struct {
	Speed float64
	N     int
}

// AddSpeedCount adds n GPUs of relative speed to sc, into the entry of
// that speed when there is one (a new last entry otherwise), and returns
// the slice.
func AddSpeedCount(sc []SpeedCount, speed float64, n int) []SpeedCount {
	if i := slices.IndexFunc(sc, func(c SpeedCount) bool { return c.Speed == speed }); i >= 0 {
		sc[i].N += n
		return sc
	}
	return append(sc, SpeedCount{Speed: speed, N: n})
}

// Throughput returns the job's throughput on the GPUs described by gpus, in
// reference-GPU equivalents, and the fraction of that GPU time wasted to
// imbalance, 1 − Σ_i(load_i/speed_i) / (k · max_i(load_i/speed_i)), under the
// optimal placement of [Place]. No GPUs (or none with a positive speed)
// gives throughput 0 and waste 1.
func (m Model) Throughput(gpus []SpeedCount) (throughput, waste float64) {
	bottleneck, busy, k := bottleneck(m.LogicalWorkers, gpus)
	if k == 0 || math.IsInf(bottleneck, 1) {
		return 0, 1
	}
	ref := m.stepTime(float64((m.LogicalWorkers+m.RefGPUs-1)/m.RefGPUs), m.RefGPUs)
	step := m.stepTimeAt(bottleneck, k, slowest(gpus))
	return float64(m.RefGPUs) * ref / step, 1 - busy/(float64(k)*bottleneck)
}

// stepTime is the step time on k reference-speed GPUs whose bottleneck
// compute time is compute.
func (m Model) stepTime(compute float64, k int) float64 { return m.stepTimeAt(compute, k, 1) }

// stepTimeAt is the step time on k GPUs whose bottleneck compute time is
// compute and whose slowest GPU has speed syncSpeed (> 0): the
// synchronisation term is the reference one divided by syncSpeed.
func (m Model) stepTimeAt(compute float64, k int, syncSpeed float64) float64 {
	if k <= 1 {
		return compute
	}
	cref := float64((m.LogicalWorkers + m.RefGPUs - 1) / m.RefGPUs)
	sync := (m.SyncAlpha + m.SyncBeta*float64(k-2)) * cref / syncSpeed
	if m.Gamma == 1 {
		return compute + sync
	}
	return math.Pow(math.Pow(compute, m.Gamma)+math.Pow(sync, m.Gamma), 1/m.Gamma)
}

// slowest returns the smallest positive speed among gpus with a GPU (1
// when there is none).
func slowest(gpus []SpeedCount) float64 {
	s := math.Inf(1)
	for _, g := range gpus {
		if g.N > 0 && g.Speed > 0 {
			s = min(s, g.Speed)
		}
	}
	if math.IsInf(s, 1) {
		return 1
	}
	return s
}

// bottleneck places L unit ESTs on the GPUs grouped by speed, returning the
// optimal max(load/speed), the total busy time Σ load/speed and the GPU
// count k. It walks the multiset {j/s_t : j ≥ 1}, n_t copies each, in
// increasing order and stops at the L-th element (see Place).
func bottleneck(l int, gpus []SpeedCount) (float64, float64, int) {
	type level struct {
		s float64
		n int
		j int
	}
	lv := make([]level, 0, len(gpus))
	k := 0
	for _, g := range gpus {
		if g.N > 0 && g.Speed > 0 {
			lv = append(lv, level{s: g.Speed, n: g.N, j: 1})
			k += g.N
		}
	}
	if k == 0 || l <= 0 {
		return math.Inf(1), 0, k
	}
	sort.Slice(lv, func(a, b int) bool { return lv[a].s > lv[b].s })
	left, busy, last := l, 0.0, 0.0
	for left > 0 {
		best := 0
		for i := 1; i < len(lv); i++ {
			if float64(lv[i].j)/lv[i].s < float64(lv[best].j)/lv[best].s {
				best = i
			}
		}
		take := min(left, lv[best].n)
		busy += float64(take) / lv[best].s
		last = float64(lv[best].j) / lv[best].s
		left -= take
		lv[best].j++
	}
	return last, busy, k
}
