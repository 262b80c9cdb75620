package slurmjob

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// TestStatusWritesTheStatusForm: the comment scontrol gets is the status
// form of the request and the progress, with numerics=start-over only for
// a run that starts over (the backfill daemon reads it before moving a d1
// job to another GPU type).
func TestStatusWritesTheStatusForm(t *testing.T) {
	req := elastic.Request{MinNodes: 1, MaxNodes: 2, LogicalWorkers: 4, Determinism: elastic.D1}
	for _, tc := range []struct {
		startsOver bool
		want       string
	}{
		{false, "Comment=es step=10/10 workers=2/4 d1 req=1-2"},
		{true, "Comment=es step=10/10 workers=2/4 d1 req=1-2 numerics=start-over"},
	} {
		var mu sync.Mutex
		var calls [][]string
		runner := slurmcli.Runner{Exec: func(_ context.Context, _ []string, name string, args ...string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, append([]string{name}, args...))
			return nil, nil
		}}
		s := &Status{JobID: "42", Request: req, Runner: runner, StartsOver: tc.startsOver}
		s.Update(10, 10, 2, true)
		mu.Lock()
		if len(calls) != 1 || calls[0][0] != "scontrol" || !slices.Contains(calls[0], tc.want) {
			t.Fatalf("StartsOver %v: calls %q, want one scontrol update with %q", tc.startsOver, calls, tc.want)
		}
		c, err := elastic.ParseComment(strings.TrimPrefix(tc.want, "Comment="))
		if err != nil || c.Progress.StartsOver != tc.startsOver {
			t.Fatalf("the comment reads back as %+v, %v", c.Progress, err)
		}
		mu.Unlock()
	}
}
