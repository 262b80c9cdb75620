"""The fork server's protocol (easyscale.forkserver): bad requests are answered, a good one forks a worker."""

import json
import os
import socket
import subprocess
import sys
import unittest

import easyscale

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(easyscale.__file__)))


class _ServerCase(unittest.TestCase):
    """Starts a fork server for each test, as the Go side does, and reads its ready message."""
    idle_s = "60"

    def setUp(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.sock.settimeout(120)
        env = dict(os.environ, PYTHONPATH=PACKAGE, FORKSERVER_TEST="forty-two")
        os.set_inheritable(theirs.fileno(), True)
        # The server reads its socket on fd 3, as the Go side passes it. Its working directory comes first on its
        # path (as python3 -m's does): "/", so that the tests' own directory does not hide the packages named.
        # Its argument is its idle time in seconds.
        self.server = subprocess.Popen([sys.executable, "-c",
                                        f"import os; os.dup2({theirs.fileno()}, 3); "
                                        "import runpy; runpy.run_module('easyscale.forkserver', run_name='__main__')",
                                        self.idle_s],
                                       env=env, pass_fds=(theirs.fileno(),), cwd=os.sep)
        theirs.close()
        self.addCleanup(self.server.wait, 30)
        self.addCleanup(self.sock.close)
        ready = self.receive()
        self.assertTrue(ready["ready"])
        self.assertEqual(ready["pid"], self.server.pid)

    def receive(self) -> dict:
        return json.loads(self.sock.recv(1 << 16))


class ForkServerTest(_ServerCase):

    def test_malformed_requests_are_answered_and_change_nothing(self) -> None:
        r, w = os.pipe()
        try:
            for request, fds, want in [
                (b"{not json", [], "malformed request"),
                (b"[" * 100000, [], "malformed request"),  # nested past the parser's recursion limit
                (json.dumps({"id": 1, "package": PACKAGE}).encode(), [r, w], "want 4 file descriptors, got 2"),
                (json.dumps({"id": 2, "package": ["A=1"]}).encode(), [r, w, w, w], "malformed request"),
                (json.dumps({"id": 3, "env": {"A": "1"}}).encode(), [r, w, w, w], "malformed request"),
                (json.dumps({"id": 4, "package": ""}).encode(), [r, w, w, w], "malformed request"),
                (json.dumps([1, 2]).encode(), [r, w, w, w], "malformed request"),
            ]:
                with self.subTest(request=request[:40], fds=len(fds)):
                    socket.send_fds(self.sock, [request], fds)
                    reply = self.receive()
                    self.assertIn(want, reply.get("error", ""), reply)
                    if request.startswith(b"{\"id"):
                        self.assertEqual(reply["id"], json.loads(request)["id"])
            self.assertIsNone(self.server.poll(), "the server exited on a malformed request")
        finally:
            os.close(r)
            os.close(w)

    def test_a_worker_gets_the_requests_descriptors_and_the_servers_environment_and_its_exit_is_reported(
            self) -> None:
        # A package whose easyscale.worker prints the server's environment variable, its PYTHONPATH and its
        # sys.argv and exits 7: the server must run the requested package's worker, not the one it was started from.
        package = self.enterContext(_TempPackage())
        stdin_r, stdin_w = os.pipe()
        control_r, control_w = os.pipe()
        out_r, out_w = os.pipe()
        request = json.dumps({"id": 9, "package": package}).encode()
        socket.send_fds(self.sock, [request], [stdin_r, control_w, out_w, out_w])
        for fd in (stdin_r, control_w, out_w):
            os.close(fd)
        data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 4)
        reply = json.loads(data)
        self.assertEqual(reply["id"], 9)
        pid = reply["pid"]
        # With the reply comes a pidfd of the worker (this kernel and Python have pidfd_open), which the Go side
        # signals through: /proc says whose it is.
        self.assertEqual(len(fds), 1, fds)
        try:
            with open(f"/proc/self/fdinfo/{fds[0]}") as info:
                self.assertIn(f"Pid:\t{pid}\n", info.read())
        finally:
            os.close(fds[0])
        os.close(stdin_w)  # the worker waits for its stdin's end, so that it was alive when /proc was read
        self.assertEqual(self.receive(), {"exited": pid, "status": 7})
        with os.fdopen(out_r) as out, os.fdopen(control_r, "rb") as control:
            # the environment is the server's with the request's package as PYTHONPATH, sys.argv what
            # python3 -m easyscale.worker gives
            self.assertEqual(out.read(), f"forty-two {package} {[os.path.join(package, 'easyscale', 'worker.py')]}\n")
            self.assertEqual(control.read(), b"control")

    def test_the_server_exits_when_its_socket_closes(self) -> None:
        self.sock.close()
        self.assertEqual(self.server.wait(30), 0)


class IdleForkServerTest(_ServerCase):
    idle_s = "0.5"

    def test_a_server_without_workers_for_its_idle_time_exits(self) -> None:
        self.assertEqual(self.server.wait(30), 0)
        self.assertEqual(self.sock.recv(1 << 16), b"")


class _TempPackage:
    def __enter__(self) -> str:
        import tempfile
        self.dir = tempfile.TemporaryDirectory()
        os.mkdir(os.path.join(self.dir.name, "easyscale"))
        with open(os.path.join(self.dir.name, "easyscale", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(self.dir.name, "easyscale", "worker.py"), "w") as f:
            f.write("import os, sys\n"
                    "sys.stdin.read()\n"
                    "print(os.environ['FORKSERVER_TEST'], os.environ['PYTHONPATH'], sys.argv)\n"
                    "os.write(3, b'control')\n"
                    "sys.exit(7)\n")
        return self.dir.name

    def __exit__(self, *exc: object) -> None:
        self.dir.cleanup()


if __name__ == "__main__":
    unittest.main()
