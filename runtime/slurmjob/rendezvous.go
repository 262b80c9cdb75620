package slurmjob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/renameio/v2"
)

// Rendezvous files: the coordinator's HOST:PORT, and its exit status when
// it ends (the step's real outcome, which the batch script should return:
// srun also fails when Slurm killed tasks of released nodes). Each is
// written twice: under its plain name (the newest run's, read by batch
// scripts and by extra jobs with `$(cat DIR/coordinator)`) and under
// [RunFile] for the run (SLURM_RESTART_COUNT) that wrote it, which is what
// the tasks of a step read: a requeued job's directory still holds the
// files of its earlier runs, and only the run's own name tells them apart
// without trusting clocks. The run's file also carries the [Run]'s stamp on
// a second line, so that the files of an earlier job with the same id (the
// ids restart when slurmctld loses its state, or wrap) are not taken for
// this job's before its task 0 moves them aside ([RetireStale]).
const (
	CoordinatorFile = "coordinator"
	ExitCodeFile    = "exit-code"
)

// Run is one run of a Slurm job, as its rendezvous files name it: the
// job's id, its restart count (SLURM_RESTART_COUNT) and its start. A job
// that reuses an earlier job's id starts at another time, and a requeued
// run has another restart count, so neither reads the other's files.
type Run struct {
	JobID   string
	Restart int
	// Start is when Slurm started this run of the job, in Unix seconds
	// (SLURM_JOB_START_TIME, or the StartTime squeue reports on Slurm
	// versions that do not set it). 0 means unknown: the files are then
	// read without checking their stamp, and a coordinator address only
	// when its file is no older than the reader accepts.
	Start int64
}

// stamp is the line a run writes under the value of its rendezvous files.
func (r Run) stamp() string {
	return fmt.Sprintf("job %s run %d started %d", r.JobID, r.Restart, r.Start)
}

// RunFile is the name of rendezvous file name as written by run restart
// of the job: "coordinator.2" for the coordinator of the job's second
// requeue.
func RunFile(name string, restart int) string { return fmt.Sprintf("%s.%d", name, restart) }

// PublishCoordinator writes addr into dir/coordinator.RESTART (with run's
// stamp) and dir/coordinator (the address alone), each atomically (temp
// file and rename), so a reader never sees a partial address.
func PublishCoordinator(dir, addr string, run Run) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the rendezvous directory: %w", err)
	}
	if err := writeRunFile(dir, CoordinatorFile, run, addr); err != nil {
		return fmt.Errorf("publishing the coordinator address: %w", err)
	}
	return nil
}

// RecordExit writes the coordinator's exit status code into
// dir/exit-code.RESTART (with run's stamp) and dir/exit-code (the number
// alone, for the batch script): the job's run has ended, and its workers,
// which poll [Ended], stop.
func RecordExit(dir string, run Run, code int) error {
	if err := writeRunFile(dir, ExitCodeFile, run, strconv.Itoa(code)); err != nil {
		return fmt.Errorf("recording the exit status: %w", err)
	}
	return nil
}

// writeRunFile writes value and run's stamp into dir/name.RESTART, then
// value alone into dir/name.
func writeRunFile(dir, name string, run Run, value string) error {
	if err := writeAtomic(filepath.Join(dir, RunFile(name, run.Restart)), value+"\n"+run.stamp()+"\n"); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, name), value+"\n")
}

// readRunFile returns the value of dir/name.RESTART when the file is run's.
// stale describes a file that exists but belongs to another job or run
// (its stamp differs, or it has none: an earlier version's), "" otherwise.
func readRunFile(dir, name string, run Run) (value string, ok bool, stale string) {
	path := filepath.Join(dir, RunFile(name, run.Restart))
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, ""
	}
	value, stamp, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	value, stamp = strings.TrimSpace(value), strings.TrimSpace(stamp)
	if run.Start != 0 && stamp != run.stamp() {
		if stamp == "" {
			stamp = "no stamp"
		}
		return "", false, fmt.Sprintf("%s (%s) is not this run's (%s)", path, stamp, run.stamp())
	}
	return value, true, ""
}

// Ended reports whether the coordinator of run has ended, and with which
// exit status (-1 when the file does not hold a number). The exit status
// of another job or run (see [Run]) is not run's.
func Ended(dir string, run Run) (code int, ended bool) {
	v, ok, _ := readRunFile(dir, ExitCodeFile, run)
	if !ok {
		return 0, false
	}
	code, err := strconv.Atoi(v)
	if err != nil {
		return -1, true
	}
	return code, true
}

// writeAtomic writes content into path, mode 0600, through a temporary
// file in its directory, created exclusively (a link planted under a
// temporary name is never followed) and renamed over path (renameio).
func writeAtomic(path, content string) error {
	return renameio.WriteFile(path, []byte(content), 0o600)
}

// CoordinatorAddr returns run's coordinator address as its rendezvous file
// holds it now, without waiting ("", false when there is none of run's): a
// worker that lost its coordinator reads it again, since a standby that
// took over publishes its own address there (runtime/cluster standby.go).
func CoordinatorAddr(dir string, run Run) (string, bool) {
	addr, ok, _ := readRunFile(dir, CoordinatorFile, run)
	if !ok {
		return "", false
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false
	}
	return addr, true
}

// TakeoverFile records that a standby took the coordinator's place in a
// run: "step S node N at UNIX-SECONDS" (the step it resumed at), with the
// run's stamp; the plain file holds the newest.
const TakeoverFile = "takeover"

// RecordTakeover writes dir/takeover.RESTART: the standby on node took over
// run's coordination at time at, resuming at step. A job whose first node
// was lost has no batch output from then on (its srun ran there), so this
// file is where an operator, and the lab test, read that it happened.
func RecordTakeover(dir string, run Run, step int64, node string, at time.Time) error {
	if err := writeRunFile(dir, TakeoverFile, run, fmt.Sprintf("step %d node %s at %d", step, node, at.Unix())); err != nil {
		return fmt.Errorf("recording the takeover: %w", err)
	}
	return nil
}

// ErrStale marks a rendezvous file older than the caller accepts.
var ErrStale = errors.New("stale coordinator address")

// ErrEnded is returned by [WaitCoordinator] when the coordinator of the
// run already ended (a requeued job that had finished ends at once).
var ErrEnded = errors.New("the coordinator of this run has ended")

// WaitCoordinator polls dir/coordinator.RESTART until it holds run's
// HOST:PORT, the run's coordinator has ended (an error wrapping ErrEnded),
// or ctx ends. Files of another job with the same id, or of another run,
// are ignored (see [Run]); when run.Start is unknown, an address written
// before notBefore is ignored instead. The error after ctx ends names the
// files it ignored.
func WaitCoordinator(ctx context.Context, dir string, run Run, notBefore time.Time) (string, error) {
	path := filepath.Join(dir, RunFile(CoordinatorFile, run.Restart))
	var ignored []string
	note := func(stale string) {
		if stale != "" && !slices.Contains(ignored, stale) {
			ignored = append(ignored, stale)
		}
	}
	for {
		code, ended := Ended(dir, run)
		if ended {
			return "", fmt.Errorf("%w (exit status %d in %s)", ErrEnded, code, filepath.Join(dir, RunFile(ExitCodeFile, run.Restart)))
		}
		_, _, stale := readRunFile(dir, ExitCodeFile, run)
		note(stale)
		addr, ok, stale := readRunFile(dir, CoordinatorFile, run)
		note(stale)
		if ok && run.Start == 0 {
			if fi, err := os.Stat(path); err != nil || fi.ModTime().Before(notBefore) {
				ok = false
			}
		}
		if ok {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return "", fmt.Errorf("%s holds %q, not HOST:PORT: %w", path, addr, err)
			}
			return addr, nil
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("waiting for the coordinator address in %s: %w", path, ctx.Err())
			if len(ignored) > 0 {
				err = fmt.Errorf("%w; ignored %s", err, strings.Join(ignored, "; "))
			}
			return "", err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RetireStale moves an existing rendezvous directory aside when this is the
// job's first run (restartCount 0): it then belongs to an earlier job that
// had the same id (ids restart after a cluster is reset, and two clusters
// may share a filesystem). A requeued job (restartCount > 0) keeps it and
// resumes from its state. It returns the new name of the moved directory,
// or "" when nothing was moved.
func RetireStale(dir string, restartCount int, now time.Time) (string, error) {
	if restartCount > 0 {
		return "", nil
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("checking the rendezvous directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("rendezvous path %s is not a directory; remove it or set EASYSCALE_RENDEZVOUS_DIR", dir)
	}
	old := fmt.Sprintf("%s.old-%s", dir, now.UTC().Format("20060102T150405.000"))
	if err := os.Rename(dir, old); err != nil {
		return "", fmt.Errorf("moving the stale rendezvous directory %s aside: %w (remove it, or set EASYSCALE_RENDEZVOUS_DIR)", dir, err)
	}
	return old, nil
}

// TrainedFile records that a run's training reached its stop step: "step
// S", written by the coordinator before it says goodbye to its workers and
// releases the state directory. A standby that lost the coordinator reads
// it to tell a finished training from a lost coordinator where the state
// directory cannot (a node-local one: runtime/cli takeover.go).
const TrainedFile = "trained"

// RecordTrained writes dir/trained.RESTART: run's training reached step.
func RecordTrained(dir string, run Run, step int64) error {
	if err := writeRunFile(dir, TrainedFile, run, fmt.Sprintf("step %d", step)); err != nil {
		return fmt.Errorf("recording the end of the training: %w", err)
	}
	return nil
}

// Trained reports whether run's training reached its stop step (RecordTrained).
func Trained(dir string, run Run) bool {
	_, ok, _ := readRunFile(dir, TrainedFile, run)
	return ok
}

// TakenOver returns run's takeover record (RecordTakeover's "step S node N
// at T"), and whether there is one.
func TakenOver(dir string, run Run) (string, bool) {
	v, ok, _ := readRunFile(dir, TakeoverFile, run)
	return v, ok
}
