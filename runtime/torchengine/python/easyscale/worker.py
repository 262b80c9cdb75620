"""A physical worker's Python process: ``python3 -m easyscale.worker``.

Started and supervised by the Go worker (``runtime/torchengine``), which talks
to it over :mod:`easyscale.protocol` (requests on stdin, replies on fd 3).
Requests and their replies:

    hello   {}                                  -> {protocol, package, fingerprint, canary}
    load    {module, config, threads, device}   -> {parameters, train_samples, digest, torch, python,
                                                    fingerprint, canary}
    listen  {host, timeout_s}                   -> {port}     host this generation's TCPStore
    group   {generation, rank, size, host, port, timeout_s, logical_workers, fresh}
            + contexts index, payload: contexts of logical workers new to this process
                                                -> {}         (easyscale.rendezvous)
    cancel  {generation}                        -> {}         the group of that generation will not form
    replica_get {}                              -> {digest}, payload: replica state
    replica_set {}  payload: replica state      -> {digest}
    checkpoint {step}                           -> {digest}, payload: replica state as a checkpoint file
    step    {step}                              -> {losses, samples, contexts index, leaving}, payload: advanced contexts
    reduce  {step}                              -> {}         the chain over the group (easyscale.reduce)
    commit  {step, digest}                      -> {digest, hash_s}  digest "" unless asked (default: asked)
    digest  {}                                  -> {digest, hash_s}  of the committed replica and logical
                                                   worker 0's buffers (the process must hold it)
    abort   {}                                  -> {}
    evaluate {}                                 -> {test_loss, test_accuracy, test_samples}
    exit    {}                                  -> (process exits 0)

A step is three requests: ``step`` computes (forward and backward of every
logical worker this process holds; no collective, so a slow peer costs no
timeout: the Go side sees that it is alive by its heartbeats), ``reduce``
runs the chain once every member has computed (its collectives wait only
for transfers, bounded by the group's timeout), ``commit`` applies.

Requests are served in order by the main thread, except ``checkpoint`` and
``cancel``, which a control thread answers at once even during a step or a
rendezvous (SIGTERM must checkpoint the last committed step within seconds,
whatever the step's length): ``checkpoint`` reads only the parameters and
optimizer state, which change only inside ``commit``, and the two take one
lock; ``cancel`` only marks the generation cancelled. Every reply has the request's ``id``; a failed request is answered
``{"type": "error", "kind": ..., "message": ...}`` and the process stays up
(``kind`` "peer" means a collective failed: the Go side rebuilds the group).
A thread sends ``{"type": "heartbeat"}`` every ``EASYSCALE_HEARTBEAT_S``
seconds (default 1) so the Go worker sees a hung process, and the process
exits when its control channel closes (the Go worker died).
"""

from __future__ import annotations

import datetime
import os
import queue
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

import torch
import torch.distributed as dist

from . import numerics, protocol, reduce, rendezvous, state
from .job import Config, JobError, load_module
from .replica import NonFiniteLoss, Replica
from .streams import ForbiddenSeedError

__all__ = ["main", "Worker"]


class RequestError(Exception):
    """A request that cannot be served; kind is "request", "job", "numerics", "peer" or "internal"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Worker:
    """The request loop of one Python worker process."""

    def __init__(self, channel: protocol.Channel) -> None:
        self.ch = channel
        self.replica: Replica | None = None
        self.world = 0
        self.rank = 0
        self.size = 1
        self.generation = -1
        self.stores: list[Any] = []
        self.pending: torch.Tensor | None = None
        self.pending_step = -1
        #: Fault injection of tests: SIGKILL this process inside the next commit, after applying the step.
        self.kill_at_commit = False
        #: The step computed and not yet reduced, and its gradients (Replica.compute's result).
        self.computed: Any = None
        self.computed_step = -1
        #: The newest generation the Go side cancelled (set by the control thread; -1: none).
        self.cancelled_generation = -1
        self._apply_lock = threading.Lock()
        #: Set by SIGTERM: the process asks to leave at the next step boundary (step replies say so).
        self.leaving = threading.Event()

    # --- requests ---------------------------------------------------------------------------------------------

    def hello(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        from . import __version__
        return {"protocol": protocol.VERSION, "package": __version__}, b""

    def load(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        numerics.pin(int(req.get("threads", 1)))
        c = req["config"]
        cfg = Config(seed=int(c["seed"]), logical_workers=int(c["logical_workers"]),
                     micro_batch=int(c["micro_batch"]), steps=int(c["steps"]), params=dict(c.get("params", {})))
        setup = load_module(req["module"])
        try:
            job = setup(cfg)
        except Exception as e:
            raise RequestError("job", f"{req['module']}: setup(config) raised {type(e).__name__}: {e}") from e
        device = str(req.get("device", "cpu"))
        self.replica = Replica(job, cfg, [], device)
        self.world = cfg.logical_workers
        return {"parameters": self.replica.numel, "train_samples": len(job.train_set),
                "digest": self.replica.digest(None), **numerics.versions(),
                "fingerprint": numerics.fingerprint(device), "canary": numerics.canary_digest(device)}, b""

    def listen(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        # The store's own waits (rank 0's rendezvous) are bounded like every collective: a member lost while the
        # group forms fails the assignment within the heartbeat timeout, not a minute later.
        timeout = datetime.timedelta(seconds=float(req.get("timeout_s", 60)))
        store = rendezvous.tcp_store(req["host"], 0, True, timeout, wait_for_workers=False)
        self.stores.append(store)
        return {"port": store.port}, b""

    def group(self, req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        self.pending = None
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
        self.rank, self.size, self.generation = int(req["rank"]), int(req["size"]), int(req["generation"])
        r.physical_rank = self.rank
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
        data = state.encode_replica(r.job.model, r.job.optimizer, r.job.lr_scheduler)
        return {"digest": r.digest(None)}, data

    def checkpoint(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """The replica as a checkpoint file: metadata names the engine and the step (statedb checks both)."""
        r = self._replica()
        data = state.encode_replica(r.job.model, r.job.optimizer, r.job.lr_scheduler,
                                    {"easyscale.engine": "torch", "easyscale.step": str(int(req["step"])),
                                     "easyscale.digest": r.digest(0)})
        return {"digest": r.digest(None)}, data

    def replica_set(self, req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        state.decode_replica(payload, r.job.model, r.job.optimizer, r.job.lr_scheduler)
        return {"digest": r.digest(None)}, b""

    def step(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        s = int(req["step"])
        fault = req.get("fault")
        self.kill_at_commit = fault == "kill-commit"  # tests: lost after its peers committed
        if fault in ("kill", "term"):
            # Fault injection (--kill-at / --term-at): signal this process once its step has started.
            sig = signal.SIGKILL if fault == "kill" else signal.SIGTERM
            threading.Timer(0.0, os.kill, (os.getpid(), sig)).start()
        self.pending, self.computed = None, None
        res = r.compute(s, first_in_chain=(self.rank == 0))
        self.computed, self.computed_step = res, s
        index, blob = state.pack({lw: state.encode_context(lw, r.cursors[lw], r.bank.buffers(lw))
                                  for lw in r.logical_workers()})
        return {"losses": {str(k): v for k, v in res.losses.items()},
                "samples": {str(k): v for k, v in res.samples.items()}, "contexts": index,
                "leaving": self.leaving.is_set()}, blob

    def reduce(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        s = int(req["step"])
        res = self.computed
        if res is None or self.computed_step != s:
            raise RequestError("request", f"reduce of step {s}, but the step computed is {self.computed_step}")
        self.computed = None
        try:
            self.pending = reduce.chain(res.local, res.slots, self.world)
        except RuntimeError as e:
            r.abort()
            raise RequestError("peer", f"step {s}: reducing gradients over process group {self.generation}: {e}") \
                from e
        self.pending_step = s
        return {}, b""

    def cancel(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        """Mark generation ``generation`` cancelled: a rendezvous of it in progress gives up (control thread)."""
        self.cancelled_generation = max(self.cancelled_generation, int(req["generation"]))
        return {}, b""

    def commit(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        s = int(req["step"])
        if self.pending is None or self.pending_step != s:
            raise RequestError("request", f"commit of step {s}, but the step computed is {self.pending_step}")
        r.apply(self.pending)
        self.pending = None
        if self.kill_at_commit:
            os.kill(os.getpid(), signal.SIGKILL)
        if not req.get("digest", True):  # the ledger hashes every K steps (trainer.SparseDigester)
            return {"digest": "", "hash_s": 0.0}, b""
        t0 = time.perf_counter()
        digest = r.digest(0)
        return {"digest": digest, "hash_s": time.perf_counter() - t0}, b""

    def digest(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        r = self._replica()
        if 0 not in r.logical_workers():
            raise RequestError("request", "digest asked of a process that does not hold logical worker 0")
        t0 = time.perf_counter()
        digest = r.digest(0)
        return {"digest": digest, "hash_s": time.perf_counter() - t0}, b""

    def evaluate(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        try:
            return self._replica().evaluate(), b""
        except ValueError as e:
            raise RequestError("request", str(e)) from e

    def abort(self, req: dict[str, Any], _: bytes) -> tuple[dict[str, Any], bytes]:
        if self.replica is not None:
            self.replica.abort()
        self.pending, self.computed = None, None
        return {}, b""

    def _replica(self) -> Replica:
        if self.replica is None:
            raise RequestError("request", "no job loaded: send load first")
        return self.replica

    # --- loop -------------------------------------------------------------------------------------------------

    #: Requests a reader thread answers at once, even while the main thread computes a step: they only read
    #: the parameters and optimizer state, which change only inside commit (under ``_apply_lock``).
    URGENT = ("checkpoint", "cancel")

    def _handle(self, handlers: dict[str, Any], req: dict[str, Any], payload: bytes) -> None:
        kind = req["type"]
        reply: dict[str, Any]
        out = b""
        try:
            handler = handlers.get(kind)
            if handler is None:
                raise RequestError("request", f"unknown request type {kind!r}")
            reply, out = handler(req, payload)
            reply["type"] = kind
        except RequestError as e:
            reply = {"type": "error", "kind": e.kind, "message": str(e)}
        except (JobError, ForbiddenSeedError, NonFiniteLoss, state.StateError) as e:
            reply = {"type": "error", "kind": "job", "message": str(e)}
        except Exception as e:  # a bug or a user-code error: report it, keep serving
            reply = {"type": "error", "kind": "internal",
                     "message": f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"}
        reply["id"] = req.get("id")
        self.ch.send(reply, out)

    def serve(self) -> int:
        """Answer requests until exit or the channel closes; returns the exit status."""
        handlers = {"hello": self.hello, "load": self.load, "listen": self.listen, "group": self.group,
                    "replica_get": self.replica_get, "checkpoint": self._locked(self.checkpoint),
                    "replica_set": self.replica_set, "step": self.step, "reduce": self.reduce,
                    "commit": self._locked(self.commit), "digest": self._locked(self.digest), "cancel": self.cancel,
                    "abort": self.abort, "evaluate": self.evaluate}
        work: queue.Queue[tuple[dict[str, Any], bytes] | int] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    req, payload = self.ch.recv()
                except protocol.ProtocolError as e:
                    print(f"easyscale worker: {e}; exiting", file=sys.stderr)
                    self.cancelled_generation = 1 << 62  # no rendezvous waits for a Go side that is gone
                    work.put(0 if isinstance(e.__cause__, EOFError) else 2)
                    return
                if req["type"] == "exit":
                    work.put(0)
                    return
                if req["type"] in self.URGENT:
                    self._handle(handlers, req, payload)
                else:
                    work.put((req, payload))

        threading.Thread(target=read, daemon=True, name="easyscale-control").start()
        while True:
            item = work.get()
            if isinstance(item, int):
                return item
            self._handle(handlers, *item)

    def _locked(self, fn: Any) -> Any:
        def locked(req: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
            with self._apply_lock:
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
    sys.exit(main())
