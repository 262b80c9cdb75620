package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/datasets"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
)

// The port of a stock DDP script (examples/torch-ddp): its EasyScale
// version keeps the loop, and differs in at most portGoal lines.

// portGoal is issue 18's goal for the lines a DDP script changes.
const portGoal = 12

func torchDDPExample(name string) string {
	return filepath.Join("..", "..", "examples", "torch-ddp", name)
}

var hunk = regexp.MustCompile(`(?m)^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@`)

// changedLines is what `diff -U0 a b` changes: the larger side of each
// hunk, so a modified line counts once, and an added or a deleted one once.
func changedLines(t *testing.T, a, b string) int {
	t.Helper()
	out, err := exec.Command("diff", "-U0", a, b).Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("diff %s %s: %v", a, b, err)
	}
	n := 0
	for _, m := range hunk.FindAllStringSubmatch(string(out), -1) {
		count := func(s string) int {
			if s == "" {
				return 1
			}
			v, _ := strconv.Atoi(s)
			return v
		}
		n += max(count(m[1]), count(m[2]))
	}
	return n
}

func TestTorchDDPScriptPortsInAtMostTwelveLines(t *testing.T) {
	ddp, port := torchDDPExample("ddp_mnist.py"), torchDDPExample("easyscale_mnist.py")
	n := changedLines(t, ddp, port)
	t.Logf("torch_port_changed_lines %d", n)
	if n > portGoal {
		out, _ := exec.Command("diff", ddp, port).Output()
		t.Fatalf("the EasyScale version changes %d lines of the DDP script, the goal is at most %d:\n%s", n, portGoal, out)
	}
	requireTorch(t)
	dir, err := datasets.LocateMNIST("")
	if err != nil {
		t.Skip(err)
	}
	args := []string{"--epochs", "2", "--train-samples", "1024", "--test-samples", "500", "--log-every", "4", "--eval-every", "8"}

	// The stock script on 4 ranks, started as torchrun starts them (torch 1.13's torchrun fails under Python
	// 3.11 in its --redirects parsing, so the environment is set here).
	ranks := runDDP(t, ddp, 4, append([]string{"--data", dir}, args...))
	if !strings.Contains(ranks[0], "final test_accuracy") && !strings.Contains(ranks[0], "final test_loss") {
		t.Fatalf("the DDP script's rank 0 printed no final evaluation:\n%s", ranks[0])
	}

	// Its EasyScale version under `easyscale run`, fixed and changing: one digest.
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	abs, err := filepath.Abs(port)
	if err != nil {
		t.Fatal(err)
	}
	job := writeFile(t, "job.toml", fmt.Sprintf("name = \"torch-ddp-port\"\nengine = \"torch\"\nlogical_workers = 4\n"+
		"micro_batch = 32\nsteps = 16\nseed = 1\ncheckpoint_every = 5\n[torch]\nscript = %q\n"+
		"args = [\"--data\", \"{data_dir}\", %s]\ndatasets = [\"mnist\"]\n", abs, strings.Join(quoted, ", ")))
	fixed := mustRun(t, "run", "--config", job, "--workers", "4")
	if digest(fixed) == "" || fixed.summary["test_accuracy"] != nil {
		t.Fatalf("summary %v: want a digest and no test figures (the script evaluates itself)", fixed.summary)
	}
	if !strings.Contains(fixed.stderr, "final test_loss") {
		t.Errorf("the script's own evaluation did not print:\n%s", fixed.stderr)
	}
	for _, w := range []string{"0:1,5:3,11:2", "2"} {
		if got := digest(mustRun(t, "run", "--config", job, "--workers", w)); got != digest(fixed) {
			t.Errorf("--workers %s: digest %s, 4 fixed workers %s", w, got, digest(fixed))
		}
	}

	// StepLR stepped at each epoch's end: a run stopped at the end of epoch 0 and resumed on other workers
	// gives the uninterrupted digest (the epoch's scheduler step belongs to its last step).
	stepLR := strings.Replace(readFile(t, job), `"--epochs"`, `"--schedule", "step", "--epochs"`, 1)
	job = writeFile(t, "steplr.toml", stepLR)
	ref := digest(mustRun(t, "run", "--config", job, "--workers", "2"))
	state := t.TempDir()
	mustRun(t, "run", "--config", job, "--workers", "3", "--state", state, "--steps", "8")
	if got := mustRun(t, "run", "--config", job, "--workers", "0:1,12:4", "--state", state); digest(got) != ref {
		t.Errorf("StepLR per epoch, resumed at the epoch's end: digest %s, uninterrupted %s", digest(got), ref)
	} else if digest(got) == digest(fixed) {
		t.Errorf("--schedule step gave OneCycleLR's digest: the option did not reach the script")
	}
}

// runDDP runs script on n ranks (RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, as torchrun sets them) and returns each rank's output.
func runDDP(t *testing.T, script string, n int, args []string) []string {
	t.Helper()
	py, _, err := torchengine.Python(t.Context())
	if err != nil {
		t.Skip(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	outs := make([]bytes.Buffer, n)
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		cmds[r] = exec.CommandContext(ctx, py, append([]string{script}, args...)...)
		// USE_LIBUV=0: torch 2.4+'s env:// rendezvous asks for the libuv TCPStore unless told, and
		// Debian 13's torch 2.6 is built without libuv ("use_libuv was requested but PyTorch was
		// build without libuv support"); torchrun users there need it too. torch 1.13 ignores it.
		cmds[r].Env = append(os.Environ(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MASTER_ADDR=127.0.0.1",
			"MASTER_PORT="+port, "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"USE_LIBUV=0")
		cmds[r].Stdout, cmds[r].Stderr = &outs[r], &outs[r]
		if err := cmds[r].Start(); err != nil {
			t.Fatal(err)
		}
	}
	res := make([]string, n)
	for r, c := range cmds {
		err := c.Wait()
		res[r] = outs[r].String()
		if err != nil {
			t.Fatalf("DDP rank %d: %v\n%s", r, err, res[r])
		}
	}
	t.Logf("DDP rank 0:\n%s", res[0])
	return res
}
