package e2e

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// twoNodes makes two network namespaces joined by a veth pair, the
// project's own test hosts: n1 = 169.254.100.1, n2 = 169.254.100.2 (link
// local addresses that exist only inside those namespaces). It returns
// their names; the namespaces are deleted when the test ends.
func twoNodes(t *testing.T) (n1, n2, link string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("iproute2 (ip) is missing")
		}
		t.Skip("iproute2 (ip) is missing")
	}
	id := rand.Intn(1 << 20)
	n1, n2 = fmt.Sprintf("es-n1-%d", id), fmt.Sprintf("es-n2-%d", id)
	a, b := fmt.Sprintf("esa%d", id), fmt.Sprintf("esb%d", id)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ip("netns", "add", n1)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n1).Run() })
	ip("netns", "add", n2)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n2).Run() })
	ip("link", "add", a, "type", "veth", "peer", "name", b)
	ip("link", "set", a, "netns", n1)
	ip("link", "set", b, "netns", n2)
	ip("-n", n1, "addr", "add", "169.254.100.1/24", "dev", a)
	ip("-n", n2, "addr", "add", "169.254.100.2/24", "dev", b)
	for _, ns := range []struct{ n, dev string }{{n1, a}, {n2, b}} {
		ip("-n", ns.n, "link", "set", "lo", "up")
		ip("-n", ns.n, "link", "set", ns.dev, "up")
	}
	return n1, n2, a
}

// TestTwoNodesAndACutLink runs the coordinator and one worker on node n1
// and a second worker on node n2; mid-run the link between the nodes is
// cut, which the coordinator detects through the heartbeat timeout as a
// crash of the n2 worker: the survivor redoes the step and the job ends
// with the fixed run's digest.
func TestTwoNodesAndACutLink(t *testing.T) {
	n1, n2, link := twoNodes(t)
	const steps = "200" // long enough that the cut lands mid-run
	ref := digest(mustRun(t, "run", "--config", config(), "--steps", steps, "--no-eval"))
	state := t.TempDir()
	sum := filepath.Join(state, "summary.json")
	cfg, _ := filepath.Abs(config())
	job := exec.Command("ip", "netns", "exec", n1, easyscale, "run", "--config", cfg, "--steps", steps, "--no-eval",
		"--procs", "--workers", "1", "--state", state, "--listen", "169.254.100.1:7711", "--heartbeat-timeout", "2s", "--summary", sum)
	jobErr := &syncBuffer{}
	job.Stderr = jobErr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer job.Process.Kill()
	remote := exec.Command("ip", "netns", "exec", n2, easyscale, "worker", "--join", "169.254.100.1:7711",
		"--token-file", filepath.Join(state, "token"), "--io-timeout", "2s", "--join-timeout", "5s")
	var remoteErr strings.Builder
	remote.Stderr = &remoteErr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(state, "token")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator never wrote its token:\n%s", jobErr.String())
		}
	}
	if err := remote.Start(); err != nil {
		t.Fatal(err)
	}
	defer remote.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(jobErr.String(), "world_size=2"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the n2 worker never joined:\ncoordinator:\n%s\nworker:\n%s", jobErr.String(), remoteErr.String())
		}
	}
	// A few steps across both nodes before the cut.
	for deadline := time.Now().Add(30 * time.Second); stepsOn(state, 2) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no 3 steps on 2 workers within 30 s of the join (%d):\n%s", stepsOn(state, 2), jobErr.String())
		}
	}
	if out, err := exec.Command("ip", "-n", n1, "link", "set", link, "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting the link: %v\n%s", err, out)
	}
	if err := job.Wait(); err != nil {
		logs, _ := filepath.Glob(filepath.Join(state, "workers", "*.log"))
		var w strings.Builder
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&w, "== %s\n%s", l, b)
		}
		t.Fatalf("the job failed after the cut: %v\n%s\nn2 worker:\n%s\nlocal workers:\n%s", err, jobErr.String(), remoteErr.String(), w.String())
	}
	log := jobErr.String()
	if !strings.Contains(log, "workers lost; redoing the step") {
		t.Fatalf("the cut was not handled as a crash:\n%s", log)
	}
	if s := readFile(t, sum); !strings.Contains(s, ref) {
		t.Fatalf("digest after the cut differs from the fixed run %s:\n%s", ref, s)
	}
}
