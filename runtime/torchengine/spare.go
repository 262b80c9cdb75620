package torchengine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// A standby's spare (issue 20 item 1; docs/first-node-loss.md). A torch
// standby that takes over coordinates with a fresh engine, whose first
// Python process must start, import torch and load the job before the
// first step: seconds on a busy machine, most of the takeover's time. So
// a worker that learns it is the standby (its first relayStandby frame)
// starts one more Python process in the background, loaded as a fresh
// engine's process 0 loads (rank 0), and keeps it idle. When it takes
// over, the caller passes it to New (Options.Spare), which adopts it as
// its first process when it was started the same way (interpreter,
// package, environment, job) and otherwise closes it. Cost: one idle
// process (the interpreter, torch and the job's model and data) on the
// standby's node for the run's life, and its start once, beside the
// training.

// Spare is a Python process a standby started ahead of a takeover
// (startSpare); New adopts it (Options.Spare) or Close stops it.
type Spare struct {
	// want is the standby's own process's load answer: the spare must
	// match it (take); nil: not checked.
	want  *Loaded
	start StartOptions
	cfg   JobConfig
	done  chan struct{} // closed when the start and load ended
	res   launched

	mu     sync.Mutex
	taken  bool // handed to an engine: Close leaves it alone
	closed bool
}

// startSpare starts a Python process with start and has it load cfg as
// rank 0, in the background; ctx bounds the load. want is the load answer
// of the standby's own process (take checks the spare's against it).
func startSpare(ctx context.Context, start StartOptions, cfg JobConfig, want *Loaded) *Spare {
	s := &Spare{start: start, cfg: cfg, want: want, done: make(chan struct{})}
	go func() {
		res := launched{}
		p, err := Start(start)
		if err == nil {
			var loaded Loaded
			if _, err = p.CallSetup(ctx, "load", cfg.loadRequest(0), nil, &loaded); err != nil {
				p.Kill()
				p = nil
			}
			res = launched{p: p, loaded: loaded}
		}
		res.err = err
		s.mu.Lock()
		defer s.mu.Unlock()
		s.res = res
		close(s.done)
		if s.closed && res.p != nil {
			res.p.Kill()
		}
	}()
	return s
}

// mismatch says how s was started otherwise than New would start its
// first process with start, loading cfg ("" when it was not): the
// interpreter, the package, the environment or the load request (compared
// as JSON: the worker's job file came over the wire, so its numbers are
// float64 where the coordinator's TOML has int64).
func (s *Spare) mismatch(start StartOptions, cfg JobConfig) string {
	switch {
	case s.start.Python != start.Python:
		return fmt.Sprintf("interpreter %s, the engine's %s", s.start.Python, start.Python)
	case s.start.PackageDir != start.PackageDir:
		return fmt.Sprintf("package %s, the engine's %s", s.start.PackageDir, start.PackageDir)
	case !slices.Equal(s.start.Env, start.Env):
		return fmt.Sprintf("environment %q, the engine's %q", s.start.Env, start.Env)
	}
	a, err1 := json.Marshal(s.cfg.loadRequest(0))
	b, err2 := json.Marshal(cfg.loadRequest(0))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		return fmt.Sprintf("load request %s, the engine's %s", a, b)
	}
	return ""
}

// take hands the spare to a Local as the outcome of its first launch:
// the returned channel delivers the started, loaded process once its load
// ends. A spare that failed to start or load, or whose numerics and
// versions differ from want (the standby's own process, which the lost
// coordinator admitted), is stopped and fallback's process is delivered
// instead.
func (s *Spare) take(fallback func() launched) chan launched {
	s.mu.Lock()
	s.taken = true
	s.mu.Unlock()
	ch := make(chan launched, 1)
	go func() {
		<-s.done
		r := s.res
		if r.err == nil && s.want != nil {
			r.err = Admit(*s.want, r.loaded)
		}
		if r.err != nil {
			if r.p != nil {
				r.p.Kill()
			}
			r = fallback()
		}
		ch <- r
	}()
	return ch
}

// Close stops the spare's process (at once, or when its load ends) unless
// an engine adopted it. It may be called more than once; nil is a no-op.
func (s *Spare) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken || s.closed {
		return nil
	}
	s.closed = true
	select {
	case <-s.done:
		if s.res.p != nil {
			s.res.p.Kill()
		}
	default: // the start's goroutine kills it when its load ends
	}
	return nil
}

// adoptSpare makes sp the outcome of l's first launch, before any process
// started, when sp was started and loaded as l starts its processes (else
// it reports false and the caller closes sp). Should the spare fail, or
// differ from the standby's own process, a fresh process is launched in
// its place.
func (l *Local) adoptSpare(ctx context.Context, sp *Spare, log hclog.Logger) bool {
	why := sp.mismatch(l.start, l.cfg)
	if len(l.procs) != 0 || len(l.spares) != 0 {
		why = "the engine has processes already"
	}
	if why != "" {
		log.Warn("the standby's spare python process was not started as this engine starts its first: starting a fresh one", "why", why)
		return false
	}
	fresh := func() launched {
		log.Warn("the standby's spare python process failed or differs from the standby's own: starting a fresh one")
		p, loaded, err := l.launch(ctx, 0)
		return launched{p: p, loaded: loaded, err: err}
	}
	l.spares = append(l.spares, sp.take(fresh))
	log.Info("adopting the standby's spare python process as the first")
	return true
}
