package planner

import (
	"reflect"
	"testing"
)

func TestFit(t *testing.T) {
	c := NewCluster([]Node{{Name: "v0", GPUType: "v100", Total: 4}, {Name: "v1", GPUType: "v100", Total: 4},
		{Name: "a0", GPUType: "a100", Total: 4}}, map[string]float64{"v100": 1, "a100": 2})
	tests := []struct {
		name  string
		avail []int
		want  int
		rule  FitRule
		got   []Alloc
	}{
		{"a job that fits on one node gets the fastest type's node", []int{4, 4, 4}, 2, FitRule{}, []Alloc{{2, 2}}},
		{"among nodes of one type the best-fitting one is chosen", []int{4, 2, 0}, 2, FitRule{}, []Alloc{{1, 2}}},
		{"a job too big for one node spans the fullest nodes of one type", []int{3, 4, 1}, 6, FitRule{}, []Alloc{{1, 4}, {0, 2}}},
		{"a job too big for any one type spans types, fastest first", []int{2, 2, 3}, 6, FitRule{}, []Alloc{{2, 3}, {0, 2}, {1, 1}}},
		{"a one-type job never spans types", []int{2, 2, 3}, 6, FitRule{OneType: true}, nil},
		{"a job that names its type runs only on it", []int{1, 1, 4}, 2, FitRule{Types: []string{"v100"}}, []Alloc{{0, 1}, {1, 1}}},
		{"no allocation when too few GPUs are available", []int{1, 1, 1}, 4, FitRule{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Fit(tc.avail, tc.want, tc.rule); !reflect.DeepEqual(got, tc.got) {
				t.Errorf("Fit = %v, want %v", got, tc.got)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	c := NewCluster([]Node{{Name: "n0", GPUType: "v100", Total: 4}, {Name: "n1", GPUType: "v100", Total: 4}}, nil)
	long := Donor{Base: []Alloc{{0, 4}}, Min: 2, TimeLeft: 10000}
	tests := []struct {
		name   string
		req    AdmitRequest
		want   Admission
		wantOK bool
	}{
		{
			name:   "a longer job yields the GPUs a short queued job lacks, down to what is needed",
			req:    AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 100, Donors: []Donor{long}},
			want:   Admission{Alloc: []Alloc{{0, 1}}, Shrinks: []DonorShrink{{Donor: 0, Node: 0, GPUs: 1}}},
			wantOK: true,
		},
		{
			name: "a job with less time left than the queued job's work never yields",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 20000, Donors: []Donor{long}},
		},
		{
			name: "a donor never goes below its minimum",
			req:  AdmitRequest{Avail: []int{0, 0}, Want: 3, Work: 100, Donors: []Donor{long}},
		},
		{
			name: "a donor on a node a reservation needs is kept",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 1, Work: 100, Donors: []Donor{long},
				KeepOff: func(n int) bool { return n == 0 }},
		},
		{
			name: "the donor with the most time left yields first",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 2, Work: 100,
				Donors: []Donor{long, {Base: []Alloc{{1, 4}}, Min: 1, TimeLeft: 50000}}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 1, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "with whole nodes a one-node job keeps its node and a two-node job gives up one",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 2, Work: 100, WholeNodes: true,
				Donors: []Donor{{Base: []Alloc{{0, 4}}, Min: 1, TimeLeft: 99999}, {Base: []Alloc{{1, 2}, {0, 2}}, Min: 2, TimeLeft: 9999}}},
			want:   Admission{Alloc: []Alloc{{1, 2}}, Shrinks: []DonorShrink{{Donor: 1, Node: 1, GPUs: 2}}},
			wantOK: true,
		},
		{
			name: "with whole nodes a job never gives up its last node",
			req: AdmitRequest{Avail: []int{0, 0}, Want: 4, Work: 100, WholeNodes: true,
				Donors: []Donor{{Base: []Alloc{{0, 4}}, Min: 0, TimeLeft: 99999}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			avail := append([]int(nil), tc.req.Avail...)
			got, ok := c.Admit(tc.req)
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Admit = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
			if !reflect.DeepEqual(avail, tc.req.Avail) {
				t.Errorf("Admit changed Avail: %v, was %v", tc.req.Avail, avail)
			}
		})
	}
}

func TestRunTime(t *testing.T) {
	m := DefaultModel(4, 2)
	if got := RunTime(m, []SpeedCount{{Speed: 1, N: 2}}, 1000); got < 999.999 || got > 1000.001 {
		t.Errorf("RunTime at the reference size = %v s, want the work, 1000 s", got)
	}
	if got := RunTime(m, nil, 1000); got < 1e308 {
		t.Errorf("RunTime on no GPUs = %v, want +Inf", got)
	}
}
