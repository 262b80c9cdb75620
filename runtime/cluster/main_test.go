package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// fakeWorkerEnv makes this test binary a worker process that a
// ProcLauncher starts (launcher_test.go): its value is a directory whose
// file plan-K holds, one word a line, what the process of slot K (its log
// is worker-K.log) does at its first start, its second, and so on: "exit"
// (exit 3 at once, as a worker killed while it joins), "usage" (exit 2 at
// once, as a worker that refuses its command line or configuration),
// "leave" (exit 0 at once, as a worker that got SIGTERM while it joined),
// "hang" (wait to be
// killed) or "join" (RunWorker: a real worker). Past the plan's lines, or
// without a plan, it joins.
const fakeWorkerEnv = "EASYSCALE_TEST_FAKE_WORKER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(fakeWorkerEnv); dir != "" {
		os.Exit(fakeWorker(dir, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeWorker is the process a ProcLauncher started with
// `worker --join ADDR --token-file FILE ...` under fakeWorkerEnv.
func fakeWorker(dir string, args []string) int {
	// The launcher's log file is this process's stdout: worker-K.log.
	logPath, err := os.Readlink("/proc/self/fd/1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake worker: finding the slot:", err)
		return 2
	}
	slot := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(logPath), "worker-"), ".log")
	try := 0
	for ; ; try++ { // this start's number within the slot
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("start-%s-%d", slot, try)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprint(f, os.Getpid())
			f.Close()
			break
		}
	}
	mode := "join"
	if b, err := os.ReadFile(filepath.Join(dir, "plan-"+slot)); err == nil {
		if lines := strings.Fields(string(b)); try < len(lines) {
			mode = lines[try]
		}
	}
	fmt.Fprintf(os.Stderr, "fake worker: slot %s start %d: %s\n", slot, try, mode)
	switch mode {
	case "exit":
		return 3
	case "usage":
		return cmdline.ExitUsage
	case "leave":
		return 0
	case "hang":
		select {}
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	join := fs.String("join", "", "")
	tokenFile := fs.String("token-file", "", "")
	fs.Int("threads", 1, "")
	fs.String("cpus", "", "")
	if len(args) == 0 || fs.Parse(args[1:]) != nil {
		fmt.Fprintln(os.Stderr, "fake worker: bad arguments", args)
		return 2
	}
	secret, err := auth.LoadSecret(*tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake worker:", err)
		return 2
	}
	jobID, err := os.ReadFile(filepath.Join(filepath.Dir(*tokenFile), JobIDFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake worker:", err)
		return 2
	}
	err = RunWorker(context.Background(), WorkerOptions{Join: *join, Secret: secret, JobID: strings.TrimSpace(string(jobID)), Threads: 1,
		JoinTimeout: 20 * time.Second})
	fmt.Fprintln(os.Stderr, "fake worker: RunWorker:", err)
	if err == ErrLeft {
		return 0
	}
	return 1
}
