package schedule

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Schedule
	}{
		{"a bare count is one allocation from step 0", "8", Schedule{{0, 8, nil}}},
		{"steps and counts form several allocations", "0:1,20:3,35:8,50:2", Schedule{{0, 1, nil}, {20, 3, nil}, {35, 8, nil}, {50, 2, nil}}},
		{"speeds follow an at sign", "0:3@3.1/2.4/1", Schedule{{0, 3, []float64{3.1, 2.4, 1}}}},
		{"spaces around entries are ignored", " 0:2 , 5:1 ", Schedule{{0, 2, nil}, {5, 1, nil}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse(%q) = %v, want %v", c.in, got, c.want)
			}
			again, err := Parse(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip of %q via %q gave %v, %v", c.in, got.String(), again, err)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, in, wantMsg string
	}{
		{"an empty string", "", "empty schedule"},
		{"zero workers", "0", "at least 1"},
		{"zero workers in an entry", "0:2,10:0", "entry 2"},
		{"a first entry after step 0", "5:2", "must start at step 0"},
		{"steps out of order", "0:2,10:3,10:4", "increasing step order"},
		{"a non-numeric count", "0:x", "not an integer"},
		{"a missing colon", "0:1,7", "STEP:WORKERS"},
		{"too few speeds", "0:3@1/2", "3 workers"},
		{"a negative speed", "0:2@1/-1", "positive"},
		{"a huge count", "0:99999999", "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error = %v, want *ParseError", c.in, err)
			}
			if !strings.Contains(err.Error(), c.wantMsg) || !strings.Contains(err.Error(), "--workers") {
				t.Fatalf("Parse(%q) error %q does not mention %q and the flag", c.in, err, c.wantMsg)
			}
		})
	}
}

func TestValidateRefusesMoreWorkersThanLogical(t *testing.T) {
	s, err := Parse("0:2,10:9")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(8); err == nil || !strings.Contains(err.Error(), "exceed the job's 8 logical workers") {
		t.Fatalf("Validate(8) = %v, want an error naming the limit", err)
	}
	if err := s.Validate(9); err != nil {
		t.Fatalf("Validate(9) = %v, want nil", err)
	}
}

func TestAt(t *testing.T) {
	s, _ := Parse("0:1,20:3,35:8")
	for _, c := range []struct {
		step int64
		want int
	}{{0, 1}, {19, 1}, {20, 3}, {34, 3}, {35, 8}, {1000, 8}} {
		if got := s.At(c.step).Workers; got != c.want {
			t.Errorf("At(%d) = %d workers, want %d", c.step, got, c.want)
		}
	}
}

func TestNext(t *testing.T) {
	s, _ := Parse("0:1,20:3,35:8")
	for _, c := range []struct {
		step     int64
		want     int
		wantFrom int64
		ok       bool
	}{{0, 3, 20, true}, {19, 3, 20, true}, {20, 8, 35, true}, {34, 8, 35, true}, {35, 0, 0, false}, {1000, 0, 0, false}} {
		got, ok := s.Next(c.step)
		if ok != c.ok || got.Workers != c.want || got.FromStep != c.wantFrom {
			t.Errorf("Next(%d) = %d workers from step %d, %v; want %d from %d, %v", c.step, got.Workers, got.FromStep, ok, c.want, c.wantFrom, c.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"8", "0:1,20:3", "0:3@3.1/2.4/1", "", ":", "0:1@", "0:2@1/2,3:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sch, err := Parse(s)
		if err != nil {
			return
		}
		if len(sch) == 0 || sch[0].FromStep != 0 {
			t.Fatalf("Parse(%q) accepted a schedule not starting at 0: %v", s, sch)
		}
		for i, a := range sch {
			if a.Workers < 1 || (a.Speeds != nil && len(a.Speeds) != a.Workers) {
				t.Fatalf("Parse(%q) accepted a bad allocation %v", s, a)
			}
			if i > 0 && a.FromStep <= sch[i-1].FromStep {
				t.Fatalf("Parse(%q) accepted unordered steps", s)
			}
		}
		again, err := Parse(sch.String())
		if err != nil || again.String() != sch.String() {
			t.Fatalf("round trip of %q failed: %v %v", s, again, err)
		}
	})
}

func ExampleParse() {
	s, _ := Parse("0:1,20:3@2/1/1")
	a := s.At(25)
	fmt.Println(a.Workers, a.Speeds, s)
	// Output: 3 [2 1 1] 0:1,20:3@2/1/1
}
