"""A physical worker's Python process: ``python3 -m easyscale.worker``, or a fork of :mod:`easyscale.forkserver` that
runs this module as ``__main__`` with torch already imported.

Started and supervised by the Go worker (``runtime/torchengine``), which talks
to it over :mod:`easyscale.protocol` (requests on stdin, replies on fd 3).
Requests and their replies:

    hello   {}                                  -> {protocol, package}
    load    {module | script, args, config, threads, device, rank}
                                                -> {parameters, train_samples, digest, torch, python,
                                                    fingerprint, canary}
    listen  {host, timeout_s}                   -> {port}     host this generation's TCPStore
    group   {generation, rank, size, host, port, timeout_s, logical_workers, fresh, step}
            + contexts index, payload: contexts of logical workers new to this process
                                                -> {}         (easyscale.rendezvous)
    cancel  {generation}                        -> {}         the group of that generation will not form
    replica_get {}                              -> {digest}, payload: replica state
    replica_set {}  payload: replica state      -> {digest}
    checkpoint {step}                           -> {digest}, payload: replica state as a checkpoint file
    step    {step}                              -> {losses, samples, contexts index, leaving}, payload: advanced contexts
    reduce  {step}                              -> {}         the chain over the group (easyscale.reduce)
    commit  {step, digest, loss}                -> {digest, hash_s, tensors}  digest "" unless asked (default:
                                                   asked); tensors: [name, digest] of each tensor hashed
    digest  {}                                  -> {digest, hash_s, tensors}  of the committed replica and
                                                   logical worker 0's buffers (the process must hold it)
    check   {step, steps, contexts index, fresh}, payload: every logical worker's context
                                                -> {result, steps, seconds, message}  the self-check
                                                   (easyscale.selfcheck), run by the training loop
    abort   {}                                  -> {}
    evaluate {}                                 -> {test_loss, test_accuracy, test_samples}; test_samples 0:
                                                   the job has no test set
    exit    {}                                  -> (process exits 0)

``load`` runs the training program in the main thread: the user's script
(``script``, with ``args`` as its command line, as ``__main__``) or, for a
``module``, its ``setup(config) -> Job`` trained by :func:`easyscale.job.run`.
The program calls into the loop API (:mod:`easyscale.loop`), and the
requests are served from inside those calls (:class:`GoDriver`): ``load`` is
answered when the program first needs its position (everything registered),
then the process serves requests until ``group`` tells it its logical
workers and the step it starts at; at each step boundary (the loop asks for
its next batch) it serves requests until ``step``, hands the step to the
loop, answers ``step`` after the micro-batch loop, serves ``reduce`` and
waits for ``commit`` (or ``abort``, after which the loop's micro-batch loop
runs the redone step) before the loop applies the gradient; ``commit`` is
answered at the next boundary, when everything the loop does with the step
is done. When the program has returned, the process answers the remaining
requests (checkpoint, evaluate, exit) and refuses steps.

A step is three requests: ``step`` computes (forward and backward of every
logical worker this process holds; no collective, so a slow peer costs no
timeout: the Go side sees that it is alive by its heartbeats), ``reduce``
runs the chain once every member has computed (its collectives wait only
for transfers, bounded by the group's timeout), ``commit`` applies.

Requests are served in order by the main thread, except ``checkpoint`` and
``cancel``, which a control thread answers at once even during a step or a
rendezvous (SIGTERM must checkpoint the last committed step within seconds,
whatever the step's length): ``checkpoint`` reads the parameters and
optimizer state, which change only between a commit request and the next
boundary (the commit window, under one lock), and the state the rest of the
registered objects had at the last boundary. Every reply has the request's
``id``; a failed request is answered
``{"type": "error", "kind": ..., "message": ...}`` and the process stays up
(``kind`` "peer" means a collective failed: the Go side rebuilds the group).
A thread sends ``{"type": "heartbeat"}`` every ``EASYSCALE_HEARTBEAT_S``
seconds (default 1) so the Go worker sees a hung process, and the process
exits when its control channel closes (the Go worker died).
"""

from __future__ import annotations

import datetime
import json
import os
import queue
import runpy
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO, Callable

import torch.distributed as dist

from . import job as jobmod
from . import loop, numerics, protocol, reduce, rendezvous, state
from .job import Config, JobError, load_module
from .replica import NonFiniteLoss, Replica, StepRun
from .selfcheck import DEFAULT_STEPS, SelfCheck
from .streams import ForbiddenSeedError

__all__ = ["main", "Worker", "GoDriver"]


class RequestError(Exception):
    """A request that cannot be served; kind is "request", "job", "numerics", "peer" or "internal"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: A handler's return value for a request it answered itself (or will answer later).
NO_REPLY: Any = None

#: The checkpoint metadata key of the writing process's numerics: JSON of its versions ("torch",
#: "python"), "fingerprint" and "canary", as its load answer reported them (runtime/torchengine.Loaded).
NUMERICS_META = "easyscale.numerics"


class GoDriver:
    """Drives the loop API from the Go worker's requests (see the module doc)."""

    def __init__(self, worker: Worker, load: dict[str, Any]) -> None:
        self.w, self.load = worker, load
        self.step_req: dict[str, Any] | None = None
        self.commit_req: dict[str, Any] | None = None
        #: The rank of this process in its current group (None before the first).
        self.rank: int | None = None

    def attach(self, s: loop.Session) -> int:
        w = self.w
        assert s.replica is not None
        w.replica = s.replica
        w.numerics = {**numerics.versions(), "fingerprint": numerics.fingerprint(s.device),
                      "canary": numerics.canary_digest(s.device)}
        w.reply(self.load, {"parameters": s.replica.numel, "train_samples": len(s.replica.data.dataset),
                            "digest": s.replica.digest(None), **w.numerics})
        w.inflight = None
        w.snapshot_light()
        while w.start_step is None:  # replica_set, listen, group: the first assignment
            w.serve_one()
        return w.start_step

    def next_step(self, s: loop.Session) -> loop.StepOrder:
        w = self.w
        while True:
            req, payload = w.next_request()
            if req["type"] == "check":
                first = self._check(s, req, payload)
                if first is not None:
                    return first
                continue
            if req["type"] == "step":
                if int(req["step"]) != s.next_step:
                    w.reply_error(req, "request", f"step {req['step']} asked, the training loop is at step "
                                  f"{s.next_step}")
                    continue
                return self._take_step(req)
            w.handle(req, payload)

    def _check(self, s: loop.Session, req: dict[str, Any], payload: bytes) -> loop.StepOrder | None:
        """Start the self-check asked for: its first step, or None when it was answered at once."""
        w = self.w
        if int(req["step"]) != s.next_step:
            w.reply_error(req, "request", f"check at step {req['step']}, the training loop is at step {s.next_step}")
            return None
        contexts = dict(state.decode_context(b) for b in state.unpack(req.get("contexts") or [], payload).values())
        w.inflight = req
        check = SelfCheck(s, s.next_step, int(req.get("steps", DEFAULT_STEPS)), contexts, self,
                          lambda result: self._checked(req, result))
        first = check.begin()
        if first is not None:
            s.driver = check
        return first

    def _checked(self, req: dict[str, Any], result: dict[str, Any]) -> None:
        self.w.reply(req, result)
        self.w.inflight = None

    def _take_step(self, req: dict[str, Any]) -> loop.StepOrder:
        w = self.w
        fault = req.get("fault")
        w.kill_at_commit = fault == "kill-commit"  # tests: lost after its peers committed
        if fault in ("kill", "term"):
            # Fault injection (--kill-at / --term-at): signal this process once its step has started.
            sig = signal.SIGKILL if fault == "kill" else signal.SIGTERM
            threading.Timer(0.0, os.kill, (os.getpid(), sig)).start()
        self.step_req = w.inflight = req
        return loop.StepOrder(int(req["step"]), None, w.rank == 0)

    def reduce(self, s: loop.Session, run: StepRun) -> loop.Reduced | loop.StepOrder:
        w, r = self.w, s.replica
        assert r is not None and self.step_req is not None
        res = run.result()
        index, blob = state.pack({lw: state.encode_context(lw, r.cursors[lw], r.bank.buffers(lw))
                                  for lw in r.logical_workers()})
        w.reply(self.step_req, {"losses": {str(k): v for k, v in res.losses.items()},
                                "samples": {str(k): v for k, v in res.samples.items()}, "contexts": index,
                                "leaving": w.leaving.is_set()}, blob)
        w.inflight = None
        step, reduced, aborted = run.step, None, False
        while True:
            req, payload = w.next_request()
            kind = req["type"]
            if kind == "reduce":
                if aborted or reduced is not None or int(req["step"]) != step:
                    w.reply_error(req, "request", f"reduce of step {req['step']}, but the step computed is {step}")
                    continue
                try:
                    reduced = reduce.chain(res.local, res.slots, s.config.logical_workers)
                except RuntimeError as e:
                    r.abort()
                    aborted = True
                    w.reply_error(req, "peer", f"step {step}: reducing gradients over process group "
                                  f"{w.generation}: {e}")
                    continue
                w.reply(req, {})
            elif kind == "commit":
                if reduced is None or int(req["step"]) != step:
                    w.reply_error(req, "request", f"commit of step {req['step']}, but the step reduced is "
                                  f"{step if reduced is not None else None}")
                    continue
                self.commit_req = w.inflight = req
                loss = req.get("loss")
                return loop.Reduced(reduced, float(loss) if loss is not None else loop.mean_loss(res.losses, 1))
            elif kind == "abort":
                r.abort()
                aborted, reduced = True, None
                w.reply(req, {})
            elif kind == "step":
                if not aborted:
                    r.abort()  # the Go side gave the step up: redo it
                if int(req["step"]) != step:
                    w.reply_error(req, "request", f"step {req['step']} asked while step {step} is redone")
                    continue
                return self._take_step(req)
            else:
                w.handle(req, payload)

    def begin_commit(self, s: loop.Session, batch: loop.Batch) -> None:
        self.w.apply_lock.acquire()  # the loop changes parameters and optimizer state until the boundary

    def finalize(self, s: loop.Session, batch: loop.Batch) -> None:
        w, r = self.w, s.replica
        assert r is not None
        req, self.commit_req = self.commit_req, None
        try:
            w.committed = batch.step + 1
            w.snapshot_light()
        finally:
            w.apply_lock.release()
        if w.kill_at_commit:
            os.kill(os.getpid(), signal.SIGKILL)
        if req is None:
            return
        w.inflight = None
        if not req.get("digest", True):  # the ledger hashes every K steps (trainer.SparseDigester)
            w.reply(req, {"digest": "", "hash_s": 0.0})
            return
        t0 = time.perf_counter()
        digest, tensors = r.digests(0)
        w.reply(req, {"digest": digest, "hash_s": time.perf_counter() - t0, "tensors": tensors})


class Worker:
    """The request loop of one Python worker process."""

    def __init__(self, channel: protocol.Channel) -> None:
        self.ch = channel
        self.replica: Replica | None = None
        self.session: loop.Session | None = None
        self.rank = 0
        self.size = 1
        self.generation = -1
        self.stores: list[Any] = []
        #: Fault injection of tests: SIGKILL this process inside the next commit, after applying the step.
        self.kill_at_commit = False
        #: The newest generation the Go side cancelled (set by the control thread; -1: none).
        self.cancelled_generation = -1
        #: Held by the main thread from a commit request to the next step boundary (the loop applies the step).
        self.apply_lock = threading.Lock()
        #: Set by SIGTERM: the process asks to leave at the next step boundary (step replies say so).
        self.leaving = threading.Event()
        #: The step the first assignment starts at (group's "step"); None before it.
        self.start_step: int | None = None
        #: Steps committed (the replica is the state after step committed - 1).
        self.committed = 0
        #: The request the main thread works on: a failure of the training program is its answer.
        self.inflight: dict[str, Any] | None = None
        #: Why the training program stopped (None while it runs or after it returned normally).
        self.dead: str | None = None
        self.ended = False
        #: The registered objects' state (but parameters and optimizer tensors) at the last boundary.
        self._light: Any = None
        self.work: queue.Queue[tuple[dict[str, Any], bytes] | int] = queue.Queue()
        #: What this process computes with, as its load answer reported it (versions, fingerprint,
        #: canary): each checkpoint records it (metadata "easyscale.numerics"), and a resume is refused
        #: by processes that compute other bits. None before the load is answered.
        self.numerics: dict[str, Any] | None = None
        self.handlers: dict[str, Callable[[dict[str, Any], bytes], tuple[dict[str, Any], bytes] | None]] = {
            "hello": self.hello, "load": self.load, "listen": self.listen, "group": self.group,
            "replica_get": self.replica_get, "checkpoint": self._locked(self.checkpoint),
            "replica_set": self.replica_set, "step": self.not_waiting, "reduce": self.not_waiting,
            "commit": self.not_waiting, "check": self.not_waiting, "digest": self.digest, "cancel": self.cancel,
            "abort": self.abort, "evaluate": self.evaluate}

    # --- replies ----------------------------------------------------------------------------------------------

    def reply(self, req: dict[str, Any], fields: dict[str, Any], payload: bytes = b"") -> None:
        self.ch.send({**fields, "type": req["type"], "id": req.get("id")}, payload)

    def reply_error(self, req: dict[str, Any], kind: str, message: str) -> None:
        self.ch.send({"type": "error", "kind": kind, "message": message, "id": req.get("id")})

    # --- requests ---------------------------------------------------------------------------------------------

    def hello(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        from . import __version__
        return {"protocol": protocol.VERSION, "package": __version__}, b""

    def load(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes] | None:
        """Run the training program (see the module doc); its first need of the runtime answers ``load``."""
        if self.session is not None:
            raise RequestError("request", "a job is loaded already")
        numerics.pin(int(req.get("threads", 1)))
        c = req["config"]
        cfg = Config(seed=int(c["seed"]), logical_workers=int(c["logical_workers"]),
                     micro_batch=int(c["micro_batch"]), steps=int(c["steps"]), params=dict(c.get("params", {})))
        device = str(req.get("device", "cpu"))
        try:
            numerics.require_device(device)
        except ValueError as e:
            raise JobError(str(e)) from None
        driver = GoDriver(self, req)
        s = loop.Session(cfg, driver, device)
        s.rank_hint = int(req.get("rank", 0))
        self.session = s
        loop.install(s)
        self.inflight = req
        where = req.get("script") or req.get("module")
        try:
            if req.get("script"):
                self._run_script(str(req["script"]), [str(a) for a in req.get("args") or []])
            else:
                setup = load_module(req["module"])
                try:
                    job = setup(cfg)
                except Exception as e:
                    raise JobError(f"{req['module']}: setup(config) raised {type(e).__name__}: {e}") from e
                jobmod.run(job, cfg)
            if not s.attached:
                raise JobError(f"{where}: the training program ended before its training loop (no step asked of "
                               "an easyscale.DataLoader)")
            s.end()
        except loop.Exit:
            raise
        except SystemExit as e:
            if e.code not in (None, 0) or not s.attached:
                self._program_failed(req, JobError(f"{where}: the training program exited with status {e.code}"
                                                   f"{'' if s.attached else ' before its training loop'}"))
                return NO_REPLY
            s.end()
        except BaseException as e:
            self._program_failed(req, e)
            return NO_REPLY
        self.ended = True
        return NO_REPLY

    def _run_script(self, path: str, args: list[str]) -> None:
        if not os.path.isfile(path):
            raise JobError(f"torch script {path}: no such file (the job file's torch.script, relative to the job file)")
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        runpy.run_path(path, run_name="__main__")

    def _program_failed(self, load: dict[str, Any], e: BaseException) -> None:
        """Answer the request the program was serving with its failure; later steps are refused with it."""
        if isinstance(e, RequestError):
            kind, msg = e.kind, str(e)
        elif isinstance(e, (JobError, ForbiddenSeedError, NonFiniteLoss, state.StateError)):
            kind, msg = "job", str(e)
        else:
            kind = "job"
            msg = f"the training program raised {type(e).__name__}: {e}\n{traceback.format_exc(limit=-8)}"
        self.dead = msg
        target = self.inflight if self.inflight is not None else None
        if target is not None:
            self.reply_error(target, kind, msg)
        self.inflight = None
        if self.apply_lock.locked():
            self.apply_lock.release()
        if target is None or target is not load:
            print(f"easyscale worker: {msg}", file=sys.stderr, flush=True)

    def not_waiting(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        if self.dead is not None:
            raise RequestError("job", self.dead)
        if self.ended:
            raise RequestError("job", f"step {req.get('step')} asked ({req['type']}): the training program ended after "
                               f"step {self.committed - 1} (its loop takes {self.committed} steps: set the job "
                               "file's steps to that)")
        raise RequestError("request", f"{req['type']} of step {req.get('step')}, but the training loop is not "
                           "waiting for it")

    def listen(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        # The store's own waits (rank 0's rendezvous) are bounded like every collective: a member lost while the
        # group forms fails the assignment within the heartbeat timeout, not a minute later.
        timeout = datetime.timedelta(seconds=float(req.get("timeout_s", 60)))
        store = rendezvous.tcp_store(req["host"], 0, True, timeout, wait_for_workers=False)
        self.stores.append(store)
        return {"port": store.port}, b""

    def group(self, req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        if dist.is_initialized():
            dist.destroy_process_group()
        want = [int(lw) for lw in req["logical_workers"]]
        if not want or want != list(range(want[0], want[0] + len(want))):
            raise RequestError("request", f"logical workers {want} are not a non-empty contiguous range")
        for lw in r.logical_workers():
            if lw not in want:
                r.remove(lw)
        contexts = dict(state.decode_context(b) for b in state.unpack(req.get("contexts") or [], payload).values())
        fresh = {int(lw) for lw in req.get("fresh") or []}
        for lw in want:
            if lw in contexts:  # the coordinator's copy (the last committed step) is authoritative
                if lw in r.logical_workers():
                    r.remove(lw)
                r.add(lw, contexts[lw])
            elif lw not in r.logical_workers():
                if lw in fresh:
                    r.add(lw)  # the start of training: the model's initial buffers, cursor at 0
                else:
                    raise RequestError("request", f"logical worker {lw} is new to this process but has no context")
        r.show()
        self.rank, self.size, self.generation = int(req["rank"]), int(req["size"]), int(req["generation"])
        r.physical_rank = self.rank
        if self.session is not None and isinstance(self.session.driver, GoDriver):
            self.session.driver.rank = self.rank
        if self.start_step is None:
            self.start_step = self.committed = int(req.get("step", 0))
        if self.size > 1:
            timeout_s = float(req.get("timeout_s", 5))
            if self.rank == 0 and self.stores:
                store = self.stores[-1]
            else:
                store = rendezvous.tcp_store(req["host"], int(req["port"]), False,
                                             datetime.timedelta(seconds=timeout_s))
                self.stores.append(store)
            self.stores = self.stores[-1:]
            generation = self.generation
            try:
                rendezvous.form(store, generation, self.rank, self.size, timeout_s,
                                lambda: self.cancelled_generation >= generation)
            except (RuntimeError, rendezvous.Cancelled) as e:
                raise RequestError("peer", f"building process group {generation}: {e}") from e
        return {}, b""

    def replica_get(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        return {"digest": r.digest(None)}, r.registry.encode()

    def checkpoint(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """The replica as a checkpoint file: metadata names the engine and the step (statedb checks both)
        and records this process's numerics (NUMERICS_META), which a resume compares with its own."""
        r = self._replica()
        step = int(req["step"])
        if step != self.committed:
            raise RequestError("request", f"checkpoint of step {step}, but this process has committed step "
                               f"{self.committed}")
        meta = {"easyscale.engine": "torch", "easyscale.step": str(step)}
        if self.numerics is not None:
            meta[NUMERICS_META] = json.dumps(self.numerics, sort_keys=True)
        check = self.session.driver if self.session is not None else None
        if isinstance(check, SelfCheck):  # the live objects hold the check's steps, not the committed state
            return {"digest": check.digest}, check.checkpoint(meta)
        if 0 in r.cursors:  # the digest covers logical worker 0's buffers, which only its holder has
            meta["easyscale.digest"] = r.digest(0, committed=True)
        data = r.registry.encode(meta, light=self._light)
        return {"digest": r.digest(None)}, data

    def replica_set(self, req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        r.registry.decode(payload)
        self.snapshot_light()
        return {"digest": r.digest(None)}, b""

    def snapshot_light(self) -> None:
        """Keep the registered objects' boundary state for a checkpoint taken during the next step."""
        if self.replica is not None:
            self._light = self.replica.registry.light()

    def cancel(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Mark generation ``generation`` cancelled: a rendezvous of it in progress gives up (control thread)."""
        self.cancelled_generation = max(self.cancelled_generation, int(req["generation"]))
        return {}, b""

    def digest(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        if 0 not in r.logical_workers():
            raise RequestError("request", "digest asked of a process that does not hold logical worker 0")
        t0 = time.perf_counter()
        digest, tensors = r.digests(0)
        return {"digest": digest, "hash_s": time.perf_counter() - t0, "tensors": tensors}, b""

    def evaluate(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        if r.job is None or r.job.test_set is None:
            return {"test_samples": 0}, b""  # the program evaluates itself, or not at all
        try:
            return r.evaluate(), b""
        except ValueError as e:
            raise RequestError("request", str(e)) from e

    def abort(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        if self.replica is not None:
            self.replica.abort()
        return {}, b""

    def _replica(self) -> Replica:
        if self.replica is None:
            raise RequestError("request", "no job loaded: send load first" if self.session is None else
                               "the training program has not reached its training loop")
        return self.replica

    # --- loop -------------------------------------------------------------------------------------------------

    #: Requests a reader thread answers at once, even while the main thread computes a step: they only read
    #: the parameters and optimizer state, which change only inside commit (under ``apply_lock``).
    URGENT = ("checkpoint", "cancel")

    def handle(self, req: dict[str, Any], payload: bytes) -> None:
        """Serve one request and send its reply (an error reply when it fails)."""
        kind = req["type"]
        try:
            handler = self.handlers.get(kind)
            if handler is None:
                raise RequestError("request", f"unknown request type {kind!r}")
            out = handler(req, payload)
            if out is NO_REPLY:
                return
            fields, data = out
            self.reply(req, fields, data)
        except loop.Exit:
            raise
        except RequestError as e:
            self.reply_error(req, e.kind, str(e))
        except (JobError, ForbiddenSeedError, NonFiniteLoss, state.StateError) as e:
            self.reply_error(req, "job", str(e))
        except Exception as e:  # a bug or a user-code error: report it, keep serving
            self.reply_error(req, "internal", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")

    def next_request(self) -> tuple[dict[str, Any], bytes]:
        """The next request for the main thread; raises loop.Exit on exit or when the channel closed."""
        item = self.work.get()
        if isinstance(item, int):
            raise loop.Exit(item)
        return item

    def serve_one(self) -> None:
        self.handle(*self.next_request())

    def serve(self) -> int:
        """Answer requests until exit or the channel closes; returns the exit status."""

        def read() -> None:
            while True:
                try:
                    req, payload = self.ch.recv()
                except protocol.ProtocolError as e:
                    print(f"easyscale worker: {e}; exiting", file=sys.stderr)
                    self.cancelled_generation = 1 << 62  # no rendezvous waits for a Go side that is gone
                    self.work.put(0 if isinstance(e.__cause__, EOFError) else 2)
                    return
                if req["type"] == "exit":
                    self.work.put(0)
                    return
                if req["type"] in self.URGENT:
                    self.handle(req, payload)
                else:
                    self.work.put((req, payload))

        threading.Thread(target=read, daemon=True, name="easyscale-control").start()
        try:
            while True:
                self.serve_one()
        except loop.Exit as e:
            return e.code

    def _locked(self, fn: Any) -> Any:
        def locked(req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
            with self.apply_lock:
                return fn(req, payload)
        return locked


def _heartbeat(ch: protocol.Channel, every: float, stop: threading.Event) -> None:
    while True:  # the first one at once: the Go side then knows the interpreter is up
        try:
            ch.send({"type": "heartbeat"})
        except OSError:
            return
        if stop.wait(every):
            return


def main() -> int:
    rx: BinaryIO = sys.stdin.buffer
    tx: BinaryIO = os.fdopen(3, "wb", buffering=0)
    ch = protocol.Channel(rx, tx)
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(ch, float(os.environ.get("EASYSCALE_HEARTBEAT_S", "1")), stop),
                     daemon=True).start()
    worker = Worker(ch)
    # SIGTERM (Slurm's preemption signal, or --term-at) asks to leave at the next step boundary: the step in
    # progress is finished and committed, then the Go side releases the process.
    signal.signal(signal.SIGTERM, lambda *_: worker.leaving.set())
    try:
        return worker.serve()
    finally:
        stop.set()


if __name__ == "__main__":
    status = main()
    # Leave without the interpreter's teardown: at exit the C++ destructors of a process group's threads can abort
    # the process ("terminate called without an active exception", SIGABRT, seen once under torch 1.13 in a
    # clean-clone CI run), which the Go side reads as a crash. What the run needs was written before the request
    # to exit; only the standard streams are still buffered.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
