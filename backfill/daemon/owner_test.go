package daemon

import (
	"fmt"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// TestOwnerKeysKeepStandInsApart: per-user sums are keyed by the printed
// name where it gives the job's uid, and by the uid where squeue printed a
// stand-in, so that two users 22.05 prints as "nobody" during an outage
// are not one user, nor the real nobody.
func TestOwnerKeysKeepStandInsApart(t *testing.T) {
	names := map[string]uint32{"alice": 1001, "nobody": 65534, "23184": 4000} // "23184": an account named with digits
	v := &View{userID: func(name string) (uint32, error) {
		if id, ok := names[name]; ok {
			return id, nil
		}
		return 0, fmt.Errorf("user: unknown user %s", name)
	}}
	for _, tc := range []struct {
		name, user, uid, want string
	}{
		{"a name that gives the job's uid", "alice", "1001", "alice"},
		{"the real nobody", "nobody", "65534", "nobody"},
		{"22.05's stand-in for one user", "nobody", "4102", "uid:4102"},
		{"22.05's stand-in for another user", "nobody", "4103", "uid:4103"},
		{"24.11's stand-in", "4102", "4102", "uid:4102"},
		{"a name that gives another uid", "alice", "1002", "uid:1002"},
		{"an account named with another user's uid", "23184", "23184", "uid:23184"},
		{"that account's own job", "23184", "4000", "23184"},
		{"no uid read: the name", "bob", "", "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := v.ownerKey(slurmcli.Job{User: tc.user, UID: tc.uid}); got != tc.want {
				t.Fatalf("ownerKey(user %q, uid %q) = %q, want %q", tc.user, tc.uid, got, tc.want)
			}
		})
	}
}
