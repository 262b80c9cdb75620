package planner

import (
	"math"
	"reflect"
	"testing"
)

// linearLoss is a donor that finishes perGPU seconds later per GPU it gives.
func linearLoss(perGPU float64) func(int) float64 {
	return func(g int) float64 { return perGPU * float64(g) }
}

func TestAdmitByTheObjective(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}, {Name: "n1", GPUType: "v100", Total: 4}}, nil)
	// Donor 0 has the most time left but loses more per GPU than donor 1:
	// the old rule took from donor 0, the objective takes from donor 1.
	longCostly := Donor{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 10000, Loss: linearLoss(500)}
	shortCheap := Donor{Base: []Alloc{{1, 4}}, Min: 1, TimeLeft: 3000, Loss: linearLoss(100)}
	tests := []struct {
		name   string
		req    AdmitRequest
		want   Admission
		wantOK bool
	}{
		{
			name:   "the donor that loses least yields, not the one with the most time left",
			req:    AdmitRequest{Avail: []int{0, 0}, Want: 2, Gain: 1000, Donors: []Donor{longCostly, shortCheap}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 1, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "no admission when the donors lose more than the queued job's wait",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 2, Gain: 150, Donors: []Donor{longCostly, shortCheap}},
		},
		{
			name: "a donor never ends after the horizon: the longest job keeps its GPUs",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 2, Gain: 5000, Horizon: 10000, Donors: []Donor{longCostly}},
		},
		{
			name: "unless the queued job, waiting, would end later still: Gain + Work raises the horizon",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 2, Gain: 9500, Work: 2000, Horizon: 10000, Donors: []Donor{longCostly}},
			want: Admission{Alloc: []Alloc{{0, 2}}, Shrinks: []DonorShrink{{Donor: 0, Node: 0, GPUs: 2}}}, wantOK: true,
		},
		{
			name: "a donor gives only as much as keeps it within the horizon",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 3, Gain: 1000, Horizon: 3250,
				Donors: []Donor{shortCheap}},
		},
		{
			name: "within the horizon it yields",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 2, Gain: 1000, Horizon: 3250,
				Donors: []Donor{shortCheap}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "a donor with less time left than the queued job's work may yield when it loses least",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 1e6, Gain: 1000,
				Donors: []Donor{shortCheap}},
			want:   Admission{Alloc: []Alloc{{1, 1}}, Shrinks: []DonorShrink{{Donor: 0, Node: 1, GPUs: 1}}},
			wantOK: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.Admit(tc.req)
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Admit = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestShrinkLoss(t *testing.T) {
	m := DefaultModel(8, 8)
	eight := []SpeedCount{{Speed: 1, N: 8}}
	four := []SpeedCount{{Speed: 1, N: 4}}
	work := 1000.0
	loss := ShrinkLoss(m, eight, four, work, 30)
	want := RunTime(m, four, work) - RunTime(m, eight, work) + 30
	if math.Abs(loss-want) > 1e-9 || !(loss > 30) {
		t.Errorf("ShrinkLoss 8→4 GPUs = %v, want %v (> the 30 s restart)", loss, want)
	}
	if l := ShrinkLoss(m, eight, nil, work, 0); !math.IsInf(l, 1) {
		t.Errorf("ShrinkLoss to no GPU = %v, want +Inf", l)
	}
}

func TestAJobGrowsBackAtOnceWhenNothingIsQueued(t *testing.T) {
	s := Snapshot{Now: 1000, Speeds: map[string]float64{"v100": 1},
		Nodes: []Node{{Name: "n0", GPUType: "v100", Total: 8, Idle: 7}},
		Running: []RunningJob{{ID: "1", User: "u", Elastic: true, Base: []NodeGPUs{{Node: "n0", GPUs: 1}},
			End: 1000 + 86400, MinGPUs: 1, MaxGPUs: 8, Model: DefaultModel(8, 1)}}}
	for _, tc := range []struct {
		name    string
		nothing bool
		want    int
	}{{"while a job waits a job at most doubles", false, 1}, {"when nothing waits it grows to its maximum", true, 7}} {
		t.Run(tc.name, func(t *testing.T) {
			s.NothingQueued = tc.nothing
			acts, err := Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, g := range acts.Grows {
				got += g.GPUs
			}
			if got != tc.want {
				t.Errorf("grew by %d GPUs (%+v), want %d", got, acts.Grows, tc.want)
			}
		})
	}
}

func TestBorrowLoss(t *testing.T) {
	m := DefaultModel(8, 8)
	eight := []SpeedCount{{Speed: 1, N: 8}}
	four := []SpeedCount{{Speed: 1, N: 4}}
	work := 10000.0
	never := ShrinkLoss(m, eight, four, work, 0)
	t8, _ := m.Throughput(eight)
	t4, _ := m.Throughput(four)
	for _, tc := range []struct {
		name   string
		borrow float64
		want   float64
	}{
		{"a short borrow costs the work missed meanwhile", 100, 100*(1-t4/t8) + 2*30},
		{"a borrow past the donor's end costs no more than never getting them back", 1e9, never + 2*30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BorrowLoss(m, eight, four, work, tc.borrow, 30); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("BorrowLoss = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTheHorizonBoundsADonorsDelayNotItsLoss(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}}, nil)
	// Lending 2 GPUs costs little while borrowed (Loss) but would end the
	// donor past the horizon if never given back (Delay).
	d := Donor{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 1000, Loss: linearLoss(1), Delay: linearLoss(400)}
	q := AdmitRequest{Avail: []int{0}, Want: 2, Gain: 100, Horizon: 1500, Donors: []Donor{d}}
	if _, ok := c.Admit(q); ok {
		t.Errorf("admitted although the donor would end at 1800 s, past the 1500 s horizon")
	}
	q.Horizon = 2000
	if _, ok := c.Admit(q); !ok {
		t.Errorf("not admitted although the delay stays within the horizon and the loss is below the gain")
	}
}
