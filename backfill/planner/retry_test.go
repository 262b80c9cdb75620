package planner

import (
	"reflect"
	"testing"
)

func TestLendOutcome(t *testing.T) {
	// A lend submitted at 1000 with a 10-minute limit: its limit ends at 1600.
	running := LendEnd{Seen: 1010, End: 1600, ParentRunning: true}
	tests := []struct {
		name   string
		change func(*LendEnd)
		want   LendOutcome
	}{
		{"a lend that FAILED seconds after it started while its job runs failed", func(e *LendEnd) { e.State = "FAILED" }, LendFailed},
		{"so did one squeue no longer lists: the times decide, not the state", func(e *LendEnd) { e.State = "" }, LendFailed},
		{"so did one that COMPLETED long before its limit (its worker left)", func(e *LendEnd) { e.State, e.Seen = "COMPLETED", 1300 }, LendFailed},
		{"so did one its user cancelled", func(e *LendEnd) { e.State = "CANCELLED by 1000" }, LendFailed},
		{"one seen ended exactly the slack before its limit failed", func(e *LendEnd) { e.Seen = 1600 - FailureSlackSeconds }, LendFailed},
		{"one that ran to within the slack of its limit succeeded", func(e *LendEnd) { e.Seen = 1600 - FailureSlackSeconds + 1 }, LendSucceeded},
		{"one killed at its limit succeeded", func(e *LendEnd) { e.State, e.Seen = "TIMEOUT", 1605 }, LendSucceeded},
		{"one the daemon shrank says nothing", func(e *LendEnd) { e.Shrunk = true }, LendNeutral},
		{"nor does one whose job no longer runs", func(e *LendEnd) { e.ParentRunning = false }, LendNeutral},
		{"nor does one Slurm preempted for another partition's job", func(e *LendEnd) { e.State = "PREEMPTED" }, LendNeutral},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := running
			tc.change(&e)
			if got := e.Outcome(); got != tc.want {
				t.Errorf("%+v: outcome %v, want %v", e, got, tc.want)
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	p := RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600}
	for failures, want := range []int64{0, 60, 120, 240, 480, 960, 1920, 3600, 3600} {
		if got := p.Backoff(failures); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", failures, got, want)
		}
	}
	if got := p.Backoff(1000); got != 3600 {
		t.Errorf("Backoff(1000) = %d, want the cap 3600", got)
	}
	if got := (RetryPolicy{BaseSeconds: 60}).Backoff(1000); got <= 0 {
		t.Errorf("uncapped Backoff(1000) = %d: overflowed", got)
	}
	if got := (RetryPolicy{}).Backoff(5); got != 0 {
		t.Errorf("the zero policy waits %d s, want 0", got)
	}
}

func TestLendHistoryRecord(t *testing.T) {
	var h LendHistory
	h = h.Record("n2", LendFailed, 100, "s1")
	h = h.Record("n1", LendFailed, 200, "s1")
	h = h.Record("n2", LendFailed, 300, "s2")
	want := LendHistory{Failures: 3, Last: 300, Status: "s2",
		Nodes: []NodeFailures{{Node: "n1", Failures: 1, Last: 200}, {Node: "n2", Failures: 2, Last: 300}}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("after three failures: %+v, want %+v", h, want)
	}
	if got := h.Record("n3", LendNeutral, 400, "s3"); !reflect.DeepEqual(got, h) {
		t.Errorf("a neutral end changed the history: %+v", got)
	}
	ok := h.Record("n1", LendSucceeded, 400, "s2")
	wantOK := LendHistory{Status: "s2", Nodes: []NodeFailures{{Node: "n2", Failures: 2, Last: 300}}}
	if !reflect.DeepEqual(ok, wantOK) {
		t.Errorf("after a success on n1: %+v, want %+v (the job's count cleared, n2's kept)", ok, wantOK)
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("Record modified its receiver: %+v", h)
	}
	if e := ok.Record("n2", LendSucceeded, 500, "s2"); !e.Empty() || e.Nodes != nil {
		t.Errorf("after successes on every node: %+v, want an empty history", e)
	}
}

func TestRetryRule(t *testing.T) {
	p := RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600, StopAfter: 3}
	one := LendHistory{Failures: 1, Last: 1000, Status: "s", Nodes: []NodeFailures{{Node: "n2", Failures: 1, Last: 1000}}}
	tests := []struct {
		name   string
		h      LendHistory
		status string
		now    int64
		want   LendVerdict
		held   bool
	}{
		{"a job with no failed lend may grow anywhere", LendHistory{}, "s", 1000, LendVerdict{}, false},
		{"one failure holds the job for the base wait", one, "s", 1059,
			LendVerdict{Until: 1060, Nodes: []string{"n2"}}, true},
		{"and then lets it grow again", one, "s", 1060, LendVerdict{}, false},
		{"the wait doubles with each consecutive failure",
			LendHistory{Failures: 2, Last: 1000, Status: "s", Nodes: []NodeFailures{{Node: "n2", Failures: 2, Last: 1000}}}, "s", 1119,
			LendVerdict{Until: 1120, Nodes: []string{"n2"}}, true},
		{"up to the cap",
			LendHistory{Failures: 2, Last: 1000, Status: "s", Nodes: []NodeFailures{{Node: "n2", Failures: 20, Last: 1000}}}, "s", 4599,
			LendVerdict{Nodes: []string{"n2"}}, false},
		{"a node that keeps failing after a success elsewhere backs off alone",
			LendHistory{Status: "s", Nodes: []NodeFailures{{Node: "n2", Failures: 4, Last: 1000}, {Node: "n3", Failures: 1, Last: 900}}}, "s", 1100,
			LendVerdict{Nodes: []string{"n2"}}, false},
		{"after StopAfter consecutive failures the job is stopped however long ago",
			LendHistory{Failures: 3, Last: 1000, Status: "s"}, "s", 1000000,
			LendVerdict{Stopped: true}, true},
		{"until its status changes",
			LendHistory{Failures: 3, Last: 1000, Status: "s"}, "t", 1000000, LendVerdict{}, false},
		{"a status change lifts the stop but not the backoff",
			LendHistory{Failures: 3, Last: 1000, Status: "s"}, "t", 1100, LendVerdict{Until: 1240}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.MayLend(tc.h, tc.status, tc.now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MayLend = %+v, want %+v", got, tc.want)
			}
			if got.Held(tc.now) != tc.held {
				t.Errorf("Held = %v, want %v", got.Held(tc.now), tc.held)
			}
		})
	}
	never := RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600}
	if v := never.MayLend(LendHistory{Failures: 50, Last: 1000, Status: "s"}, "s", 5000); v.Held(5000) {
		t.Errorf("StopAfter 0 stopped a job: %+v", v)
	}
}

// TestAJobWhoseLendsKeepFailingGetsFewLends plays the rule against a job
// whose every lend fails at once, one plan a minute for a day: the lends
// follow the doubling waits, stop after StopAfter, and a status change
// each hour (a user touching a file) buys one more lend per capped wait,
// not one per change.
func TestAJobWhoseLendsKeepFailingGetsFewLends(t *testing.T) {
	p := RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600, StopAfter: 5}
	for _, tc := range []struct {
		name         string
		statusChange int64 // seconds between status changes (0: never)
		want         []int64
	}{
		{"a status that never changes", 0, []int64{0, 120, 300, 600, 1140}},
		{"a status changed every minute", 60, []int64{0, 120, 300, 600, 1140, 2160, 4140, 7800, 11460, 15120, 18780, 22440,
			26100, 29760, 33420, 37080, 40740, 44400, 48060, 51720, 55380, 59040, 62700, 66360, 70020, 73680, 77340, 81000, 84660}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h LendHistory
			var lends []int64
			for now := int64(0); now < 86400; now += 60 {
				status := "s"
				if tc.statusChange > 0 {
					status = string(rune('a' + now/tc.statusChange%26))
				}
				if p.MayLend(h, status, now).Held(now) {
					continue
				}
				lends = append(lends, now)
				// It fails at once: seen ended in the next plan.
				h = h.Record("n1", LendEnd{Seen: now + 60, End: now + 3600, ParentRunning: true}.Outcome(), now+60, status)
				now += 60
			}
			if !reflect.DeepEqual(lends, tc.want) {
				t.Errorf("lends at %v, want %v", lends, tc.want)
			}
		})
	}
}
