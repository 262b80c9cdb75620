package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

func init() { register("torch", torchFigures) }

const (
	// torchLogicalWorkers and torchMicroBatch are the MNIST example's N and b.
	torchLogicalWorkers = 8
	torchMicroBatch     = 32
	// torchRounds blocks of torchBlockSteps steps of each arm of
	// torch_vs_ddp_step_ratio, alternating, after one untimed block each.
	torchRounds     = 6
	torchBlockSteps = 4
	// torchRescales timed 2 -> 4 growths per kind (announced, fresh, warm) of torch_rescale_s.
	torchRescales = 3
)

// torchEnv is what the torch suite runs with.
type torchEnv struct {
	python   string // interpreter with torch (torchengine.Python)
	pkg      string // PYTHONPATH entry holding the extracted easyscale package
	benchDir string // runtime/torchengine/python/bench
	examples string // examples/ (absolute)
	mnist    string // directory of the four MNIST idx files
	opticks  string // Newton's Opticks, the LM example's text
}

// torchFigures measures the PyTorch engine (issues 9 and 18), with the
// loop API: the cost of logical workers on one process
// (python/bench/torch_bench.py), our step on two Python processes against
// PyTorch DDP on two, and the time a 2 -> 4 rescale takes, through the
// engine's own process supervision.
func torchFigures() ([]figure, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env, cleanup, err := newTorchEnv(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	port, err := portChangedLines(filepath.Join(env.examples, "torch-ddp", "ddp_mnist.py"),
		filepath.Join(env.examples, "torch-ddp", "easyscale_mnist.py"))
	if err != nil {
		return nil, err
	}
	over, err := env.overhead(ctx)
	if err != nil {
		return nil, err
	}
	figs := append([]figure{{"torch_port_changed_lines", float64(port), "lines"}}, over...)
	ddp, err := env.versusDDP(ctx)
	if err != nil {
		return nil, err
	}
	figs = append(figs, ddp...)
	fresh, err := env.rescaleFresh(ctx)
	if err != nil {
		return nil, err
	}
	figs = append(figs, fresh...)
	// The peer: the same grows with every worker its own interpreter (no fork
	// server), measured in this run.
	own, err := withoutForkServer(func() ([]figure, error) { return env.rescaleFresh(ctx) })
	if err != nil {
		return nil, err
	}
	for _, f := range own {
		if f.Name == "torch_rescale_fresh_s" || f.Name == "torch_rescale_start_s" {
			figs = append(figs, figure{strings.TrimSuffix(f.Name, "_s") + "_own_interpreters_s", f.Value, f.Unit})
		}
	}
	figs = append(figs, figure{"torch_rescale_fresh_forked_vs_own_interpreters",
		valueOf(fresh, "torch_rescale_fresh_s") / valueOf(own, "torch_rescale_fresh_s"), "ratio"})
	warm, err := env.rescaleWarm(ctx)
	if err != nil {
		return nil, err
	}
	return append(figs, warm...), nil
}

// withoutForkServer runs measure with $EASYSCALE_FORKSERVER=0 (every Python
// worker started as its own interpreter) and restores the variable.
func withoutForkServer(measure func() ([]figure, error)) ([]figure, error) {
	old, had := os.LookupEnv(torchengine.ForkServerEnv)
	os.Setenv(torchengine.ForkServerEnv, "0")
	defer func() {
		if had {
			os.Setenv(torchengine.ForkServerEnv, old)
		} else {
			os.Unsetenv(torchengine.ForkServerEnv)
		}
	}()
	return measure()
}

// valueOf is the value of the figure named name in figs (0 when absent).
func valueOf(figs []figure, name string) float64 {
	for _, f := range figs {
		if f.Name == name {
			return f.Value
		}
	}
	return 0
}

// newTorchEnv finds torch, extracts the easyscale package to a temporary
// directory (removed by the returned cleanup) and locates the data sets.
func newTorchEnv(ctx context.Context) (*torchEnv, func(), error) {
	py, _, err := torchengine.Python(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the torch suite needs PyTorch (apt-get install python3-torch python3-torchvision python3-numpy): %w", err)
	}
	tmp, err := os.MkdirTemp("", "easyscale-bench-torch-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	pkg, err := torchengine.Extract(tmp)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	mnist, err := datasets.LocateMNIST("")
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("the torch suite trains the MNIST examples: %w", err)
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	env := &torchEnv{python: py, pkg: pkg, benchDir: abs(filepath.Join("runtime", "torchengine", "python", "bench")),
		examples: abs("examples"), mnist: abs(mnist),
		opticks: filepath.Join(goroot(), "src", "testdata", "Isaac.Newton-Opticks.txt")}
	if _, err := os.Stat(filepath.Join(env.benchDir, "torch_bench.py")); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("the torch suite runs from the repository root: %w", err)
	}
	if _, err := os.Stat(env.opticks); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("the LM example's text ships with Go ($(go env GOROOT)/src/testdata): %w", err)
	}
	return env, cleanup, nil
}

// goroot is `go env GOROOT` (the go command that runs the bench), or "" when
// there is no go command (the text is then not found, and the suite says so).
func goroot() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// command runs a Python script of benchDir with the job's pinned numerics.
func (e *torchEnv) command(ctx context.Context, script string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.python, append([]string{filepath.Join(e.benchDir, script)}, args...)...)
	cmd.Env = append(append(os.Environ(), torchengine.PinnedEnv...), "PYTHONPATH="+e.pkg)
	cmd.Stderr = os.Stderr
	return cmd
}

// overhead runs torch_bench.py: torch_est_overhead_pct (the largest arm's) and,
// per arm (_ddp, _lenet, _charlm), the median of 100 paired CPU-time ratios,
// their quartiles, the median's 95 % interval and the arms' median step times.
func (e *torchEnv) overhead(ctx context.Context) ([]figure, error) {
	out, err := e.command(ctx, "torch_bench.py", e.examples, e.mnist, e.opticks).Output()
	if err != nil {
		return nil, fmt.Errorf("running torch_bench.py: %w", err)
	}
	return parseFigures(strings.NewReader(string(out)))
}

// parseFigures reads `name value unit` lines; any other line is an error naming it.
func parseFigures(r io.Reader) ([]figure, error) {
	var figs []figure
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d %q: want `name value unit`", line, text)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: value: %w", line, text, err)
		}
		figs = append(figs, figure{f[0], v, f[2]})
	}
	return figs, sc.Err()
}

// mnistJob is the torch MNIST example as the engine loads it.
func (e *torchEnv) mnistJob() torchengine.JobConfig {
	return torchengine.JobConfig{Module: filepath.Join(e.examples, "torch-mnist", "model.py"), Seed: 1,
		LogicalWorkers: torchLogicalWorkers, MicroBatch: torchMicroBatch, Steps: 1000, Threads: 1, Device: "cpu",
		Params: map[string]any{"data_dir": e.mnist}}
}

func (e *torchEnv) startOptions() torchengine.StartOptions {
	return torchengine.StartOptions{Python: e.python, PackageDir: e.pkg, Stderr: os.Stderr,
		HeartbeatTimeout: 30 * time.Second} // the machine is shared: a descheduled process is not a hung one
}

// ddpArm is the DDP baseline's two processes; rank 0 takes commands.
type ddpArm struct {
	arms    []string // the lines rank 0 prints per command: "ddp", and "est" for a Job
	cmds    []*exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stopped bool
}

// startDDP starts the DDP baseline's world processes: of the stock DDP
// script examples/torch-ddp/ddp_mnist.py when script is set, else of the
// MNIST example's Job (with the easyscale step without the Go side beside it).
func (e *torchEnv) startDDP(ctx context.Context, dir string, world int, script bool) (*ddpArm, error) {
	arm := &ddpArm{arms: []string{"ddp", "est"}}
	if script {
		arm.arms = []string{"ddp"}
	}
	for rank := range world {
		args := []string{filepath.Join(e.examples, "torch-mnist", "model.py")}
		if script {
			args = []string{"--script", filepath.Join(e.examples, "torch-ddp", "ddp_mnist.py")}
		}
		args = append(args, filepath.Join(dir, fmt.Sprintf("ddp-store-%t", script)), strconv.Itoa(rank), strconv.Itoa(world),
			strconv.Itoa(torchLogicalWorkers), strconv.Itoa(torchMicroBatch), "data_dir="+e.mnist)
		cmd := e.command(ctx, "ddp_bench.py", args...)
		if rank == 0 {
			in, err := cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				return nil, err
			}
			arm.in, arm.out = in, bufio.NewScanner(out)
		}
		if err := cmd.Start(); err != nil {
			arm.stop()
			return nil, fmt.Errorf("starting the DDP baseline's rank %d: %w", rank, err)
		}
		arm.cmds = append(arm.cmds, cmd)
	}
	return arm, nil
}

// steps runs k steps of DDP and, for a Job, k of the easyscale step
// without the Go side, alternating, and returns rank 0's time of each.
func (a *ddpArm) steps(k int) (ddp, est []time.Duration, err error) {
	if _, err := fmt.Fprintf(a.in, "%d\n", k); err != nil {
		return nil, nil, fmt.Errorf("DDP baseline: sending a command: %w", err)
	}
	for _, want := range a.arms {
		if !a.out.Scan() {
			return nil, nil, fmt.Errorf("DDP baseline: rank 0 exited: %v", a.out.Err())
		}
		f := strings.Fields(a.out.Text())
		if len(f) != k+1 || f[0] != want {
			return nil, nil, fmt.Errorf("DDP baseline: got %q, want %s and %d times", a.out.Text(), want, k)
		}
		for _, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("DDP baseline: %q: %w", a.out.Text(), err)
			}
			d := time.Duration(v * float64(time.Second))
			if want == "ddp" {
				ddp = append(ddp, d)
			} else {
				est = append(est, d)
			}
		}
	}
	return ddp, est, nil
}

// ddpStopGrace is how long stop waits for the ranks to exit before it kills them.
const ddpStopGrace = 30 * time.Second

// stop ends both ranks and waits for them, at most ddpStopGrace; a rank
// still running then is killed and reported. Later calls do nothing.
func (a *ddpArm) stop() error {
	if a.stopped {
		return nil
	}
	a.stopped = true
	if a.in != nil {
		fmt.Fprintln(a.in, 0)
		a.in.Close()
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for _, c := range a.cmds {
			err = errors.Join(err, c.Wait())
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(ddpStopGrace):
		for _, c := range a.cmds {
			if c.Process != nil {
				c.Process.Kill()
			}
		}
		return errors.Join(fmt.Errorf("the DDP baseline's ranks did not exit %v after stop: killed", ddpStopGrace), <-done)
	}
}

// versusDDP measures torch_vs_ddp_step_ratio with the loop API (issue
// 18): the step of examples/torch-ddp/easyscale_mnist.py, the stock DDP
// script ported to the loop API, on 8 logical workers × 32 and 2 Python
// processes of the engine (the control protocol, the chain over gloo, the
// contexts reported, the commit, the script's clipping, optimizer and
// OneCycleLR step) against the stock script's step (ddp_mnist.py's pieces)
// under PyTorch DDP with gloo on 2 processes with the same global batch by
// gradient accumulation. The same comparison for the MNIST example's Job
// (setup() -> Job, trained by easyscale.job.run, the loop API underneath)
// gives the _job figures; its DDP processes also run the easyscale step
// without the Go side (torch_python_step_ms_p2), which splits our cost
// into the logical workers' share and the control protocol's. Blocks of
// steps of each arm alternate; each figure is the fastest step of its arm.
func (e *torchEnv) versusDDP(ctx context.Context) ([]figure, error) {
	script := e.mnistJob()
	script.Module, script.Script = filepath.Join(e.examples, "torch-ddp", "easyscale_mnist.py"), true
	script.Steps = 60000 / torchLogicalWorkers / torchMicroBatch // one epoch: the script's epochs × len(loader)
	script.Args = []string{"--data", e.mnist, "--epochs", "1", "--batch-size", strconv.Itoa(torchMicroBatch),
		"--log-every", "1000000", "--eval-every", "1000000"}
	loop, err := e.versus(ctx, script, true)
	if err != nil {
		return nil, fmt.Errorf("the DDP script's port: %w", err)
	}
	job, err := e.versus(ctx, e.mnistJob(), false)
	if err != nil {
		return nil, fmt.Errorf("the MNIST example's Job: %w", err)
	}
	return []figure{
		{"torch_vs_ddp_step_ratio", loop.ours.Seconds() / loop.ddp.Seconds(), "x"},
		{"torch_step_ms_p2", ms(loop.ours), "ms"},
		{"torch_ddp_step_ms_p2", ms(loop.ddp), "ms"},
		{"torch_vs_ddp_step_ratio_job", job.ours.Seconds() / job.ddp.Seconds(), "x"},
		{"torch_step_ms_p2_job", ms(job.ours), "ms"},
		{"torch_ddp_step_ms_p2_job", ms(job.ddp), "ms"},
		{"torch_python_step_ms_p2", ms(job.direct), "ms"},
		{"torch_python_vs_ddp_step_ratio", job.direct.Seconds() / job.ddp.Seconds(), "x"},
	}, nil
}

// versusResult is the fastest step of each arm of one comparison.
type versusResult struct{ ours, ddp, direct time.Duration }

// versus runs cfg on 2 engine processes against its DDP baseline (the
// stock script's when script is set), blocks of steps alternating.
func (e *torchEnv) versus(ctx context.Context, cfg torchengine.JobConfig, script bool) (versusResult, error) {
	var res versusResult
	dir, err := os.MkdirTemp("", "easyscale-bench-ddp-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	l := torchengine.NewLocal(cfg, e.startOptions())
	defer l.Close()
	if err := l.Resize(ctx, 2); err != nil {
		return res, fmt.Errorf("starting 2 python workers: %w", err)
	}
	ddp, err := e.startDDP(ctx, dir, 2, script)
	if err != nil {
		return res, err
	}
	defer ddp.stop()
	sizes := []int{torchLogicalWorkers / 2, torchLogicalWorkers / 2}
	var step int64
	var ours, theirs, direct []time.Duration
	for round := range torchRounds + 1 {
		for range torchBlockSteps {
			t := time.Now()
			if _, err := l.Step(ctx, step, sizes, nil); err != nil {
				return res, fmt.Errorf("step %d on 2 python workers: %w", step, err)
			}
			if round > 0 {
				ours = append(ours, time.Since(t))
			}
			step++
		}
		ds, es, err := ddp.steps(torchBlockSteps)
		if err != nil {
			return res, err
		}
		if round > 0 {
			theirs, direct = append(theirs, ds...), append(direct, es...)
		}
	}
	if err := ddp.stop(); err != nil {
		return res, fmt.Errorf("the DDP baseline: %w", err)
	}
	res.ours, res.ddp = slices.Min(ours), slices.Min(theirs)
	if len(direct) > 0 {
		res.direct = slices.Min(direct)
	}
	return res, nil
}

// announceLead is how long before an announced grow the 2 processes keep
// training after Local.Prestart in torch_rescale_s: the grow of
// `easyscale run --workers 0:2,S:4` comes S steps after the allocation that
// announces it (about 2.5 s for S = 50 on this machine), and a joiner takes
// about a second to start.
const announceLead = 3 * time.Second

// rescaleFresh measures the 2 -> 4 growth of Local from the decision to the
// end of the first step on 4, through Local.Resize (the 2 joiners taken or
// started: torch imported, the module and MNIST loaded, their numerics
// admitted) and Local.Step (replica copy, process group of 4 rebuilt, the
// step), in two kinds: torch_rescale_s, the grow `easyscale run` makes when
// its --workers schedule announces it (the trainer's Prepare: Prestart
// right after the allocation of 2, announceLead of training before the
// decision, as on a cluster where a lent GPU's worker starts its process
// before it asks to join), and torch_rescale_fresh_s, a grow nobody
// announced (the joiners start at the decision; torch_rescale_start_s is
// that Resize alone).
func (e *torchEnv) rescaleFresh(ctx context.Context) ([]figure, error) {
	l := torchengine.NewLocal(e.mnistJob(), e.startOptions())
	defer l.Close()
	two, four := []int{4, 4}, []int{2, 2, 2, 2}
	var step int64
	var fresh, announced, start, steady []time.Duration
	for i := range 2 * torchRescales {
		announce := i%2 == 1
		if err := l.Resize(ctx, 2); err != nil {
			return nil, fmt.Errorf("starting 2 python workers: %w", err)
		}
		t := time.Now()
		if announce {
			l.Prestart(ctx, 4)
		}
		for n := 0; n < 2 || (announce && time.Since(t) < announceLead); n++ {
			if _, err := l.Step(ctx, step, two, nil); err != nil {
				return nil, fmt.Errorf("step %d on 2 python workers: %w", step, err)
			}
			step++
		}
		t0 := time.Now()
		if err := l.Resize(ctx, 4); err != nil {
			return nil, fmt.Errorf("growing to 4 python workers: %w", err)
		}
		t1 := time.Now()
		if _, err := l.Step(ctx, step, four, nil); err != nil {
			return nil, fmt.Errorf("step %d, the first on 4 python workers: %w", step, err)
		}
		t2 := time.Now()
		step++
		if _, err := l.Step(ctx, step, four, nil); err != nil {
			return nil, fmt.Errorf("step %d on 4 python workers: %w", step, err)
		}
		steady = append(steady, time.Since(t2))
		step++
		if announce {
			announced = append(announced, t2.Sub(t0))
		} else {
			fresh, start = append(fresh, t2.Sub(t0)), append(start, t1.Sub(t0))
		}
	}
	return []figure{
		{"torch_rescale_s", slices.Min(announced).Seconds(), "s"},
		{"torch_rescale_fresh_s", slices.Min(fresh).Seconds(), "s"},
		{"torch_rescale_start_s", slices.Min(start).Seconds(), "s"},
		{"torch_step_ms_p4", ms(slices.Min(steady)), "ms"},
	}, nil
}

// rescaleWarm measures torch_rescale_warm_s: the same 2 -> 4 growth with
// joiners started and loaded before the decision (a pool of warm
// processes), so the time left is the admission check, the replica copy,
// the process group rebuild and the first step on 4; torch_process_start_s
// is the start and load of one such process (python, torch, the module and
// MNIST, the numerics fingerprint and canary). It drives a
// torchengine.Group directly, which is what Local does underneath.
func (e *torchEnv) rescaleWarm(ctx context.Context) ([]figure, error) {
	cfg := e.mnistJob()
	var procs []*torchengine.Process
	defer func() {
		for _, p := range procs {
			_ = p.Close(10 * time.Second)
		}
	}()
	var ref *torchengine.Loaded
	launch := func() (torchengine.Loaded, error) {
		var loaded torchengine.Loaded
		p, err := torchengine.Start(e.startOptions())
		if err != nil {
			return loaded, err
		}
		if _, err := p.Call(ctx, "load", loadRequest(cfg), nil, &loaded); err != nil {
			p.Kill()
			return loaded, fmt.Errorf("loading %s: %w", cfg.Module, err)
		}
		if ref == nil {
			ref = &loaded
		}
		procs = append(procs, p)
		return loaded, nil
	}
	for range 2 {
		if _, err := launch(); err != nil {
			return nil, err
		}
	}
	g := torchengine.NewGroup(cfg.LogicalWorkers)
	g.TimeoutSeconds = 30
	members := func() []torchengine.Member {
		m := make([]torchengine.Member, len(procs))
		for i, p := range procs {
			m[i] = p
		}
		return m
	}
	if err := g.Assign(ctx, members(), []int{4, 4}, nil, []bool{false, false}); err != nil {
		return nil, err
	}
	var step int64
	var warm, starts []time.Duration
	for range torchRescales {
		for range 2 {
			if _, err := g.Step(ctx, step, nil); err != nil {
				return nil, fmt.Errorf("step %d on 2 python workers: %w", step, err)
			}
			step++
		}
		var joiners []torchengine.Loaded
		for range 2 {
			t := time.Now()
			loaded, err := launch()
			if err != nil {
				return nil, err
			}
			starts = append(starts, time.Since(t))
			joiners = append(joiners, loaded) // admitted below, inside the timed part
		}
		t0 := time.Now()
		for _, j := range joiners {
			if err := torchengine.Admit(*ref, j); err != nil {
				return nil, err
			}
		}
		if err := g.Assign(ctx, members(), []int{2, 2, 2, 2}, procs[0], []bool{false, false, true, true}); err != nil {
			return nil, fmt.Errorf("regrouping 4 python workers: %w", err)
		}
		if _, err := g.Step(ctx, step, nil); err != nil {
			return nil, fmt.Errorf("step %d, the first on 4 python workers: %w", step, err)
		}
		warm = append(warm, time.Since(t0))
		step++
		for _, p := range procs[2:] {
			_ = p.Close(10 * time.Second)
		}
		procs = procs[:2]
		if err := g.Assign(ctx, members(), []int{4, 4}, nil, []bool{false, false}); err != nil {
			return nil, fmt.Errorf("shrinking back to 2 python workers: %w", err)
		}
	}
	return []figure{
		{"torch_rescale_warm_s", slices.Min(warm).Seconds(), "s"},
		{"torch_process_start_s", slices.Min(starts).Seconds(), "s"},
	}, nil
}

// loadRequest is the control protocol's load request for cfg (what
// torchengine.Local sends; python/easyscale/worker.py load).
func loadRequest(c torchengine.JobConfig) map[string]any {
	return map[string]any{"module": c.Module, "threads": max(c.Threads, 1), "device": c.Device,
		"config": map[string]any{"seed": c.Seed, "logical_workers": c.LogicalWorkers,
			"micro_batch": c.MicroBatch, "steps": c.Steps, "params": c.Params}}
}

var diffHunk = regexp.MustCompile(`(?m)^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@`)

// portChangedLines is what `diff -U0 ddp port` changes (issue 18's
// torch_port_changed_lines, goal at most 12): the larger side of each hunk,
// so a modified line counts once (tests/e2e/torch_port_test.go checks it).
func portChangedLines(ddp, port string) (int, error) {
	out, err := exec.Command("diff", "-U0", ddp, port).Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		return 0, fmt.Errorf("diff %s %s: %w", ddp, port, err)
	}
	n := 0
	for _, m := range diffHunk.FindAllStringSubmatch(string(out), -1) {
		side := func(s string) int {
			if s == "" {
				return 1
			}
			v, _ := strconv.Atoi(s)
			return v
		}
		n += max(side(m[1]), side(m[2]))
	}
	return n, nil
}
