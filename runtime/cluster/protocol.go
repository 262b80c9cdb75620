package cluster

import (
	"encoding/json"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// ProtocolVersion is the coordinator protocol's version; a worker of
// another version is refused at join. Version 2: the join reports the
// worker's training data, and a refusal is sent as typeRefused. Version
// 3: the coordinator is no longer a member of the all-reduce ring (the
// ring's last rank returns the reduced gradient with its StepDone), and
// step S-1's commit travels in step S's message (there is no Commit
// message any more; type 38 is unused).
const ProtocolVersion = 3

// Coordinator protocol message types (wire registry range 32 and up).
const (
	typeJoin      wire.Type = 32 // worker → coordinator, JSON joinMsg: prepared, ready to be admitted
	typeWelcome   wire.Type = 33 // coordinator → worker, JSON welcomeMsg: the job to prepare for
	typeState     wire.Type = 34 // coordinator → worker, JSON stateMsg then float32: params, optimizer state
	typeStep      wire.Type = 35 // coordinator → worker, JSON stepMsg, then typeBuffers
	typeBuffers   wire.Type = 36 // either way, float32: the ESTs' BatchNorm buffers, concatenated
	typeStepDone  wire.Type = 37 // worker → coordinator, JSON stepDoneMsg, then typeBuffers
	typeAbort     wire.Type = 39 // coordinator → worker, JSON abortMsg
	typeLeave     wire.Type = 40 // worker → coordinator, JSON leaveMsg (after SIGTERM)
	typeBye       wire.Type = 41 // coordinator → worker, JSON byeMsg: exit 0
	typeHeartbeat wire.Type = 42 // either way, empty JSON object, every second
	typeStepError wire.Type = 43 // worker → coordinator, JSON stepErrorMsg
	typeRefused   wire.Type = 44 // coordinator → joiner, JSON refusedMsg: not admitted, do not retry
	typeQueued    wire.Type = 45 // coordinator → joiner of an engine session, empty JSON: checks passed, admitted at a step boundary
	typeStandby   wire.Type = 46 // coordinator → standby, JSON standbyMsg then typeBuffers, just before its step message
)

func init() {
	for t, n := range map[wire.Type]string{typeJoin: "join", typeWelcome: "welcome", typeState: "state", typeStep: "step",
		typeBuffers: "buffers", typeStepDone: "step-done", typeAbort: "abort", typeLeave: "leave",
		typeBye: "bye", typeHeartbeat: "heartbeat", typeStepError: "step-error", typeRefused: "refused", typeQueued: "queued", typeStandby: "standby"} {
		wire.RegisterName(t, n)
	}
}

// joinMsg introduces a worker after authentication.
type joinMsg struct {
	Version  int    `json:"version"`
	JobID    string `json:"job_id"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	RingAddr string `json:"ring_addr"`
	// Node is the worker's Slurm node (SLURMD_NODENAME; empty off
	// Slurm): the coordinator picks its standby on another node than its
	// own.
	Node string `json:"node,omitempty"`
	// Data is the digest of every file the worker's workload read, in
	// load order; the coordinator refuses a worker whose data differ
	// from its own.
	Data data.Manifest `json:"data"`
	// Engine is what an engine's worker reports beyond the data (a torch
	// worker: its Python process's numerics); the engine checks it.
	Engine json.RawMessage `json:"engine,omitempty"`
}

// refusedMsg tells a joiner why it is not admitted (e.g. its training data
// differ: File names the first file that does); retrying cannot help.
type refusedMsg struct {
	Reason string `json:"reason"`
	File   string `json:"file,omitempty"`
}

// welcomeMsg tells an authenticated worker which job to prepare for (the
// job spec as canonical JSON): it loads the data and builds its replica
// before it asks to be admitted, so admission at a step boundary costs
// only the state transfer.
type welcomeMsg struct {
	Spec    string `json:"spec"`
	DataDir string `json:"data_dir,omitempty"`
	// Module is a torch job's module file as the coordinator reads it
	// (the spec holds only its sha256); a worker checks its own copy
	// against the spec's digest.
	Module string `json:"module,omitempty"`
}

// stateMsg admits a worker at a step boundary: the layout and checksum of
// the float frame of parameters and optimizer state that follows.
type stateMsg struct {
	Step        int64    `json:"step"`
	NumParams   int      `json:"num_params"`
	OptimNames  []string `json:"optim_names"`
	OptimLens   []int    `json:"optim_lens"`
	StateSHA256 string   `json:"state_sha256"`
}

// ringMember is one endpoint of the all-reduce ring.
type ringMember struct {
	Rank int    `json:"rank"`
	Addr string `json:"addr"`
}

// estState is one EST's context as it travels (buffers go in the
// typeBuffers frame, in the order of the message's ESTs).
type estState struct {
	ID    int     `json:"est"`
	Epoch int     `json:"epoch"`
	Pos   int     `json:"pos"`
	Loss  float32 `json:"loss,omitempty"`
	Hash  string  `json:"samples,omitempty"`
}

// stepMsg tells a worker to run one step.
type stepMsg struct {
	Step int64 `json:"step"`
	// Attempt numbers the coordinator's step messages; answers echo it, so
	// an answer to an aborted attempt is never taken for the redo's.
	Attempt  int64        `json:"attempt"`
	Rank     int          `json:"rank"`
	RingID   int64        `json:"ring_id"` // changes whenever the ring must be rebuilt
	Ring     []ringMember `json:"ring,omitempty"`
	FirstEST int          `json:"first_est"`
	ESTs     []estState   `json:"ests"`
	// KillSelf and TermSelf are fault injection (--kill-at, --term-at):
	// SIGKILL yourself in the middle of this step, or SIGTERM yourself.
	KillSelf bool `json:"kill_self,omitempty"`
	TermSelf bool `json:"term_self,omitempty"`
	// Commit, when set, is the previous step's commit: the worker applies
	// its reduced gradient of step Commit.Step before it computes this
	// step. It is sent once per member; a redo of this step omits it.
	Commit *commitMsg `json:"commit,omitempty"`
}

// stepDoneMsg returns the advanced contexts of the worker's ESTs. The
// typeBuffers frame after it holds their buffers and, when Grad is set
// (the ring's last rank), then the reduced gradient (NumParams values).
type stepDoneMsg struct {
	Step    int64      `json:"step"`
	Attempt int64      `json:"attempt"`
	ESTs    []estState `json:"ests"`
	Grad    bool       `json:"grad,omitempty"`
	// RingConnectMs is how long building a new ring took in this step
	// (milliseconds; 0 when the ring was kept): crash_recovery_ms.
	RingConnectMs float64 `json:"ring_connect_ms,omitempty"`
}

type stepErrorMsg struct {
	Step    int64  `json:"step"`
	Attempt int64  `json:"attempt"`
	Error   string `json:"error"`
}

// commitMsg tells a worker to apply step Step's reduced gradient with
// learning rate LR (carried in the next stepMsg).
type commitMsg struct {
	Step int64   `json:"step"`
	LR   float32 `json:"lr"`
}

type abortMsg struct {
	Step int64 `json:"step"`
}

type leaveMsg struct {
	Reason string `json:"reason"`
}

type byeMsg struct {
	Reason string `json:"reason"`
}

// standbyMsg makes its receiver the coordinator's standby for step Step:
// it holds every EST's context at the start of that step (the committed
// state of step Step-1; their buffers follow in a typeBuffers frame, in EST
// order), which with the replica the step message leaves the standby at
// is all a coordinator needs to resume at Step (standby.go).
type standbyMsg struct {
	Step int64      `json:"step"`
	ESTs []estState `json:"ests"`
	// Members is the number of workers in the step; Lost of them (the
	// coordinator's own and any other on its node) go with the
	// coordinator's node, so a standby that takes over waits for
	// Members-Lost workers.
	Members int `json:"members"`
	Lost    int `json:"lost"`
	// Ledger are ledger rows the standby was not sent yet, of steps up
	// to Step (LedgerFeed, ledgerfeed.go).
	Ledger []LedgerRow `json:"ledger,omitempty"`
}
