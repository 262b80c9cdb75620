package slurmcli

import (
	"strings"
	"testing"
	"time"
)

func TestParseBackfillInterval(t *testing.T) {
	tests := []struct {
		name, out string
		want      time.Duration
		err       bool
	}{
		{"the lab's (22.05 and 24.11)", "SchedulerParameters     = bf_interval=1\nSchedulerTimeSlice      = 30 sec\n", time.Second, false},
		{"among other options", "SchedulerParameters     = bf_max_job_test=500,bf_interval=60,bf_continue\n", time.Minute, false},
		{"not set: Slurm's default", "SchedulerParameters     = (null)\n", DefaultBackfillInterval, false},
		{"other options only", "SchedulerParameters     = bf_continue\n", DefaultBackfillInterval, false},
		{"no such line", "SlurmdTimeout           = 300 sec\n", 0, true},
		{"not a number", "SchedulerParameters     = bf_interval=soon\n", 0, true},
		{"out of range", "SchedulerParameters     = bf_interval=0\n", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseBackfillInterval([]byte(tc.out))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseBackfillInterval(f *testing.F) {
	f.Add([]byte("SchedulerParameters     = bf_interval=1\n"))
	f.Add([]byte("SchedulerParameters = (null)\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		d, err := ParseBackfillInterval(out)
		if err == nil && (d < time.Second || d > 10800*time.Second) {
			t.Fatalf("bf_interval %v out of range from %q", d, out)
		}
	})
}

func TestParseSchedulerConfig(t *testing.T) {
	for _, tc := range []struct {
		out     string
		preempt string
		byTier  bool
	}{
		{"PreemptType             = preempt/partition_prio\nSchedulerParameters     = bf_interval=1\n", "preempt/partition_prio", true},
		{"PreemptType = preempt/none\nSchedulerParameters = (null)\n", "preempt/none", false},
		{"SchedulerParameters = (null)\n", "", false},
	} {
		c, err := ParseSchedulerConfig([]byte(tc.out))
		if err != nil || c.PreemptType != tc.preempt || c.PartitionPreemption() != tc.byTier {
			t.Errorf("%q: %+v, %v; want PreemptType %q (partition preemption %v)", tc.out, c, err, tc.preempt, tc.byTier)
		}
	}
	if _, err := ParseSchedulerConfig([]byte("PreemptType = preempt/none\n")); err == nil {
		t.Error("no SchedulerParameters line: no error")
	}
}

func FuzzParseSchedulerConfig(f *testing.F) {
	f.Add([]byte("PreemptType = preempt/partition_prio\nSchedulerParameters     = bf_interval=1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		c, err := ParseSchedulerConfig(out)
		if err == nil && strings.ContainsAny(c.PreemptType, " \t\n") {
			t.Fatalf("PreemptType %q with blanks from %q", c.PreemptType, out)
		}
	})
}
