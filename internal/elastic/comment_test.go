package elastic

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseCommentReadsBothForms(t *testing.T) {
	tests := []struct {
		name    string
		comment string
		want    Comment
	}{
		{
			name:    "the submission form of an elastic job",
			comment: "es-req min=1 max=4 lw=8 d1",
			want:    Comment{Request: Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D1}},
		},
		{
			name:    "the submission form of a fixed-size job",
			comment: "es-req lw=2 d2",
			want:    Comment{Request: Request{LogicalWorkers: 2, Determinism: D2}},
		},
		{
			name:    "the status form keeps the request",
			comment: "es step=1200/5000 workers=6/8 d1 req=1-4",
			want: Comment{Request: Request{MinNodes: 1, MaxNodes: 4, LogicalWorkers: 8, Determinism: D1},
				Progress: &Progress{Step: 1200, TotalSteps: 5000, Workers: 6}},
		},
		{
			name:    "the status form of the issue without req",
			comment: "es step=40/40 workers=3/8 d1",
			want: Comment{Request: Request{LogicalWorkers: 8, Determinism: D1},
				Progress: &Progress{Step: 40, TotalSteps: 40, Workers: 3}},
		},
		{
			name:    "a run that starts over where its checkpoint has other numerics",
			comment: "es step=7/10 workers=2/4 d1 req=1-2 numerics=start-over speeds=t4:1,v100:3.1",
			want: Comment{Request: Request{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 4, Determinism: D1, Speeds: map[string]float64{"t4": 1, "v100": 3.1}},
				Progress: &Progress{Step: 7, TotalSteps: 10, Workers: 2, StartsOver: true}},
		},
		{
			name:    "the submission form has no numerics= (a reader skips it)",
			comment: "es-req min=1 max=2 lw=4 d1 numerics=start-over",
			want:    Comment{Request: Request{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 4, Determinism: D1}},
		},
		{
			name:    "unknown key=value fields and extra spaces are skipped",
			comment: "es  step=0/10 workers=1/2 eta=5m d2  req=1-2",
			want: Comment{Request: Request{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 2, Determinism: D2},
				Progress: &Progress{Step: 0, TotalSteps: 10, Workers: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseComment(tc.comment)
			if err != nil {
				t.Fatalf("ParseComment: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v %+v, want %+v %+v", got, got.Progress, tc.want, tc.want.Progress)
			}
		})
	}
}

func TestParseCommentRefusesMalformedComments(t *testing.T) {
	tests := []struct {
		name, comment, field string
	}{
		{"a user comment is not ours", "my experiment 3", ""},
		{"an empty comment is not ours", "", ""},
		{"a reversed range", "es-req min=4 max=2 d1", ""},
		{"a missing determinism level", "es-req min=1 max=2", ""},
		{"a repeated key", "es-req lw=2 lw=3 d1", "lw=3"},
		{"a bare unknown word", "es-req lw=2 d1 fast", "fast"},
		{"min without max", "es-req min=2 d1", ""},
		{"a status without workers", "es step=1/2 d1", ""},
		{"a step beyond the total", "es step=3/2 workers=1 d1", "step=3/2"},
		{"a step without total", "es step=3 workers=1 d1", "step=3"},
		{"more nodes than logical workers", "es step=1/2 workers=1/2 d1 req=1-4", ""},
		{"a negative worker count", "es step=1/2 workers=-1 d1", "workers=-1"},
		{"a numerics= value the runtime never writes", "es step=1/2 workers=1 d1 numerics=refuse", "numerics=refuse"},
		{"numerics= twice", "es step=1/2 workers=1 d1 numerics=start-over numerics=start-over", "numerics=start-over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseComment(tc.comment)
			var ce *CommentError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseComment(%q) error %v, want *CommentError", tc.comment, err)
			}
			if ce.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ce.Field, tc.field, err)
			}
		})
	}
}

func TestParseCommentTellsForeignCommentsApart(t *testing.T) {
	_, err := ParseComment("elastic:1-4")
	if !errors.Is(err, ErrNotEasyScale) {
		t.Errorf("error %v does not wrap ErrNotEasyScale", err)
	}
	_, err = ParseComment(strings.Repeat("x", 5000))
	if err == nil || errors.Is(err, ErrNotEasyScale) {
		t.Errorf("over-long comment gave %v, want a length error", err)
	}
}

func FuzzParseComment(f *testing.F) {
	for _, s := range []string{"es-req min=1 max=4 lw=8 d1", "es step=1200/5000 workers=6/8 d1 req=1-4",
		"es step=0/0 workers=1 d2", "es-req d2", "es x=y d1", "es-req min=0 max=1 d1",
		"es-req min=1 max=2 lw=4 d1 speeds=t4:0.4,v100:1", "es step=1/2 workers=1/4 d2 req=1-2 speeds=a100:2.1",
		"es step=3/9 workers=1/4 d1 numerics=start-over"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseComment(s)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to a canonical form that parses to the same value.
		back, err := ParseComment(c.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c.String(), s, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %q: %+v became %+v", s, c, back)
		}
	})
}
