"""One physical worker's model replica and the logical workers it runs.

A step on a replica that holds logical workers L (a contiguous range):

1. every logical worker's next micro-batch is taken from its cursor (the
   sample indices) and the step's stream keys computed; then for each logical
   worker l in L, in increasing order: swap l's buffers in, seed the global
   generators from (seed, l, step), read l's samples (the Job's transform
   drawing from l's augmentation stream of the step), and hand the micro-batch
   to the training loop, which runs forward, loss and :meth:`StepRun.backward`
   (:class:`StepRun`, the loop API's micro-batch loop and the Job's alike);
2. the gradients are folded in logical-worker order: on the replica that holds
   logical worker 0 autograd's accumulation into ``.grad`` is that fold, the
   others keep one flat slot per logical worker for the chain
   (:mod:`easyscale.reduce`);
3. the reduced gradient G is put into every parameter's ``.grad``
   (:meth:`Replica.set_grads`) and the loop applies it: clipping, the
   optimizer and scheduler steps, as after DDP's all-reduce.

Nothing of a logical worker's context is lost if a step is aborted: buffers and
cursors are snapshotted before step 1 and put back by :meth:`Replica.abort`;
parameters and optimizer state change only after the reduction.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
from typing import Any, Callable, Iterator

import torch
from torch import nn

from . import reduce, streams
from .context import BufferBank, BufferSnapshot
from .job import Config, Job, JobError, collate
from .sampler import Cursor, LogicalSampler
from .state import Registry

__all__ = ["Replica", "StepRun", "StepResult", "Data", "NonFiniteLoss", "Ablation"]


def normal_device(device: str | torch.device) -> torch.device:
    """``device`` as a tensor's ``.device`` reads ("cuda" -> cuda:0, the current GPU), so that comparisons with
    tensors' devices hold."""
    return torch.empty(0, device=device).device


@dataclasses.dataclass(frozen=True)
class Ablation:
    """Switches off one consistency factor; only tests use it, to show each factor is needed.

    The zero value switches nothing off. Each switch is harmless on the fixed
    allocation of one physical worker per logical worker and changes the
    digest under a changing one (tests/test_ablation.py; the native engine's
    runtime/trainer.Ablation).
    """

    key_rng_by_worker: bool = False  # random streams keyed by the physical worker, not the logical one
    drop_cursor_on_move: bool = False  # a moving logical worker restarts its epoch
    buffers_per_worker: bool = False  # one set of buffers per physical worker
    grouped_reduction: bool = False  # each process pre-sums its logical workers before the chain


@dataclasses.dataclass
class Data:
    """The training data of a job: what the loop API's DataLoader (or a Job) describes.

    dataset: indexable and ``len()``-able; ``dataset[i]`` is one sample.
    micro_batch: samples per logical worker per step.
    seed: the DistributedSampler's seed (epoch e's order is ``randperm`` from ``seed + e``).
    shuffle: False reads each shard in order.
    collate: samples -> micro-batch (torch's default_collate for the loop API).
    transform: optional ``transform(sample_input, generator)`` of the Job API, drawing from a generator
        seeded once per micro-batch from (job seed, logical worker, step, "augment").
    """

    dataset: Any
    micro_batch: int
    seed: int
    shuffle: bool = True
    collate: Callable[[list[Any]], Any] = collate
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None


class NonFiniteLoss(ArithmeticError):
    """A logical worker's loss is NaN or infinite; the message names the logical worker and step."""


class StepResult:
    """What a step's micro-batch loop leaves for the reduction: the flat gradient, the chain slots, the losses."""

    def __init__(self, local: torch.Tensor, slots: list[torch.Tensor], losses: dict[int, float],
                 samples: dict[int, str]) -> None:
        self.local, self.slots, self.losses, self.samples = local, slots, losses, samples


def sample_hash(indices: list[int]) -> str:
    """Hex of the first 8 bytes of sha256 over the indices as little-endian uint32 (the native ledger's)."""
    return hashlib.sha256(struct.pack(f"<{len(indices)}I", *indices)).hexdigest()[:16]


class Replica:
    """A replica of a job holding ``logical_workers`` (contiguous, increasing) for ``config``.

    Built from a Job (``Replica(job, config, ...)``: its model, optimizer and
    LR scheduler are registered as "model", "optimizer" and "lr_scheduler")
    or, for the loop API, from a ``registry`` of the program's stateful
    objects and its ``data`` (then ``job`` is None).
    """

    def __init__(self, job: Job | None, config: Config, logical_workers: list[int] | tuple[int, ...] = (),
                 device: str = "cpu", ablation: Ablation = Ablation(), *, registry: Registry | None = None,
                 data: Data | None = None) -> None:
        if job is not None:
            job.check()
            registry = Registry()
            registry.add("model", job.model)
            registry.add("optimizer", job.optimizer)
            if job.lr_scheduler is not None:
                registry.add("lr_scheduler", job.lr_scheduler)
            data = Data(job.train_set, config.micro_batch, config.seed, transform=job.transform)
        if registry is None or data is None:
            raise ValueError("Replica needs a job, or a registry and data")
        self.ablation = ablation
        #: This replica's rank among the physical workers (set by the group); only ablations read it.
        self.physical_rank = 0
        self.job, self.config, self.registry, self.data = job, config, registry, data
        self.device = normal_device(device)
        modules = registry.modules()
        if not modules:
            raise JobError("no model is registered: register the torch.nn.Module you train")
        self.model: nn.Module = next(iter(modules.values())) if len(modules) == 1 else nn.ModuleDict(modules)
        if job is not None:
            job.model.to(self.device)
        self.params = [(n, p) for n, p in registry.parameters() if p.requires_grad]
        self.numel = sum(p.numel() for _, p in self.params)
        self.sampler = LogicalSampler(len(data.dataset), config.logical_workers, data.seed, data.shuffle)
        self.bank = BufferBank(self.model, [])
        self._gen = torch.Generator()
        self.cursors: dict[int, Cursor] = {}
        for lw in logical_workers:
            self.add(lw)
        self._snap: tuple[BufferSnapshot, dict[int, Cursor]] | None = None

    # --- logical workers -------------------------------------------------------------------------------------

    def logical_workers(self) -> list[int]:
        return sorted(self.cursors)

    def add(self, lw: int, context: dict[str, Any] | None = None) -> None:
        """Take logical worker ``lw`` with its context (``{"cursor", "buffers"}``) or a fresh one."""
        if not 0 <= lw < self.config.logical_workers:
            raise ValueError(f"logical worker {lw} outside 0..{self.config.logical_workers - 1}")
        if context is None:
            self.bank.add(lw)
            self.cursors[lw] = Cursor()
        else:
            self.bank.add(lw, context["buffers"])
            cursor = context["cursor"]
            if self.ablation.drop_cursor_on_move:
                cursor = Cursor(cursor.epoch, 0)
            self.cursors[lw] = cursor

    def remove(self, lw: int) -> dict[str, Any]:
        """Give logical worker ``lw`` away; returns its context for :meth:`add` on another replica."""
        return {"cursor": self.cursors.pop(lw), "buffers": self.bank.remove(lw)}

    def show(self) -> None:
        """Swap the buffers of the lowest logical worker held into the model: between steps the model is that
        logical worker's (on the process holding logical worker 0, the model DDP's rank 0 evaluates and saves)."""
        lws = self.logical_workers()
        if lws:
            self.bank.activate(lws[0])

    def epoch(self) -> int:
        """The epoch of the next step (the held logical workers' cursors agree on it)."""
        lws = self.logical_workers()
        if not lws:
            raise ValueError("the replica holds no logical worker")
        return self.sampler.batch_epoch(self.cursors[lws[0]], self.data.micro_batch)

    # --- one step --------------------------------------------------------------------------------------------

    def compute(self, step: int, first_in_chain: bool) -> StepResult:
        """Run every held logical worker's micro-batch of ``step`` with the Job's loss; see the module doc.

        ``first_in_chain`` says this replica holds the lowest logical workers of
        the step (its fold starts the chain). Raises NonFiniteLoss, or JobError
        when a parameter gets no gradient or user code re-seeds torch.
        """
        if self.job is None:
            raise ValueError("compute needs a Job's loss; the loop API runs the micro-batches itself")
        model, loss = self.job.model, self.job.loss
        model.train()
        run = StepRun(self, step, first_in_chain)
        for x, y in run:
            run.backward(loss(model(x.to(self.device)), y.to(self.device)))
        return run.result()

    def _samples(self, indices: list[int], key: int) -> list[Any]:
        """The samples ``indices``, in order, each through the Job's transform, which draws from one generator
        seeded with ``key`` once for the micro-batch (the logical worker's augmentation stream of the step).

        The transform must not keep the generator past the call. The
        micro-batch of a logical worker at a step is the same on every
        placement, and so are its samples' order and draws.

        All the samples are read first, then transformed in order, as a plain
        script's DataLoader pass and augmentation pass do: the transform draws
        only from its generator, so the draws are those of reading and
        transforming each sample in turn, and the two passes each keep their
        code warm (alternating them took about 2 % of a LeNet step longer,
        BENCHMARKS.md).
        """
        dataset, transform = self.data.dataset, self.data.transform
        samples = [dataset[i] for i in indices]
        if transform is None:
            return samples
        g = self._gen
        g.manual_seed(key)
        return [(transform(x, g), y) for x, y in samples]

    def take_grads(self, lw: int) -> torch.Tensor:
        """Flatten the parameters' gradients into one float32 vector and clear them (set to None)."""
        grads, same = [], True
        f32, device = torch.float32, self.device
        for name, p in self.params:
            g = p.grad
            if g is None:
                raise JobError(f"parameter {name} received no gradient in logical worker {lw}'s micro-batch: "
                               "every trainable parameter must take part in the loss (or set requires_grad=False)")
            same = same and g.dtype == f32 and g.device == device
            grads.append(g.reshape(-1))
            p.grad = None
        if same and grads:
            return torch.cat(grads)  # one copy of each, the same bits as copying them one by one
        flat = torch.empty(self.numel, device=self.device)
        at = 0
        for g in grads:
            flat[at:at + g.numel()].copy_(g)
            at += g.numel()
        return flat

    def clear_grads(self) -> None:
        for _, p in self.params:
            p.grad = None

    def abort(self) -> None:
        """Undo the buffers and cursors of the step in progress (parameters were not changed)."""
        if self._snap is not None:
            bufs, cursors = self._snap
            self.bank.restore(bufs)
            self.cursors = dict(cursors)
            self._snap = None
        self.clear_grads()

    def set_grads(self, reduced: torch.Tensor) -> None:
        """Make every parameter's ``.grad`` its view of the reduced flat gradient G (what the loop then clips
        and applies); the step can no longer be aborted."""
        at = 0
        for name, p in self.params:
            if p.device != reduced.device:
                raise JobError(f"parameter {name} is on {p.device} but the job runs on {reduced.device} "
                               f"([torch] device): move the model there before wrapping or registering it, "
                               f"model = DDP(Net().to(easyscale.device()))")
            p.grad = reduced[at:at + p.numel()].view_as(p)
            at += p.numel()
        self._snap = None

    def apply(self, reduced: torch.Tensor) -> None:
        """The Job's update: set the gradients, optimizer step, LR scheduler step, gradients cleared."""
        if self.job is None:
            raise ValueError("apply needs a Job; the loop API applies the gradient itself")
        self.set_grads(reduced)
        self.job.optimizer.step()
        if self.job.lr_scheduler is not None:
            self.job.lr_scheduler.step()
        self.job.optimizer.zero_grad(set_to_none=True)

    def evaluate(self, batch: int = 1000) -> dict[str, float]:
        """Test loss and accuracy of the model with logical worker 0's buffers (the model DDP would save).

        Raises ValueError when the job has no test set or this replica does not hold logical worker 0.
        """
        if self.job is None or self.job.test_set is None:
            raise ValueError("the job defines no test_set")
        if 0 not in self.cursors:
            raise ValueError("evaluate on a replica without logical worker 0")
        model = self.job.model
        self.bank.activate(0)
        model.eval()
        total, correct, loss_sum = 0, 0, 0.0
        with torch.no_grad():
            for begin in range(0, len(self.job.test_set), batch):
                x, y = collate([self.job.test_set[i] for i in range(begin, min(begin + batch, len(self.job.test_set)))])
                x, y = x.to(self.device), y.to(self.device)
                out = model(x)
                loss_sum += float(self.job.loss(out, y)) * y.numel()  # the loss is a mean over targets
                correct += int((out.argmax(-1) == y).sum())
                total += y.numel()
        model.train()
        return {"test_loss": loss_sum / total, "test_accuracy": correct / total, "test_samples": total}

    # --- replica state ---------------------------------------------------------------------------------------

    def replica_state(self) -> bytes:
        """Parameters and every registered object's state (what a joining replica copies from rank 0)."""
        return self.registry.encode()

    def load_replica_state(self, state: bytes) -> None:
        """Make this replica's parameters and registered objects those of ``state`` (bit for bit)."""
        self.registry.decode(state)

    # --- identity --------------------------------------------------------------------------------------------

    def digest(self, buffers_of: int | None = 0, committed: bool = False) -> str:
        """sha256 over the parameters (model order) and, when held, logical worker ``buffers_of``'s buffers.

        This is the model DDP would save (rank 0's buffers); the ledger records it every step. With
        ``committed`` the buffers are those of the last boundary even while a step changes them (a
        checkpoint taken during a step).
        """
        return self._digest(buffers_of, committed, None)

    def digests(self, buffers_of: int = 0) -> tuple[str, list[list[str]]]:
        """:meth:`digest` and each tensor's: [name, first 8 bytes of the sha256 of its data in hex], in the
        digest's order (the native engine's per-tensor digests, which `easyscale verify` names)."""
        per: list[list[str]] = []
        return self._digest(buffers_of, False, per), per

    def _digest(self, buffers_of: int | None, committed: bool, per: list[list[str]] | None) -> str:
        h = hashlib.sha256()
        for name, p in self.model.named_parameters():
            _hash_tensor(h, name, p, per)
        if buffers_of is not None and buffers_of in self.cursors:
            snap = self._snap
            bufs = snap[0][buffers_of] if committed and snap is not None else self.bank.buffers(buffers_of)
            for name, t in bufs.items():
                _hash_tensor(h, name, t, per)
        return "sha256:" + h.hexdigest()

    def cursors_json(self) -> str:
        return json.dumps({str(lw): c.to_json() for lw, c in sorted(self.cursors.items())})


class StepRun:
    """One step's micro-batch loop on a replica: iterate it for the micro-batches, call :meth:`backward` on each.

    Iterating yields, for each logical worker of ``order`` (default: the held
    ones in increasing order), its next micro-batch with its context switched
    in: its buffers in the model, the global generators seeded from (seed,
    logical worker, step), and ``torch.manual_seed`` refused. After the
    loop, :meth:`result` holds the gradient for the reduction: with
    ``first_in_chain`` and the increasing order, autograd's accumulation
    into ``.grad`` (the left fold); otherwise one flat slot per logical
    worker, in logical-worker order.
    """

    def __init__(self, replica: Replica, step: int, first_in_chain: bool, order: list[int] | None = None) -> None:
        lws = replica.logical_workers()
        if not lws:
            raise ValueError("a step on a replica that holds no logical worker")
        self.order = list(order) if order is not None else lws
        if sorted(self.order) != lws:
            raise ValueError(f"order {self.order} is not a permutation of the logical workers held, {lws}")
        self.replica, self.step = replica, step
        self.accumulate = first_in_chain and self.order == lws
        self.first_in_chain = first_in_chain
        self.losses: dict[int, float] = {}
        self._indices: dict[int, list[int]] = {}
        self._samples: dict[int, str] | None = None
        self.slots: dict[int, torch.Tensor] = {}
        #: The logical worker whose micro-batch the loop holds (None outside the loop).
        self.current: int | None = None
        self._backward = False
        self._done = False

    def __iter__(self) -> Iterator[Any]:
        r, ab = self.replica, self.replica.ablation
        r._snap = (r.bank.snapshot(), dict(r.cursors))
        r.clear_grads()
        b, sampler, cursors = r.data.micro_batch, r.sampler, r.cursors
        # Everything of the step that needs no micro-batch to have run, for all its logical workers together
        # (sample indices, cursors, stream keys): done one micro-batch at a time, between forward and backward
        # passes, the same work took several times longer (cold caches).
        plan = []
        for lw in self.order:
            idx, cursors[lw] = sampler.next(cursors[lw], lw, b)
            plan.append((lw, idx))
        self._indices = dict(plan)
        keyed = [r.physical_rank if ab.key_rng_by_worker else lw for lw in self.order]
        keys = streams.worker_keys(r.config.seed, keyed, self.step)
        augment = streams.worker_keys(r.config.seed, keyed, self.step, streams.PURPOSE_AUGMENT) \
            if r.data.transform is not None else keys
        seed_globals, activate = streams.seed_globals_key, r.bank.activate
        with streams.GlobalSeedGuard():
            for (lw, idx), k, ka in zip(plan, keys, augment):
                activate(self.order[0] if ab.buffers_per_worker else lw)
                seed_globals(k)
                batch = r.data.collate(r._samples(idx, ka))
                self.current, self._backward = lw, False
                yield batch
                if not self._backward:
                    raise JobError(f"the micro-batch of logical worker {lw} at step {self.step} ended without "
                                   "backward: call batch.backward(loss) on each micro-batch")
                if not self.accumulate:
                    self.slots[lw] = r.take_grads(lw)
        self.current = None
        self._done = True

    @property
    def samples(self) -> dict[int, str]:
        """The sample hash (:func:`sample_hash`) of each logical worker's micro-batch of the step (the ledger's)."""
        if self._samples is None or len(self._samples) != len(self._indices):
            self._samples = {lw: sample_hash(idx) for lw, idx in self._indices.items()}
        return self._samples

    def backward(self, loss: torch.Tensor) -> None:
        """Record this micro-batch's loss (the ledger's; NaN and infinity are refused) and run its backward."""
        lw = self.current
        if lw is None:
            raise JobError("batch.backward(loss) outside the micro-batch loop: call it once per micro-batch")
        value = float(loss.detach())
        if not math.isfinite(value):
            raise NonFiniteLoss(f"logical worker {lw} at step {self.step}: loss is {value}")
        self.losses[lw] = self.losses.get(lw, 0.0) + value
        self._backward = True
        loss.backward()

    def result(self) -> StepResult:
        """The gradient for the reduction; see the class doc. Raises ValueError before the loop ended."""
        r = self.replica
        if not self._done:
            raise ValueError(f"step {self.step}: the micro-batch loop did not run to its end")
        lws = r.logical_workers()
        if self.accumulate:
            return StepResult(r.take_grads(lws[0]), [], self.losses, self.samples)
        slots = [self.slots[lw] for lw in lws]
        if r.ablation.grouped_reduction and len(slots) > 1:
            slots = [reduce.fold(None, slots)]
        if self.first_in_chain:  # the chain's start: the fold of this replica's logical workers
            return StepResult(reduce.fold(None, slots), [], self.losses, self.samples)
        return StepResult(torch.empty(r.numel, device=r.device), slots, self.losses, self.samples)


def _hash_tensor(h: "hashlib._Hash", name: str, t: torch.Tensor, per: list[list[str]] | None = None) -> None:
    t = t.detach().to("cpu").contiguous().reshape(-1)
    h.update(f"{name}\x00{t.dtype}\x00{t.numel()}\x00".encode())
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    data = t.view(torch.uint8).numpy()
    h.update(data)
    if per is not None:
        per.append([name, hashlib.sha256(data).hexdigest()[:16]])
