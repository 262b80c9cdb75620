package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/slurmjob"
)

// taskLog is a Slurm task's own copy of its log, in a file on its node
// (--task-log DIR, env EASYSCALE_TASK_LOG): the task's stderr goes
// through srun, which runs on the job's first node and dies with it, so
// without a copy nothing tells why a surviving task did what it did after
// the loss of that node (docs/first-node-loss.md). The file is
// DIR/easyscale-JOBID.RANK.NODE.log, appended to (a requeued run adds to
// it); its last line is the task's exit status, or nothing when a signal
// killed it (slurmd's log then says which).
type taskLog struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	stderrErr bool // a write to stderr failed (recorded once)
}

// openTaskLog creates dir (mode 0700) and opens the task's log file there.
func openTaskLog(dir string, task *slurmjob.Task) (*taskLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the task log directory %s: %w", dir, err)
	}
	name := fmt.Sprintf("easyscale-%s.%d.%s.log", task.JobID, task.ProcID, task.NodeName)
	path := filepath.Join(dir, filepath.Base(filepath.Clean("/"+name)))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the task log %s: %w", path, err)
	}
	return &taskLog{f: f, path: path}, nil
}

// tee returns a writer that writes to the task log and to w (the task's
// stderr). A failed write to w (a broken pipe to a dead srun) is recorded
// in the file once and otherwise ignored: the copy in the file is what
// counts then.
func (l *taskLog) tee(w io.Writer) io.Writer {
	return teeWriter{l: l, w: w}
}

type teeWriter struct {
	l *taskLog
	w io.Writer
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.l.mu.Lock()
	_, err := t.l.f.Write(p)
	t.l.mu.Unlock()
	if _, werr := t.w.Write(p); werr != nil {
		t.l.mu.Lock()
		first := !t.l.stderrErr
		t.l.stderrErr = true
		t.l.mu.Unlock()
		if first {
			t.l.line(fmt.Sprintf("task stderr: %v (the log goes on here only)", werr))
		}
	}
	if err != nil {
		return 0, fmt.Errorf("writing the task log %s: %w", t.l.path, err)
	}
	return len(p), nil
}

// start records the task's start: its PID, and what it runs as.
func (l *taskLog) start(task *slurmjob.Task) {
	l.line(fmt.Sprintf("task start: slurm_job_id=%s rank=%d/%d node=%s pid=%d restart=%d",
		task.JobID, task.ProcID, task.NTasks, task.NodeName, os.Getpid(), task.RestartCount))
}

// exit records the task's exit status and closes the file.
func (l *taskLog) exit(code int) {
	l.line(fmt.Sprintf("task exit: exit_status=%d", code))
	l.mu.Lock()
	l.f.Close()
	l.mu.Unlock()
}

func (l *taskLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), s)
}
