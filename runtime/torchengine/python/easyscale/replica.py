"""One physical worker's model replica and the logical workers it runs.

A step on a replica that holds logical workers L (a contiguous range):

1. for each logical worker l in L, in increasing order: swap l's buffers in,
   seed the global generators from (seed, l, step), take l's next micro-batch
   from its cursor, forward, loss (the micro-batch mean), backward;
2. the gradients are folded in logical-worker order: on the replica that holds
   logical worker 0 autograd's accumulation into ``.grad`` is that fold, the
   others keep one flat slot per logical worker for the chain
   (:mod:`easyscale.reduce`);
3. with the reduced gradient G every replica applies the identical optimizer
   (and LR scheduler) step, as DDP does.

Nothing of a logical worker's context is lost if a step is aborted: buffers and
cursors are snapshotted before step 1 and put back by :meth:`Replica.abort`;
parameters and optimizer state change only in :meth:`Replica.apply`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import struct
from typing import Any

import torch

from . import reduce, streams
from .context import BufferBank
from .job import Config, Job, JobError, collate
from .sampler import Cursor, LogicalSampler

__all__ = ["Replica", "StepResult", "NonFiniteLoss", "Ablation"]


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


class NonFiniteLoss(ArithmeticError):
    """A logical worker's loss is NaN or infinite; the message names the logical worker and step."""


class StepResult:
    """What :meth:`Replica.compute` returns: the flat gradient, the chain slots and the losses."""

    def __init__(self, local: torch.Tensor, slots: list[torch.Tensor], losses: dict[int, float],
                 samples: dict[int, str]) -> None:
        self.local, self.slots, self.losses, self.samples = local, slots, losses, samples


def sample_hash(indices: list[int]) -> str:
    """Hex of the first 8 bytes of sha256 over the indices as little-endian uint32 (the native ledger's)."""
    return hashlib.sha256(struct.pack(f"<{len(indices)}I", *indices)).hexdigest()[:16]


class Replica:
    """A replica of ``job`` holding ``logical_workers`` (contiguous, increasing) for ``config``."""

    def __init__(self, job: Job, config: Config, logical_workers: list[int], device: str = "cpu",
                 ablation: Ablation = Ablation()) -> None:
        job.check()
        self.ablation = ablation
        #: This replica's rank among the physical workers (set by the group); only ablations read it.
        self.physical_rank = 0
        self.job, self.config = job, config
        self.device = torch.device(device)
        job.model.to(self.device)
        self.params = [(n, p) for n, p in job.model.named_parameters() if p.requires_grad]
        self.numel = sum(p.numel() for _, p in self.params)
        self.sampler = LogicalSampler(len(job.train_set), config.logical_workers, config.seed)
        self.bank = BufferBank(job.model, [])
        self._gen = torch.Generator()
        self.cursors: dict[int, Cursor] = {}
        for lw in logical_workers:
            self.add(lw)
        self._snap: tuple[dict[int, dict[str, torch.Tensor]], dict[int, Cursor]] | None = None

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

    # --- one step --------------------------------------------------------------------------------------------

    def compute(self, step: int, first_in_chain: bool) -> StepResult:
        """Run every held logical worker's micro-batch of ``step``; see the module doc.

        ``first_in_chain`` says this replica holds the lowest logical workers of
        the step (its fold starts the chain). Raises NonFiniteLoss, or JobError
        when a parameter gets no gradient or user code re-seeds torch.
        """
        lws = self.logical_workers()
        if not lws:
            raise ValueError("compute on a replica that holds no logical worker")
        self._snap = (self.bank.snapshot(), dict(self.cursors))
        model, b = self.job.model, self.config.micro_batch
        model.train()
        slots: list[torch.Tensor] = []
        losses: dict[int, float] = {}
        samples: dict[int, str] = {}
        with streams.GlobalSeedGuard():
            for lw in lws:
                self.bank.activate(lws[0] if self.ablation.buffers_per_worker else lw)
                streams.seed_globals(self.config.seed, self.physical_rank if self.ablation.key_rng_by_worker else lw,
                                     step)
                epoch = self.sampler.batch_epoch(self.cursors[lw], b)
                idx, self.cursors[lw] = self.sampler.next(self.cursors[lw], lw, b)
                samples[lw] = sample_hash(idx)
                x, y = collate([self._sample(i, epoch) for i in idx])
                loss = self.job.loss(model(x.to(self.device)), y.to(self.device))
                value = float(loss.detach())
                if not math.isfinite(value):
                    raise NonFiniteLoss(f"logical worker {lw} at step {step}: loss is {value}")
                losses[lw] = value
                loss.backward()
                if not first_in_chain:
                    slots.append(self._take_grads(lw))
        local = self._take_grads(lws[0]) if first_in_chain else torch.empty(self.numel, device=self.device)
        if self.ablation.grouped_reduction and len(slots) > 1:
            slots = [reduce.fold(None, slots)]
        return StepResult(local, slots, losses, samples)

    def _sample(self, index: int, epoch: int) -> tuple[torch.Tensor, Any]:
        x, y = self.job.train_set[index]
        if self.job.transform is not None:
            # One generator, re-seeded per sample: the same stream as a new one (streams.sample_generator)
            # for a quarter of the cost. The transform must not keep it past the call.
            self._gen.manual_seed(streams.key(self.config.seed, epoch, index, streams.PURPOSE_AUGMENT))
            x = self.job.transform(x, self._gen)
        return x, y

    def _take_grads(self, lw: int) -> torch.Tensor:
        """Flatten the parameters' gradients into one float32 vector and clear them (set to None)."""
        flat = torch.empty(self.numel, device=self.device)
        at = 0
        for name, p in self.params:
            if p.grad is None:
                raise JobError(f"parameter {name} received no gradient in logical worker {lw}'s micro-batch: "
                               "every trainable parameter must take part in the loss (or set requires_grad=False)")
            flat[at:at + p.numel()].copy_(p.grad.reshape(-1))
            at += p.numel()
            p.grad = None
        return flat

    def abort(self) -> None:
        """Undo the buffers and cursors of the step in progress (parameters were not changed)."""
        if self._snap is not None:
            bufs, cursors = self._snap
            self.bank.restore(bufs)
            self.cursors = dict(cursors)
            self._snap = None
        for _, p in self.params:
            p.grad = None

    def apply(self, reduced: torch.Tensor) -> None:
        """Apply the reduced flat gradient: optimizer step, LR scheduler step, gradients cleared."""
        at = 0
        for _, p in self.params:  # views of the reduced buffer: the optimizer reads them, nothing writes them
            p.grad = reduced[at:at + p.numel()].view_as(p)
            at += p.numel()
        self.job.optimizer.step()
        if self.job.lr_scheduler is not None:
            self.job.lr_scheduler.step()
        self.job.optimizer.zero_grad(set_to_none=True)
        self._snap = None

    def evaluate(self, batch: int = 1000) -> dict[str, float]:
        """Test loss and accuracy of the model with logical worker 0's buffers (the model DDP would save).

        Raises ValueError when the job has no test set or this replica does not hold logical worker 0.
        """
        if self.job.test_set is None:
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

    def replica_state(self) -> dict[str, Any]:
        """Parameters, optimizer and LR-scheduler state (what a joining replica copies from rank 0)."""
        return {"model": {n: p.detach().clone() for n, p in self.job.model.named_parameters()},
                "optimizer": self.job.optimizer.state_dict(),
                "lr_scheduler": self.job.lr_scheduler.state_dict() if self.job.lr_scheduler is not None else None}

    def load_replica_state(self, state: dict[str, Any]) -> None:
        """Make this replica's parameters, optimizer and scheduler those of ``state`` (bit for bit).

        Nothing of ``state`` is kept: the replica gets copies, so a state taken from another replica in the
        same process (:meth:`replica_state` returns its optimizer's own tensors) stays that replica's alone.
        torch 2.x's ``Optimizer.load_state_dict`` keeps the tensors it is given when their dtype and device
        match the parameters' (torch 1.13 deep-copied the state dict first); without the copy both replicas
        would share one momentum buffer and each optimizer step would update it twice.
        """
        with torch.no_grad():
            for n, p in self.job.model.named_parameters():
                p.copy_(state["model"][n])
        self.job.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        if self.job.lr_scheduler is not None and state["lr_scheduler"] is not None:
            self.job.lr_scheduler.load_state_dict(copy.deepcopy(state["lr_scheduler"]))

    # --- identity --------------------------------------------------------------------------------------------

    def digest(self, buffers_of: int | None = 0) -> str:
        """sha256 over the parameters (model order) and, when held, logical worker ``buffers_of``'s buffers.

        This is the model DDP would save (rank 0's buffers); the ledger records it every step.
        """
        h = hashlib.sha256()
        for name, p in self.job.model.named_parameters():
            _hash_tensor(h, name, p)
        if buffers_of is not None and buffers_of in self.cursors:
            for name, t in self.bank.buffers(buffers_of).items():
                _hash_tensor(h, name, t)
        return "sha256:" + h.hexdigest()

    def cursors_json(self) -> str:
        return json.dumps({str(lw): c.to_json() for lw, c in sorted(self.cursors.items())})


def _hash_tensor(h: "hashlib._Hash", name: str, t: torch.Tensor) -> None:
    t = t.detach().to("cpu").contiguous().reshape(-1)
    h.update(f"{name}\x00{t.dtype}\x00{t.numel()}\x00".encode())
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    h.update(t.view(torch.uint8).numpy().tobytes())
