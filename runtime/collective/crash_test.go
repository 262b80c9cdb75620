package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment of the re-executed test binary that plays one ring member.
const (
	childEnv    = "COLLECTIVE_TEST_CHILD_RANK"
	membersEnv  = "COLLECTIVE_TEST_MEMBERS"
	crashLen    = 1 << 18
	crashChunk  = 16 << 10
	crashRanks  = 3
	crashVictim = 1
)

func TestMain(m *testing.M) {
	if rank := os.Getenv(childEnv); rank != "" {
		os.Exit(runChild(rank))
	}
	os.Exit(m.Run())
}

// runChild joins the ring as the given rank with the listener inherited on
// fd 3 and all-reduces until the ring fails.
func runChild(rankStr string) int {
	rank, _ := strconv.Atoi(rankStr)
	var members []Member
	for i, a := range strings.Split(os.Getenv(membersEnv), ",") {
		members = append(members, Member{Rank: i, Addr: a})
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ring, err := Connect(context.Background(), rank, members, ln.(*net.TCPListener), crashOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	grads := crashGrads()
	out := make([]float32, crashLen)
	for {
		if err := ring.AllReduce(context.Background(), out, grads[rank:rank+1], rank, 1.0/crashRanks); err != nil {
			return 1
		}
	}
}

func crashOptions() Options {
	return Options{Insecure: true, ChunkBytes: crashChunk, Timeout: 2 * time.Second, ConnectTimeout: 20 * time.Second}
}

func crashGrads() [][]float32 {
	return mixedGrads(rand.New(rand.NewPCG(11, 12)), crashRanks, crashLen)
}

// TestASIGKILLedProcessFailsEverySurvivor runs rank 1 of a 3-rank ring in a
// child process, SIGKILLs it while the ranks stream all-reduces, and
// requires both survivors to return an error within the I/O timeout. The
// all-reduces before the kill must be the canonical result, so the child
// took part for real.
func TestASIGKILLedProcessFailsEverySurvivor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	lns, members := listeners(t, crashRanks)
	f, err := lns[crashVictim].File()
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, crashRanks)
	for i, m := range members {
		addrs[i] = m.Addr
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(crashVictim), membersEnv+"="+strings.Join(addrs, ","))
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	lns[crashVictim].Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	grads := crashGrads()
	want := reference(grads, 1.0/crashRanks)
	var (
		mu       sync.Mutex
		killedAt time.Time
		wg       sync.WaitGroup
	)
	errs := make([]error, crashRanks)
	after := make([]time.Duration, crashRanks)
	rounds := make([]int, crashRanks)
	for _, r := range []int{0, 2} {
		wg.Go(func() {
			ring, err := Connect(context.Background(), r, members, lns[r], crashOptions())
			if err != nil {
				errs[r] = fmt.Errorf("connect: %w", err)
				return
			}
			defer ring.Close()
			out := make([]float32, crashLen)
			for i := 0; ; i++ {
				if r == 0 && i == 5 {
					mu.Lock()
					killedAt = time.Now()
					cmd.Process.Signal(os.Kill)
					mu.Unlock()
				}
				if err := ring.AllReduce(context.Background(), out, grads[r:r+1], r, 1.0/crashRanks); err != nil {
					mu.Lock()
					errs[r], after[r] = err, time.Since(killedAt)
					mu.Unlock()
					return
				}
				if j := firstDiff(out, want); j >= 0 {
					errs[r] = fmt.Errorf("round %d: element %d differs from the canonical result", i, j)
					return
				}
				rounds[r]++
			}
		})
	}
	wg.Wait()
	if rounds[0] < 5 {
		t.Fatalf("rank 0 finished only %d rounds before failing: %v", rounds[0], errs[0])
	}
	for _, r := range []int{0, 2} {
		var le *LinkError
		if !errors.As(errs[r], &le) {
			t.Fatalf("rank %d: err = %v, want a *LinkError", r, errs[r])
		}
		if after[r] > crashOptions().Timeout+time.Second {
			t.Errorf("rank %d failed %v after the kill, timeout %v", r, after[r], crashOptions().Timeout)
		}
		t.Logf("rank %d: %d rounds, failed %v after the SIGKILL: %v", r, rounds[r], after[r], errs[r])
	}
}
