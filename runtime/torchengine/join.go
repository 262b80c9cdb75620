package torchengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/cluster"
	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// joinReport is what a torch worker reports when it joins (the join
// message's engine field): the torch and Python versions and the numerics
// of its loaded Python process, and the version of its Python package.
type joinReport struct {
	Package string `json:"package"`
	Loaded  Loaded `json:"loaded"`
}

// checkJoin refuses a joiner of another package version, torch or Python
// version (a *VersionError naming both), job or numerics than ref, the
// coordinator's first process: the coordinator admits every joiner, so the
// check is authoritative here.
func checkJoin(ref Loaded, raw json.RawMessage) error {
	var j joinReport
	if err := json.Unmarshal(raw, &j); err != nil || j.Package == "" {
		return fmt.Errorf("the join carries no torch report (%v): is the worker an easyscale of another version?", err)
	}
	if j.Package != PackageDigest() {
		return fmt.Errorf("the worker's easyscale Python package is %.16s, the coordinator's %.16s: run one easyscale build everywhere", j.Package, PackageDigest())
	}
	if err := checkVersions(ref, j.Loaded); err != nil {
		return err
	}
	if j.Loaded.Parameters != ref.Parameters || j.Loaded.TrainSamples != ref.TrainSamples {
		return fmt.Errorf("the worker's job has %d parameters and %d training samples, the coordinator's %d and %d",
			j.Loaded.Parameters, j.Loaded.TrainSamples, ref.Parameters, ref.TrainSamples)
	}
	return Admit(ref, j.Loaded)
}

// WorkerOptions configure RunWorker.
type WorkerOptions struct {
	// PackageRoot is where the Python package is extracted (default: the user cache).
	PackageRoot string
	// Stderr receives the Python process's output (os.Stderr when nil).
	Stderr *os.File
	// HeartbeatTimeout declares the Python process hung (default 5 s).
	HeartbeatTimeout time.Duration
	// Python is the job's interpreter (slurmjob.JobPython) when
	// $EASYSCALE_PYTHON is unset ("": DefaultPython).
	Python string
}

// Worker returns the function cluster.WorkerOptions.Torch wants: it runs
// this machine's physical worker of a torch job (see RunWorker).
func Worker(o WorkerOptions) func(context.Context, *cluster.EngineSession) error {
	return func(ctx context.Context, s *cluster.EngineSession) error { return RunWorker(ctx, s, o) }
}

// RunWorker is `easyscale worker --join` for a torch job: it locates and
// hashes the job's datasets on this machine, checks the module against the
// job's digest, starts a Python process ($EASYSCALE_PYTHON, else
// o.Python, else DefaultPython; gloo on the interface of the
// connection's local address), loads the job, joins (the coordinator
// refuses other data, another torch or Python version or other numerics: a
// *cluster.RefusedError naming the file, both versions or the setting; the
// worker exits non-zero) and then relays the coordinator's requests to the
// process until released (cluster.ErrLeft), the coordinator is gone or
// silent for s.CoordinatorTimeout, or the process dies. The Python process
// never outlives it. SIGTERM (s.LeaveReq) is passed on to the process,
// which asks to leave at the next step boundary; past the leave grace the
// worker leaves at once.
func RunWorker(ctx context.Context, s *cluster.EngineSession, o WorkerOptions) error {
	spec := s.Spec
	log := s.Logger.Named("torch")
	sum, err := fileSHA256(spec.Torch.ModulePath)
	if err != nil {
		return &cluster.RefusedError{Reason: fmt.Sprintf("reading the job's module: %v (the worker reads it at the coordinator's path)", err)}
	}
	if sum != spec.Torch.ModuleSHA256 {
		return &cluster.RefusedError{Reason: fmt.Sprintf("module %s has sha256 %.16s on this machine, the job's is %.16s", spec.Torch.ModulePath, sum, spec.Torch.ModuleSHA256), File: spec.Torch.ModulePath}
	}
	python := os.Getenv(PythonEnv)
	if python == "" {
		python = o.Python
	}
	py, _, err := pythonAt(ctx, python)
	if err != nil {
		return err
	}
	root := o.PackageRoot
	if root == "" {
		if root, err = defaultPackageRoot(); err != nil {
			return err
		}
	}
	dir, err := Extract(root)
	if err != nil {
		return err
	}
	params := map[string]any{}
	for k, v := range spec.Torch.Params {
		params[k] = v
	}
	files, err := locateDatasets(spec, params)
	if err != nil {
		return err
	}
	hb := o.HeartbeatTimeout
	if hb <= 0 {
		hb = 5 * time.Second
	}
	start := StartOptions{Python: py, PackageDir: dir, Stderr: os.Stderr, Stdout: os.Stdout, HeartbeatTimeout: hb}
	if o.Stderr != nil {
		start.Stderr = o.Stderr
	}
	if ifname := ifaceOf(s.LocalAddr); ifname != "" {
		start.Env = append(start.Env, "GLOO_SOCKET_IFNAME="+ifname)
	}
	p, err := Start(start)
	if err != nil {
		return err
	}
	defer p.Kill()
	var loaded Loaded
	// A joiner is admitted as a last rank, never 0.
	if _, err := p.CallSetup(ctx, "load", jobConfig(spec, params).loadRequest(1), nil, &loaded); err != nil {
		return &cluster.RefusedError{Reason: fmt.Sprintf("loading %s: %v", spec.Torch.ModulePath, err)}
	}
	if err := s.Join(files, joinReport{Package: PackageDigest(), Loaded: loaded}); err != nil {
		return err
	}
	log.Info("queued for admission", "job_name", spec.Name, "pid", p.Pid(), "python", py, "torch", loaded.Torch, "gloo", s.LocalAddr)
	// As the standby, a spare process loaded as a fresh engine's first
	// (rank 0, on this node's interface), for the engine this worker's
	// task coordinates with should it take over (spare.go).
	var spareMu sync.Mutex
	var spare *Spare
	relayed := false // relay returned: a late first frame starts no spare
	sb := &standbyContexts{onFirst: func() {
		spareMu.Lock()
		defer spareMu.Unlock()
		if relayed {
			return
		}
		so := start
		so.Stdout = so.Stderr // as New starts its processes
		started := time.Now()
		spare = startSpare(ctx, so, jobConfig(spec, params), &loaded)
		log.Info("the coordinator's standby: starting a spare python process for a takeover")
		go func(sp *Spare) {
			<-sp.done
			if sp.res.err != nil {
				log.Warn("the standby's spare python process failed", "error", sp.res.err)
				return
			}
			log.Info("the standby's spare python process is ready", "startup_s", fmt.Sprintf("%.2f", time.Since(started).Seconds()))
		}(spare)
	}}
	err = relay(ctx, s, p, sb, log)
	spareMu.Lock()
	defer spareMu.Unlock()
	relayed = true
	if errors.Is(err, errCoordinatorGone) {
		// As the coordinator's standby: the copy, before the process is
		// killed (standby.go).
		if cp := sb.copyFrom(ctx, p, files, s, 10*time.Second, log); cp != nil {
			if spare != nil {
				cp.Warm = spare
			}
			return &cluster.TakeoverError{Copy: cp, Cause: err}
		}
	}
	_ = spare.Close()
	return err
}

// errCoordinatorGone marks relay's end by the loss of the coordinator (its
// connection closed, or silent for the session's CoordinatorTimeout).
var errCoordinatorGone = errors.New("the coordinator is gone")

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// relay forwards the coordinator's requests to p and p's replies back,
// keeping the standby frames in sb. An end by the coordinator's loss
// wraps errCoordinatorGone.
func relay(ctx context.Context, s *cluster.EngineSession, p *Process, sb *standbyContexts, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) error {
	c := s.Conn
	c.SetTimeout(s.CoordinatorTimeout) // nothing, not even a heartbeat, for this long: the coordinator is gone
	var wmu sync.Mutex
	write := func(t wire.Type, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return c.WriteFrame(t, b)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 4)
	end := func(err error) {
		select {
		case ended <- err:
		default:
		}
	}
	// Heartbeats show the coordinator this worker and its Python process are alive.
	go func() {
		t := time.NewTicker(s.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := p.silent(time.Now()); err != nil {
					end(err)
					return
				}
				if err := write(relayBeat, nil); err != nil {
					end(fmt.Errorf("%w: heartbeating to it: %w", errCoordinatorGone, err))
					return
				}
			}
		}
	}()
	go func() {
		select {
		case <-p.done:
			end(fmt.Errorf("the python worker process exited: %v", p.readErr))
		case <-ctx.Done():
		}
	}()
	go func() {
		select {
		case <-s.LeaveReq:
			log.Info("signal: asking the python worker process to leave at the next step boundary")
			_ = p.Signal(syscall.SIGTERM)
		case <-ctx.Done():
			return
		}
		select {
		case <-s.LeaveNow:
			log.Warn("leave grace passed: leaving at once")
			end(cluster.ErrLeft)
		case <-ctx.Done():
		}
	}()
	go func() {
		for {
			h, err := c.ReadHeader()
			if err != nil {
				end(fmt.Errorf("%w: reading from it: %w", errCoordinatorGone, err))
				return
			}
			b := make([]byte, h.Len)
			if err := c.ReadFull(b); err != nil {
				end(fmt.Errorf("%w: reading from it: %w", errCoordinatorGone, err))
				return
			}
			switch h.Type {
			case relayBeat:
				continue
			case relayStandby:
				if err := sb.keep(b); err != nil {
					end(err)
					return
				}
				continue
			case relayBye:
				log.Info("released by the coordinator")
				end(cluster.ErrLeft)
				return
			case relayRequest:
			default:
				end(fmt.Errorf("unexpected %v frame from the coordinator", h.Type))
				return
			}
			f, err := decodeRelay(b)
			if err != nil {
				end(err)
				return
			}
			typ, _ := f.header["type"].(string)
			id := f.header["id"]
			delete(f.header, "type")
			delete(f.header, "id")
			// Sent in arrival order; answered as the process answers.
			req, err := p.send(typ, f.header, f.payload)
			if err != nil {
				end(err)
				return
			}
			go func() {
				r, err := p.await(ctx, typ, req, p.hbTimeout)
				if err != nil {
					end(err)
					return
				}
				r.header["id"] = id
				out, err := encodeRelay(r.header, r.payload)
				if err == nil {
					err = write(relayReply, out)
				}
				if err != nil {
					end(fmt.Errorf("replying to the coordinator: %w", err))
				}
			}()
		}
	}()
	err := <-ended
	if errors.Is(err, cluster.ErrLeft) {
		c.Close() // the coordinator waits for the hang-up, not for the Python process
		_ = p.Close(5 * time.Second)
	}
	return err
}
