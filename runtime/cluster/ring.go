package cluster

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/collective"
)

// ring is the all-reduce the cluster uses (runtime/collective's Ring).
type ring interface {
	// AllReduceNotify leaves in out the canonical reduction of every
	// member's local gradients (this member holds ESTs firstEST.. in
	// order), calling contributed (on a member other than the last) once
	// this member's part is sent (collective.Ring.AllReduceNotify).
	AllReduceNotify(ctx context.Context, out []float32, local [][]float32, firstEST int, scale float32, contributed func()) error
	Close() error
}

// ringConnector builds this member's ring endpoint for rank among members,
// accepting its predecessor on ln; epoch identifies the ring.
type ringConnector func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error)

// RingStallTimeout bounds how long a ring link may go without progress
// (unless the I/O timeout is longer). A rank waits on its link while its
// neighbours still compute their logical workers, which takes as long as a
// step does, so the bound is long; a dead, cut-off or silent member is found
// sooner by the coordinator's heartbeats, which close the ring on every
// member (invalidateRing, Abort) so no all-reduce waits for this bound (a
// released rank forwarding a committed step's result waits at most the I/O
// timeout; allReduce).
const RingStallTimeout = 10 * time.Minute

// connectCollective returns a ringConnector over runtime/collective whose
// links are authenticated with the job secret and whose I/O stalls fail
// after max(ioTimeout, RingStallTimeout). epoch tags the ring so links of
// an older ring are refused.
func connectCollective(ioTimeout time.Duration, secret auth.Secret, jobID string) ringConnector {
	ioTimeout = max(ioTimeout, RingStallTimeout)
	return func(ctx context.Context, rank int, members []ringMember, ln net.Listener, epoch int64) (ring, error) {
		tl, ok := ln.(collective.Listener)
		if !ok {
			return nil, fmt.Errorf("ring listener %T cannot set deadlines", ln)
		}
		ms := make([]collective.Member, len(members))
		for i, m := range members {
			ms[i] = collective.Member{Rank: m.Rank, Addr: m.Addr}
		}
		r, err := collective.Connect(ctx, rank, ms, tl, collective.Options{
			Timeout: ioTimeout, Epoch: uint64(epoch), Auth: &auth.Config{JobID: jobID, Secret: secret},
		})
		if err != nil {
			return nil, err // not a ring holding a nil *collective.Ring
		}
		return r, nil
	}
}
