package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// A standby is the worker that can take the coordinator's place when the
// coordinator's node is lost (issue 20 item 1; docs/first-node-loss.md).
// Every data-parallel worker holds the committed replica already; what only
// the coordinator holds is every logical worker's context (the lost node's
// ESTs' cursors and buffers among them). With CoordinatorOptions.Standby set,
// the coordinator sends the lowest-ranked member on another node than its own
// (standbyRank) those contexts with every step message (typeStandby, just
// before it): the contexts at the start of that step, that is the
// committed state of the step before, which the ledger already records. The
// standby applies the commit the step message carries and copies its
// replica and the contexts aside (session.keepStandby): a copy of the
// committed state one step behind the coordinator at most. When the
// coordinator's connection is lost, RunWorker with WorkerOptions.Takeover
// returns a *TakeoverError carrying the copy; the caller writes it as a
// checkpoint into the job's state directory (taking the state database's
// writer lock, which a live coordinator holds: that lock is the fence
// against two coordinators) and becomes the coordinator, resuming at the
// copy's step. The other survivors find it through WorkerOptions.Locate.

// StandbyCopy is a standby's copy of the coordinator's committed state: the
// replica (parameters and optimizer state) and every EST's context at the
// start of step Step. It is the copy's own memory, kept while the worker
// goes on.
type StandbyCopy struct {
	Spec *jobspec.Spec
	// Data is the training data the standby's workload read.
	Data data.Manifest
	// Step is the first step not committed: the copy is the state after
	// steps 0..Step-1 (a checkpoint of step Step).
	Step    int64
	Replica *trainer.Replica
	// ESTs are all of the job's logical workers' contexts, indexed by id.
	ESTs []*trainer.ESTContext
	// File and Contexts are an engine's copy instead (Replica and ESTs
	// nil): the checkpoint file of step Step its process wrote, and every
	// logical worker's context as the engine checkpoints it
	// (statedb.SaveCheckpointFile). A torch job's standby holds these
	// (runtime/torchengine join.go).
	File     []byte
	Contexts []statedb.ESTContext
	// Members is the number of workers in step Step; Lost of them ran on
	// the coordinator's node.
	Members, Lost int
	// Ledger is the coordinator's ledger as the standby was sent it
	// (ledgerfeed.go), or nil; the takeover imports its rows of steps
	// 1..Step where the state directory lacks them (a node-local one).
	Ledger *StandbyLedger
	// Warm is what an engine's standby started ahead for the coordinator
	// it becomes (a torch standby's spare Python process,
	// *torchengine.Spare), or nil. Whoever does not hand it on closes it
	// (Release).
	Warm io.Closer
}

// Release closes c.Warm, when there is one, and forgets it: for a copy
// that is not taken over from, or whose engine will not adopt it.
func (c *StandbyCopy) Release() {
	if c != nil && c.Warm != nil {
		_ = c.Warm.Close()
		c.Warm = nil
	}
}

// Survivors is the number of workers expected to remain when the
// coordinator's node is lost (at least 1: the standby).
func (c *StandbyCopy) Survivors() int { return max(1, c.Members-c.Lost) }

// Checkpoint is a native copy as the native engine checkpoints it
// (trainer.ReplicaSnapshot) with the metadata its checkpoints carry.
func (c *StandbyCopy) Checkpoint() trainer.Snapshot {
	snap := trainer.ReplicaSnapshot(c.Replica, c.ESTs)
	snap.Meta = map[string]string{"job_id": c.Spec.ID(), "step": strconv.FormatInt(c.Step, 10),
		"digest": trainer.ReplicaDigest(c.Replica, c.ESTs[0]), "written_by": "standby"}
	return snap
}

// TakeoverError is returned by RunWorker (with WorkerOptions.Takeover) when
// this worker was the coordinator's standby and lost the coordinator:
// Copy is the committed state it holds, Cause how the coordinator was
// lost. The caller may take over (see the comment at the top of
// standby.go) or, when the coordinator turns out alive, run the worker
// again.
type TakeoverError struct {
	Copy  *StandbyCopy
	Cause error
}

func (e *TakeoverError) Error() string {
	return fmt.Sprintf("lost the coordinator holding its state of step %d as its standby: %v", e.Copy.Step, e.Cause)
}

func (e *TakeoverError) Unwrap() error { return e.Cause }

// onCoordinatorNode reports whether member m runs on the coordinator's
// node, and so goes with it: the same Slurm node when both are known, else
// the coordinator's own process (its local worker).
func (c *Coordinator) onCoordinatorNode(m *member) bool {
	if c.o.Node != "" && m.join.Node != "" {
		return m.join.Node == c.o.Node
	}
	hn, _ := os.Hostname()
	return m.join.PID == os.Getpid() && m.join.Host == hn
}

// standbyRank is the rank of the coordinator's standby: the lowest rank
// not on the coordinator's node (-1: none, or CoordinatorOptions.Standby
// is off); lost counts the members on the coordinator's node.
func (c *Coordinator) standbyRank() (rank, lost int) {
	rank = -1
	if !c.o.Standby {
		return rank, 0
	}
	for r, m := range c.members {
		if c.onCoordinatorNode(m) {
			lost++
		} else if rank < 0 {
			rank = r
		}
	}
	return rank, lost
}

// standbyState is the standby message of step (every EST's cursor at its
// start, ests indexed by id) and the ESTs' buffers, concatenated in id
// order.
func standbyState(step int64, ests []*trainer.ESTContext, members, lost int) (standbyMsg, []float32) {
	msg := standbyMsg{Step: step, Members: members, Lost: lost, ESTs: make([]estState, len(ests))}
	bufs := make([]float32, 0)
	for i, c := range ests {
		msg.ESTs[i] = estState{ID: i, Epoch: c.Cursor.Epoch, Pos: c.Cursor.Pos}
		for _, b := range c.Buffers {
			bufs = append(bufs, b.T.Data...)
		}
	}
	return msg, bufs
}

// receiveStandby reads a standby message and its buffers frame; the copy
// is taken when the step message it announces has committed the step
// before (keepStandby).
func (s *session) receiveStandby(b []byte) error {
	var m standbyMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decoding a standby message: %w", err)
	}
	if len(m.ESTs) != s.spec.LogicalWorkers {
		return fmt.Errorf("standby message of step %d: %d contexts, the job has %d logical workers", m.Step, len(m.ESTs), s.spec.LogicalWorkers)
	}
	for i, e := range m.ESTs {
		if e.ID != i {
			return fmt.Errorf("standby message of step %d: context %d is EST %d's", m.Step, i, e.ID)
		}
	}
	ests, _, err := s.receiveContexts(m.ESTs)
	if err != nil {
		return fmt.Errorf("standby message of step %d: %w", m.Step, err)
	}
	s.standbyLedger.Add(m.Ledger)
	s.standbyNext = &pendingStandby{msg: m, ests: ests}
	return nil
}

// pendingStandby is a standby message waiting for its step message.
type pendingStandby struct {
	msg  standbyMsg
	ests []*trainer.ESTContext
}

// keepStandby copies the committed state aside when the standby message
// before step's message announced it: the replica, which the step message's
// commit has just brought to step, and the contexts.
func (s *session) keepStandby(step int64) error {
	p := s.standbyNext
	s.standbyNext = nil
	if p == nil || p.msg.Step != step {
		return nil
	}
	if s.standby == nil {
		rep, err := trainer.NewReplica(s.spec, s.wl, 1)
		if err != nil {
			return fmt.Errorf("step %d: making the standby's replica: %w", step, err)
		}
		s.standby = &StandbyCopy{Spec: s.spec, Data: s.wl.Data(), Replica: rep, Ledger: &s.standbyLedger}
	}
	if err := s.standby.Replica.CopyFrom(s.rep); err != nil {
		s.standby = nil
		return fmt.Errorf("step %d: copying the replica for the standby: %w", step, err)
	}
	s.standby.Step, s.standby.ESTs = step, p.ests
	s.standby.Members, s.standby.Lost = p.msg.Members, p.msg.Lost
	return nil
}
