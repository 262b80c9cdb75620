package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/trainer"
	"github.com/easyscale/easyscale-slurm/runtime/workload"
)

// welcome reads the job the coordinator welcomes this worker to, with
// this machine's data directory.
func (s *session) welcome() (*jobspec.Spec, error) {
	var w welcomeMsg
	if err := s.p.recvJSON(typeWelcome, &w); err != nil {
		return nil, fmt.Errorf("%w: waiting for the welcome: %w", errNeverJoined, err)
	}
	var spec jobspec.Spec
	if err := json.Unmarshal([]byte(w.Spec), &spec); err != nil {
		return nil, fmt.Errorf("decoding the job spec: %w", err)
	}
	spec.Data.Dir = w.DataDir
	if s.o.DataDir != "" {
		spec.Data.Dir = s.o.DataDir
	}
	if spec.Torch != nil {
		spec.Torch.Module, spec.Torch.ModulePath = w.Module, w.Module
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("the coordinator's job spec: %w", err)
	}
	return &spec, nil
}

// prepare loads the native job's data and builds the replica, before
// asking to be admitted.
func (s *session) prepare(spec *jobspec.Spec) error {
	wl, err := workload.New(spec)
	if err != nil {
		return err
	}
	threads := s.o.Threads
	if threads < 1 {
		threads = max(1, numCPU())
	}
	rep, err := trainer.NewReplica(spec, wl, threads)
	if err != nil {
		return err
	}
	sampler, err := data.NewSampler(wl.TrainLen(), spec.LogicalWorkers, spec.Seed)
	if err != nil {
		return err
	}
	horizon, err := spec.Horizon(sampler.StepsPerEpoch(spec.MicroBatch))
	if err != nil {
		return err
	}
	backup, err := trainer.NewReplica(spec, wl, 1)
	if err != nil {
		return err
	}
	s.spec, s.wl, s.rep, s.sampler, s.backup, s.horizon = spec, wl, rep, sampler, backup, horizon
	s.reduced = make([]float32, rep.NumParams())
	s.reducedAt, s.ahead = -1, -1
	return nil
}

// admit waits for the next step boundary, where the coordinator sends the
// parameters and optimizer state of its replica, verified by sha256.
func (s *session) admit() error {
	var m stateMsg
	s.p.c.SetTimeout(0) // admission waits for a step boundary
	t, b, err := s.p.recv()
	s.p.c.Timeout = s.o.IOTimeout
	if err == nil && t == typeRefused {
		var r refusedMsg
		_ = json.Unmarshal(b, &r)
		return &RefusedError{Coordinator: s.o.Join, Reason: r.Reason, File: r.File}
	}
	if err == nil && t != typeState {
		err = fmt.Errorf("expected a %v message, got %v", typeState, t)
	}
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return fmt.Errorf("%w: waiting for admission: %w", errNeverJoined, err)
	}
	if s.rep.NumParams() != m.NumParams {
		return fmt.Errorf("the coordinator's model has %d parameters, this worker builds %d", m.NumParams, s.rep.NumParams())
	}
	total := m.NumParams
	for _, n := range m.OptimLens {
		if n < 0 || n > 1<<30 {
			return fmt.Errorf("optimizer state length %d out of range", n)
		}
		total += n
	}
	state := make([]float32, total)
	if err := s.p.recvFloats(typeState, state); err != nil {
		return fmt.Errorf("receiving the model state: %w", err)
	}
	if got := stateChecksum(state); got != m.StateSHA256 {
		return fmt.Errorf("model state checksum %s, the coordinator sent %s", got, m.StateSHA256)
	}
	s.at = m.Step
	return loadState(s.rep, state, m.OptimNames, m.OptimLens)
}
