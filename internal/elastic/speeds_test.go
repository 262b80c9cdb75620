package elastic

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseSpeeds(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]float64
		err  string
	}{
		{name: "no field means the site's table", in: "", want: nil},
		{name: "one type", in: "v100:1", want: map[string]float64{"v100": 1}},
		{name: "several types in any order", in: "t4:0.4,a100:2.1,v100:1", want: map[string]float64{"t4": 0.4, "a100": 2.1, "v100": 1}},
		{name: "a type twice is refused", in: "t4:0.4,t4:0.5", err: "listed twice"},
		{name: "a zero speed is refused", in: "t4:0", err: "> 0"},
		{name: "a speed above 100 is refused", in: "t4:101", err: "≤ 100"},
		{name: "a negative speed is refused", in: "t4:-1", err: "plain decimal"},
		{name: "an exponent is refused", in: "t4:1e-3", err: "plain decimal"},
		{name: "NaN is refused", in: "t4:NaN", err: "plain decimal"},
		{name: "an entry without a colon is refused", in: "t4", err: "TYPE:SPEED"},
		{name: "a type with a space or '=' is refused", in: "t 4:1", err: "TYPE:SPEED"},
		{name: "an empty entry is refused", in: "t4:1,", err: "TYPE:SPEED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpeeds(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrBadSpeeds) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSpeeds(%q) = %v, %v; want an ErrBadSpeeds error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseSpeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestCommentCarriesSpeedsBackwardCompatibly checks the optional speeds=
// field: both forms write it last and read it back, a comment without it
// parses as before (Speeds nil), and the field is what an older reader
// skips (an unknown key=value token): the comment with the field removed
// gives the same request without speeds.
func TestCommentCarriesSpeedsBackwardCompatibly(t *testing.T) {
	req := Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D1, Speeds: map[string]float64{"t4": 0.4, "v100": 1}}
	for _, c := range []Comment{{Request: req}, {Request: req, Progress: &Progress{Step: 3, TotalSteps: 10, Workers: 2}}} {
		s := c.String()
		if !strings.HasSuffix(s, " speeds=t4:0.4,v100:1") {
			t.Errorf("comment %q: want speeds= last", s)
		}
		back, err := ParseComment(s)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Errorf("ParseComment(%q) = %+v, %v; want %+v", s, back, err, c)
		}
		old := strings.TrimSuffix(s, " speeds=t4:0.4,v100:1")
		without, err := ParseComment(old)
		if err != nil || without.Request.Speeds != nil {
			t.Errorf("ParseComment(%q) = %+v, %v; want no speeds", old, without, err)
		}
		want := c
		want.Request.Speeds = nil
		if !reflect.DeepEqual(without, want) {
			t.Errorf("without speeds= %+v, want %+v", without, want)
		}
	}
	for _, bad := range []string{"es-req d1 speeds=", "es-req d1 speeds=t4:0", "es-req d1 speeds=t4:1 speeds=t4:1"} {
		if _, err := ParseComment(bad); err == nil {
			t.Errorf("ParseComment(%q) accepted a bad speeds= field", bad)
		}
	}
}

func FuzzParseSpeeds(f *testing.F) {
	for _, s := range []string{"", "v100:1", "t4:0.4,a100:2.1", "t4:0.1000000000000000055511151231257827", "x:100", "a:1,a:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpeeds(s)
		if err != nil {
			return
		}
		for typ, v := range sp {
			if !(v > 0 && v <= MaxSpeed) || math.IsNaN(v) || !gresType(typ) {
				t.Fatalf("ParseSpeeds(%q) accepted %q:%v", s, typ, v)
			}
		}
		back, err := ParseSpeeds(FormatSpeeds(sp))
		if err != nil || !reflect.DeepEqual(back, sp) {
			t.Fatalf("round trip of %q via %q: %v, %v", s, FormatSpeeds(sp), back, err)
		}
	})
}
