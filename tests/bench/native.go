package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

func init() { register("native", nativeFigures) }

const (
	// nativeRounds alternate the native benchmark and its PyTorch twin, so
	// that both arms see the same spells of load on a shared machine.
	nativeRounds = 3
	// nativeSteps timed steps per arm and round (after the untimed ones).
	nativeSteps = 10
)

// nativeModels are the two examples compared, with their Go benchmark.
var nativeModels = []struct{ name, bench string }{
	{"lenet", "BenchmarkStep/est"},
	{"charlm", "BenchmarkStepCharLM/est"},
}

// stepTimes holds the fastest step seen per model by the process CPU clock
// and by the wall clock, in nanoseconds.
type stepTimes struct{ cpu, wall map[string]float64 }

func newStepTimes() stepTimes {
	return stepTimes{cpu: map[string]float64{}, wall: map[string]float64{}}
}

// keep records a step time if it is the fastest so far.
func keep(m map[string]float64, name string, v float64) {
	if old, ok := m[name]; !ok || v < old {
		m[name] = v
	}
}

// nativeFigures measures native_vs_torch_step_ratio{,_lenet,_charlm}
// (issue 12): the native engine's training step (runtime/trainer's
// BenchmarkStep/est and BenchmarkStepCharLM/est: 8 ESTs on one physical
// worker, GOMAXPROCS 1, one engine thread) against the same models on
// PyTorch (native_torch.py: the same layers, shapes, optimizer and 8
// micro-batches by plain gradient accumulation, one thread). The arms
// alternate nativeRounds times; each figure compares the fastest step of
// each arm by the process CPU clock (time the process was descheduled is
// not counted; the _wall figures use the wall clock).
func nativeFigures() ([]figure, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	py, _, err := torchengine.Python(ctx)
	if err != nil {
		return nil, fmt.Errorf("the native suite compares with PyTorch (apt-get install python3-torch): %w", err)
	}
	opticks := filepath.Join(goroot(), "src", "testdata", "Isaac.Newton-Opticks.txt")
	if _, err := os.Stat(opticks); err != nil {
		return nil, fmt.Errorf("the LM example's text ships with Go ($(go env GOROOT)/src/testdata): %w", err)
	}
	tmp, err := os.MkdirTemp("", "easyscale-bench-native-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "trainer.test")
	if out, err := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./runtime/trainer").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building runtime/trainer's benchmarks: %w\n%s", err, out)
	}
	native, torch := newStepTimes(), newStepTimes()
	for range nativeRounds {
		if err := runNative(ctx, bin, native); err != nil {
			return nil, err
		}
		if err := runTorchTwin(ctx, py, opticks, torch); err != nil {
			return nil, err
		}
	}
	return nativeRatios(native, torch)
}

// runNative runs both Go benchmarks once (nativeSteps steps each) on one
// thread and keeps their fastest steps.
func runNative(ctx context.Context, bin string, into stepTimes) error {
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", "^BenchmarkStep(CharLM)?$/^est$",
		"-test.benchtime", strconv.Itoa(nativeSteps)+"x", "-test.count", "1", "-test.cpu", "1")
	cmd.Dir = filepath.Join("runtime", "trainer") // where go test would run it (test data paths)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running runtime/trainer's step benchmarks: %w\n%s", err, out.String())
	}
	metrics, err := parseBenchMetrics(&out)
	if err != nil {
		return err
	}
	for _, m := range nativeModels {
		cpu, wall := metrics[m.bench]["min-cpu-ns/step"], metrics[m.bench]["min-ns/step"]
		if cpu == 0 || wall == 0 {
			return fmt.Errorf("%s: no min-cpu-ns/step and min-ns/step metrics in the output:\n%s", m.bench, out.String())
		}
		keep(into.cpu, m.name, cpu)
		keep(into.wall, m.name, wall)
	}
	return nil
}

// runTorchTwin runs native_torch.py once and keeps its fastest steps.
func runTorchTwin(ctx context.Context, python, opticks string, into stepTimes) error {
	cmd := exec.CommandContext(ctx, python, filepath.Join("tests", "bench", "native_torch.py"), opticks, strconv.Itoa(nativeSteps))
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running tests/bench/native_torch.py: %w", err)
	}
	figs, err := parseFigures(bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("reading native_torch.py's output: %w", err)
	}
	for _, f := range figs {
		for _, m := range nativeModels {
			switch f.Name {
			case "torch_step_cpu_ms_" + m.name:
				keep(into.cpu, m.name, f.Value*1e6)
			case "torch_step_ms_" + m.name:
				keep(into.wall, m.name, f.Value*1e6)
			}
		}
	}
	for _, m := range nativeModels {
		if into.cpu[m.name] == 0 || into.wall[m.name] == 0 {
			return fmt.Errorf("native_torch.py printed no step times for %s:\n%s", m.name, out)
		}
	}
	return nil
}

// nativeRatios turns the fastest steps of both arms into figures.
func nativeRatios(native, torch stepTimes) ([]figure, error) {
	var figs []figure
	worst := 0.0
	for _, m := range nativeModels {
		n, t := native.cpu[m.name], torch.cpu[m.name]
		if n <= 0 || t <= 0 {
			return nil, fmt.Errorf("%s: missing step times (native %v ns, torch %v ns)", m.name, n, t)
		}
		r := n / t
		worst = max(worst, r)
		figs = append(figs,
			figure{"native_vs_torch_step_ratio_" + m.name, r, "x"},
			figure{"native_vs_torch_step_wall_ratio_" + m.name, native.wall[m.name] / torch.wall[m.name], "x"},
			figure{"native_step_cpu_ms_" + m.name, n / 1e6, "ms"},
			figure{"torch_twin_step_cpu_ms_" + m.name, t / 1e6, "ms"})
	}
	return append(figs, figure{"native_vs_torch_step_ratio", worst, "x"}), nil
}

// parseBenchMetrics reads `go test -bench` output into benchmark name
// (without the -GOMAXPROCS suffix) → unit → value, for every `value unit`
// pair after the iteration count; a later line of the same name replaces an
// earlier one. Other lines are skipped.
func parseBenchMetrics(r io.Reader) (map[string]map[string]float64, error) {
	runs, err := parseBenchRuns(r)
	if err != nil {
		return nil, err
	}
	res := map[string]map[string]float64{}
	for name, ms := range runs {
		res[name] = ms[len(ms)-1]
	}
	return res, nil
}

// parseBenchRuns is parseBenchMetrics keeping every line (one per -count
// run) of each benchmark, in order.
func parseBenchRuns(r io.Reader) (map[string][]map[string]float64, error) {
	res := map[string][]map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > strings.LastIndex(name, "/") {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", sc.Text(), err)
			}
			m[f[i+1]] = v
		}
		res[name] = append(res[name], m)
	}
	return res, sc.Err()
}
