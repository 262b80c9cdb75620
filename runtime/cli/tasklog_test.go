package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
)

// brokenPipe is a task's stderr after srun died: every write fails.
type brokenPipe struct{}

func (brokenPipe) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// A Slurm task's log copy keeps every line, with the task's start and
// exit status, whether its stderr (through srun) works or is a broken pipe.
func TestTheTaskLogKeepsTheLinesAStderrThroughADeadSrunLoses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stderr func() (w io.Writer, got func() string)
	}{
		{"stderr works", func() (io.Writer, func() string) {
			var b bytes.Buffer
			return &b, b.String
		}},
		{"stderr is a broken pipe", func() (io.Writer, func() string) {
			return brokenPipe{}, func() string { return "" }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs")
			task := &slurmjob.Task{JobID: "42", ProcID: 2, NTasks: 3, NodeName: "n3"}
			l, err := openTaskLog(dir, task)
			if err != nil {
				t.Fatal(err)
			}
			stderr, got := tc.stderr()
			w := l.tee(stderr)
			l.start(task)
			for range 2 {
				if n, err := w.Write([]byte("lost the coordinator\n")); err != nil || n != 21 {
					t.Fatalf("write through the tee: %d, %v; want 21, nil", n, err)
				}
			}
			l.exit(3)
			b, err := os.ReadFile(filepath.Join(dir, "easyscale-42.2.n3.log"))
			if err != nil {
				t.Fatal(err)
			}
			// the log lines as written, each record after a time stamp
			want := []string{"task start: slurm_job_id=42 rank=2/3 node=n3 pid=", "lost the coordinator"}
			if tc.name == "stderr is a broken pipe" {
				want = append(want, "task stderr: broken pipe (the log goes on here only)") // once
			}
			want = append(want, "lost the coordinator", "task exit: exit_status=3")
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			ok := len(lines) == len(want)
			for i := 0; ok && i < len(want); i++ {
				ok = strings.Contains(lines[i], want[i])
			}
			if !ok {
				t.Fatalf("task log:\n%s\nwant the lines %q", b, want)
			}
			if s := got(); s != "" && s != "lost the coordinator\nlost the coordinator\n" {
				t.Fatalf("stderr got %q", s)
			}
		})
	}
}
