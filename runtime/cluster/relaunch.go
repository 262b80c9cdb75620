package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
)

// The launcher's view of its processes as the coordinator reports them:
// admitted (Admitted), released (Released), and what is left on its way
// (OnTheWay). A process that exits before it was ever admitted is started
// again in its slot (relaunch), at most MaxRelaunches times.

// relaunch starts p's slot again when p exited (with err from its Wait)
// before the coordinator ever admitted or released it, did not leave on
// request (leftOnRequest) nor refuse its command line (refusedUsage), and
// the slot has tries left. l.mu is held.
func (l *ProcLauncher) relaunch(p *launched, err error) {
	if p.admitted || p.released || l.stopping {
		return
	}
	limit := l.MaxRelaunches
	if limit == 0 {
		limit = DefaultMaxRelaunches
	}
	status := "exit 0"
	if err != nil {
		status = err.Error()
	}
	log := l.logger().With("worker", p.slot, "pid", p.cmd.Process.Pid, "status", status)
	if leftOnRequest(p.cmd.ProcessState) {
		log.Info("a worker process left before it was admitted (SIGTERM, SIGINT or SIGHUP, or it exited 0); not starting it again")
		return
	}
	if refusedUsage(p.cmd.ProcessState) {
		log.Error("a worker process refused its command line or configuration (exit 2) before it was admitted; not starting it again, as no retry cures that: its log says why",
			"log", filepath.Join(l.LogDir, fmt.Sprintf("worker-%d.log", p.slot)))
		return
	}
	if p.tries >= limit {
		log.Warn("a worker process exited before it was admitted; not starting it again", "relaunches", p.tries, "max_relaunches", max(0, limit))
		return
	}
	log.Warn("a worker process exited before it was admitted; starting it again", "relaunch", p.tries+1, "max_relaunches", limit)
	if err := l.spawn(p.slot, p.tries+1); err != nil {
		log.Error("starting a worker again", "error", err)
	}
}

// leftOnRequest reports whether a worker process that ended with state ps
// was asked to stop rather than lost: it exited 0 (a worker that got
// SIGTERM while it joined leaves and exits 0, as does one that learnt the
// job ended), or a signal asking it to stop (SIGTERM, SIGINT, SIGHUP)
// killed it before it handled them. Such a worker is not started again: a
// user's SIGTERM to a joining worker means "leave", and a Ctrl-C reaches
// every process of the terminal's group. SIGKILL (the OOM killer, kill -9)
// and other failures are losses.
func leftOnRequest(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.Success()
	}
	if ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
			return true
		}
		return false
	}
	return ws.Exited() && ws.ExitStatus() == 0
}

// refusedUsage reports whether a worker process that ended with state ps
// exited with cmdline.ExitUsage (2): `easyscale worker` refused its flags,
// its token or job-id file, or its environment, which the same command
// line meets again at every start.
func refusedUsage(ps *os.ProcessState) bool {
	return ps != nil && ps.Exited() && ps.ExitCode() == cmdline.ExitUsage
}

func (l *ProcLauncher) logger() hclog.Logger {
	if l.Logger == nil {
		return hclog.NewNullLogger()
	}
	return l.Logger
}

// notify wakes the waiters on Changed. l.mu is held.
func (l *ProcLauncher) notify() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// find returns the running process pid of this machine (host is a joiner's
// hostname), or nil. l.mu is held.
func (l *ProcLauncher) find(host string, pid int) *launched {
	if hn, _ := os.Hostname(); host != hn {
		return nil
	}
	for _, p := range l.procs {
		if !p.exited && p.cmd.Process.Pid == pid {
			return p
		}
	}
	return nil
}

// Admitted records that the coordinator admitted the worker process pid of
// host: it is no longer started again when it exits.
func (l *ProcLauncher) Admitted(host string, pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.find(host, pid); p != nil {
		p.admitted = true
	}
}

// Released records that the coordinator said goodbye to the worker process
// pid of host (it left on request, or the allocation shrank): it exits on
// its own, is not on its way, and is not started again.
func (l *ProcLauncher) Released(host string, pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.find(host, pid); p != nil {
		p.released = true
		l.notify()
	}
}

// OnTheWay returns how many launched processes are running, not released
// and not members (member reports whether a process id of this machine is
// an admitted member): joiners not admitted yet, and admitted workers that
// lost their session and are rejoining (one that missed a step's result).
// changed is closed at the next change of that count's inputs on the
// launcher's side (a process exited, was started again or released).
func (l *ProcLauncher) OnTheWay(member func(pid int) bool) (n int, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if !p.exited && !p.released && !member(p.cmd.Process.Pid) {
			n++
		}
	}
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return n, l.changed
}
