"""The fork server: ``easyscale.forkserver``, one per Go process, interpreter and environment.

Importing torch costs every worker process one to two seconds of CPU (torch's shared library and its Python
modules; measured 1.8 s on torch 1.13 and 2.1 s on torch 2.6 on the CI machine). The Go side
(``runtime/torchengine/forkserver.go``) starts this server once, through a bootstrap that ignores SIGINT, SIGTERM
and SIGHUP before anything is imported; it imports torch once and forks a worker process per request, which runs
``easyscale.worker`` as ``python3 -m easyscale.worker`` would, with torch already imported.

The server never runs a torch operation, so it holds no thread pool, no CUDA context and no other thread: a fork
of it is as clean as a fresh interpreter that has imported torch. A worker's environment is the server's as it
started (``START_ENVIRON``, handed over by the Go side's bootstrap before anything was imported), with the request's
package directory as its PYTHONPATH, set before the worker imports anything of easyscale. The Go side starts a
server per worker environment (all of it but PYTHONPATH), so that what torch read at its import is what the worker
would have read, and a request stays small whatever the environment's size.

Protocol, over the ``SOCK_SEQPACKET`` socket on fd 3 (one message a datagram, JSON):

    server -> Go  {"ready": true, "pid": N, "torch": version}     once torch is imported
    Go -> server  {"id": I, "package": dir}                       with four file descriptors (SCM_RIGHTS):
                                                                  stdin, control (the worker's fd 3), stdout,
                                                                  stderr
    server -> Go  {"id": I, "pid": N} or {"id": I, "error": msg}  the reply to request I; with a pid, a pidfd of
                                                                  worker N (SCM_RIGHTS) where the kernel and Python
                                                                  have pidfd_open (Linux 5.3, Python 3.9)
    server -> Go  {"exited": N, "status": S}                      when worker N has ended: S is its exit
                                                                  code, or minus the signal that ended it

The server exits when the socket closes (the Go process ended), and when it has had no worker for its first
argument's seconds (default 60: a server holds about 230 MB, torch's modules). Each worker
has the kernel kill it when the server dies (``PR_SET_PDEATHSIG``), as the Go side has the kernel kill the server
when it dies, so no worker outlives its Go process. The server ignores SIGINT, SIGTERM and SIGHUP from its
bootstrap's first statement: Slurm signals every process of a step, and a worker must outlive SIGTERM long enough
to leave at its step boundary.

A worker is a fork, so what a process inherits rather than reads from its environment is the server's: its
working directory (first on its ``sys.path``, as with ``python3 -m``), umask, resource limits and CPU affinity are
those of the Go process when it started the server, and its hash seed is the server's.
"""
from __future__ import annotations

import ctypes
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback

_PR_SET_PDEATHSIG = 1
_CONTROL_FD = 3
_IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def _reap(sock: socket.socket, children: set[int]) -> None:
    """Reports every ended worker (waitpid without blocking until none is left)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        try:
            _send(sock, {"exited": pid, "status": code})
        except OSError:
            return


def _become_worker(server: int, fds: list[int], env: dict[str, str], package: str, package0: str) -> None:
    """Runs in the forked child: the worker's descriptors, signals, environment and package, then the worker."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != server:
        os._exit(70)  # the server died before the child could ask to follow it
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    stdin, control, stdout, stderr = fds
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    os.dup2(control, _CONTROL_FD)
    # Nothing of the server's or of another worker's stays open here: another worker's stdin must reach EOF
    # when the Go side closes it.
    os.closerange(_CONTROL_FD + 1, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()
    os.environ.update(env)
    # The worker's easyscale is the one in its package directory, not the one this server was started from.
    for name in [m for m in sys.modules if m == "easyscale" or m.startswith("easyscale.")]:
        del sys.modules[name]
    sys.path[:] = [package if p == package0 else p for p in sys.path]
    if package not in sys.path:
        sys.path.insert(0, package)
    sys.argv = ["-m"]  # run_module puts the module's path in its place, as python3 -m easyscale.worker has it
    runpy.run_module("easyscale.worker", run_name="__main__", alter_sys=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _fork(sock: socket.socket, server: int, request: object, fds: list[int], environ: dict[str, str],
          package0: str) -> int:
    """Answers one request: forks its worker and returns the worker's pid, or 0 when it was refused."""
    rid = request.get("id") if isinstance(request, dict) else None
    if len(fds) != 4:
        _send(sock, {"id": rid, "error": f"want 4 file descriptors, got {len(fds)}"})
        return 0
    package = request.get("package") if isinstance(request, dict) else None
    if not isinstance(package, str) or not package:
        _send(sock, {"id": rid, "error": f"malformed request: want a package directory, got {package!r}"})
        return 0
    env = dict(environ, PYTHONPATH=package)
    try:
        pid = os.fork()
    except OSError as e:
        _send(sock, {"id": rid, "error": f"fork: {e}"})
        return 0
    if pid == 0:
        status = 70
        try:
            sock.close()
            _become_worker(server, fds, env, package, package0)
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # the worker's own failures are its stderr's, as in a fresh interpreter
            traceback.print_exc()
            status = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    _send_pid(sock, rid, pid)
    return pid


def _send_pid(sock: socket.socket, rid: object, pid: int) -> None:
    """Replies to request rid with worker pid and, where it can be opened, a pidfd of it.

    The pidfd names this worker and no later process with its pid: the Go side signals through it, so a signal
    sent after the worker ended (this server reaps it, and the kernel may give its pid to another process before
    the Go side reads the exit) reaches no other process. It is opened before this loop can reap the worker, so it
    is the worker's.
    """
    message = json.dumps({"id": rid, "pid": pid}).encode()
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # Python before 3.9, a kernel before 5.3, or a seccomp filter
        sock.send(message)
        return
    try:
        socket.send_fds(sock, [message], [pidfd])
    finally:
        os.close(pidfd)


def main() -> int:
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    sock = socket.socket(fileno=_CONTROL_FD)
    environ = dict(globals().get("START_ENVIRON") or os.environ)
    package0 = environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    idle = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    # SIGCHLD wakes the loop through a pipe, so that an ended worker is reported at once.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    import torch  # the point of the server: every fork has it imported

    server = os.getpid()
    _send(sock, {"ready": True, "pid": server, "torch": torch.__version__})
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [], None if children else idle)
        if not readable and not children:
            return 0  # idle: the Go side starts another server when it needs one
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(sock, children)
        if sock not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            return 0
        if not data:
            return 0  # the Go process closed its end
        try:
            try:
                request = json.loads(data)
            except Exception as e:  # noqa: BLE001 - ValueError, RecursionError: answered, never fatal
                _send(sock, {"error": f"malformed request: {e!r}"})
                continue
            pid = _fork(sock, server, request, fds, environ, package0)
            if pid:
                children.add(pid)
        except OSError:
            return 0
        finally:
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
