"""The Job API: a module's ``setup(config) -> Job`` gives the model, its optimizer and its data.

A user's training module defines one function, ``setup(config) -> Job``:

    import easyscale, torch
    from torch import nn

    def setup(config: easyscale.Config) -> easyscale.Job:
        model = Net()                                   # built from config.seed: every process builds the same
        opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9, nesterov=True)
        return easyscale.Job(model=model, optimizer=opt, train_set=train, loss=nn.functional.cross_entropy,
                             transform=augment, test_set=test)

:func:`run` trains it with the loop API (:mod:`easyscale.loop`): the Job
API is that loop written by the runtime, so the two share one engine.
Compared with a plain PyTorch script, the training loop, the DataLoader, the
DistributedSampler, ``set_epoch``, DDP and ``manual_seed`` calls go away: the
runtime runs them for N logical workers. ``transform(sample, generator)`` draws
only from ``generator`` (seeded once per micro-batch from seed, logical worker
and step, and drawn by the micro-batch's samples in order); the model may
use stock ``nn.Dropout`` (the global generator is keyed per logical worker and
step before each micro-batch). The LR scheduler is stepped every step; a job
that clips, steps a scheduler per epoch or does anything else between
backward and the optimizer step keeps its own loop (the loop API).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable, Sequence

import torch
from torch import nn

__all__ = ["Config", "Job", "JobError", "load_module"]


@dataclasses.dataclass(frozen=True)
class Config:
    """The job file's values a module may read: seed, logical workers, micro-batch, horizon, [torch] table."""

    seed: int
    logical_workers: int
    micro_batch: int
    steps: int
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Job:
    """A training job as the runtime needs it.

    train_set: indexable, ``len()``-able; ``train_set[i]`` returns (input tensor, target).
    loss: ``loss(output, target) -> scalar tensor``, the micro-batch mean as in plain PyTorch.
    transform: optional ``transform(input, generator) -> input`` applied per sample, once the micro-batch's
        samples are read; it draws only from ``generator`` (seeded once per micro-batch from seed, logical
        worker and step, then drawn by the micro-batch's samples in order) and does not keep it after the call.
    lr_scheduler: optional, stepped once per step after the optimizer.
    test_set: optional, evaluated with logical worker 0's buffers (the model DDP would save).
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    train_set: Any
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    lr_scheduler: Any = None
    test_set: Any = None

    def check(self) -> None:
        """Raise JobError naming the field when the job cannot be run consistently."""
        if not isinstance(self.model, nn.Module):
            raise JobError(f"Job.model is a {type(self.model).__name__}, want a torch.nn.Module")
        if not isinstance(self.optimizer, torch.optim.Optimizer):
            raise JobError(f"Job.optimizer is a {type(self.optimizer).__name__}, want a torch.optim.Optimizer")
        try:
            n = len(self.train_set)
        except TypeError as e:
            raise JobError("Job.train_set has no len(): give an indexable data set, not a DataLoader") from e
        if n < 1:
            raise JobError("Job.train_set is empty")
        if isinstance(self.train_set, torch.utils.data.DataLoader):
            raise JobError("Job.train_set is a DataLoader: give its dataset; the runtime batches per logical "
                           "worker, and DataLoader worker processes would draw from the global generator")
        owned = {id(p) for p in self.model.parameters()}
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if id(p) not in owned:
                    raise JobError("Job.optimizer holds a parameter that is not one of Job.model's")
        if self.transform is not None and len(inspect.signature(self.transform).parameters) < 2:
            raise JobError("Job.transform must take (input, generator) and draw only from the generator, "
                           "so augmentation does not depend on the placement")


class JobError(ValueError):
    """A user module or Job that cannot be run; the message names the cause and the fix."""


def load_module(path: str) -> Callable[[Config], Job]:
    """Import the user's module from ``path`` and return its ``setup`` function.

    Raises JobError for a missing file, an import that raises (with its
    message), or a module without ``setup``.
    """
    if not os.path.isfile(path):
        raise JobError(f"torch module {path}: no such file (the job file's torch.module, relative to the job file)")
    name = "easyscale_user_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise JobError(f"torch module {path}: not a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise JobError(f"torch module {path}: importing it raised {type(e).__name__}: {e}") from e
    setup = getattr(mod, "setup", None)
    if not callable(setup):
        raise JobError(f"torch module {path}: defines no setup(config) -> easyscale.Job")
    return setup


def collate(samples: Sequence[tuple[torch.Tensor, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack (input, target) samples into a micro-batch, as DataLoader's default collate does."""
    xs = torch.stack([s[0] for s in samples])
    ys = torch.as_tensor([s[1] for s in samples]) if not isinstance(samples[0][1], torch.Tensor) \
        else torch.stack([s[1] for s in samples])
    return xs, ys


def run(job: Job, config: Config) -> None:
    """Train ``job`` with the loop API: the Job API is this loop, one documented relation between the two.

    The module's ``setup(config) -> Job`` gives the pieces; this is the loop a
    script would write with them: the model, optimizer and LR scheduler
    registered, DistributedSampler's order keyed by the job's seed, the
    Job's transform per sample, and per step the micro-batches' forward,
    loss and backward, then ``optimizer.step()``, ``lr_scheduler.step()``
    (every step) and ``zero_grad``, until the job's steps. Go's evaluation
    request uses the Job's test set.
    """
    from . import loop  # loop builds on this module's Config and JobError

    job.check()
    s = loop.session()
    s.job = job
    device = torch.device(s.device)
    job.model.to(device)
    named: dict[str, Any] = {"model": job.model, "optimizer": job.optimizer}
    if job.lr_scheduler is not None:
        named["lr_scheduler"] = job.lr_scheduler
    loop.register(**named)
    sampler = loop.DistributedSampler(job.train_set, seed=config.seed)
    loader = loop.DataLoader(job.train_set, batch_size=config.micro_batch, sampler=sampler, drop_last=True,
                             collate_fn=collate, transform=job.transform)
    while loader.step < config.steps:
        for batch in loader:
            job.model.train()
            for x, y in batch:
                batch.backward(job.loss(job.model(x.to(device)), y.to(device)))
            job.optimizer.step()
            if job.lr_scheduler is not None:
                job.lr_scheduler.step()
            job.optimizer.zero_grad(set_to_none=True)
            if loader.step >= config.steps:
                break
