"""The loop-keeping API: a DDP training script keeps its loop, optimizer, scheduler, clipping and evaluation.

A DDP script already has the shape EasyScale needs: several micro-batches
(one per rank) reduced into one optimizer step. Here one process runs
several logical workers, so the step's micro-batch loop is written out:

    import easyscale.distributed as dist                       # was: import torch.distributed as dist
    from easyscale import DataLoader, DistributedSampler, DistributedDataParallel as DDP, register

    dist.init_process_group("gloo")                            # attaches to the runtime (no rendezvous)
    model = DDP(Net())                                         # registers the module
    sampler = DistributedSampler(train, shuffle=True, seed=1)  # DistributedSampler's order over the job's N
    loader = DataLoader(train, batch_size=32, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * len(loader))
    register(opt, sched)                                       # everything else with state the loop changes
    for epoch in range(loader.epoch, epochs):                  # loader.epoch: where a resumed job stands
        sampler.set_epoch(epoch)
        model.train()
        for batch in loader:                                   # one optimizer step
            opt.zero_grad(set_to_none=True)
            for x, y in batch:                                 # this process's logical workers' micro-batches
                batch.backward(F.cross_entropy(model(x), y))
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # .grad holds the reduced gradient
            opt.step()
            sched.step()                                       # where the loop steps it (per step here)

What the runtime does at each point:

- ``for x, y in batch``: for each logical worker this process holds, in
  increasing order, it swaps the worker's buffers (BatchNorm) into the model,
  seeds torch's, Python's and numpy's global generators from (seed, logical
  worker, step), reads the worker's next micro-batch from its cursor
  (``dataset[i]`` runs here, after the seeding, so augmentation drawing from
  the global generator is keyed too) and hands it to the loop;
  ``torch.manual_seed`` is refused inside the loop;
- ``batch.backward(loss)``: records the loss (the ledger's; NaN refused) and
  runs its backward;
- the end of the micro-batch loop: the gradients of all N logical workers are
  reduced in the canonical chain (left fold in logical-worker order,
  x float32(1/N)) and put into every parameter's ``.grad``, as after DDP's
  all-reduce: clipping, unscaling and gradient-norm logging after the loop see
  DDP's gradient; ``batch.loss`` is the mean loss over all N logical workers;
- the next ``for batch in loader`` (or the script's end): the step boundary.
  Everything the loop did since the reduction (optimizer, scheduler, counters,
  evaluation) belongs to the step; membership changes, checkpoints and
  SIGTERM's checkpoint take effect here. A step that ends an epoch ends at
  the first step of the next epoch, so epoch-end code (a per-epoch scheduler,
  evaluation) belongs to it.

Between steps the model holds the buffers of the lowest logical worker this
process runs: in the process of rank 0 (``dist.get_rank() == 0``), logical
worker 0's, the model DDP's rank 0 evaluates and saves. Resume restores every
registered object, the logical workers' buffers and cursors; the script
starts again from the top and its epoch loop starts at ``loader.epoch``. A
redone step (a worker lost during it) runs the micro-batch loop's body again:
keep the body to forward, loss and backward.

The job file gives ``steps`` (the loop's optimizer steps, epochs x
``len(loader)``), ``micro_batch`` (the DataLoader's batch_size) and
``logical_workers``; ``[torch] script`` names the script and ``args`` its
command line. Run outside ``easyscale run`` (``python3 script.py``) the loop
runs every logical worker in one process (EASYSCALE_LOGICAL_WORKERS, default
the sampler's num_replicas or 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import struct
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.utils.data import default_collate

from . import reduce
from .job import Config, JobError
from .replica import Data, Replica, StepRun, normal_device
from .state import Registry, StateError

__all__ = ["DataLoader", "DistributedSampler", "DistributedDataParallel", "Batch", "register", "config", "device",
           "Session", "Exit", "StepOrder", "Reduced", "LocalDriver", "session", "install"]


class Exit(BaseException):
    """The runtime stops this process (the job ended or stopped, or its Go worker is gone): raised out of the
    loop's next step request, so the script unwinds (``finally`` blocks run) without reaching its end."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


@dataclasses.dataclass(frozen=True)
class StepOrder:
    """A step to compute: its number, the order of the logical workers (None: increasing), and whether this
    process starts the chain (its fold is autograd's accumulation)."""

    step: int
    order: list[int] | None
    first_in_chain: bool


@dataclasses.dataclass(frozen=True)
class Reduced:
    """A step's reduced gradient (flat float32) and the mean loss over all N logical workers."""

    gradient: torch.Tensor
    loss: float


def mean_loss(losses: dict[int, float], world: int) -> float:
    """The step's loss as the ledger has it: the float32 losses summed in logical-worker order, / N."""
    return sum(struct.unpack("f", struct.pack("f", losses[lw]))[0] for lw in sorted(losses)) / world


class LocalDriver:
    """Runs every logical worker of the job in this process: steps from ``start`` on, a local fold.

    ``order`` is the order the logical workers run in each step (None:
    increasing); any order gives the same bits to a consistent job.
    ``replica`` (Registry.encode bytes) and ``contexts`` (logical worker ->
    {"cursor", "buffers"}) resume a job at ``start``; ``stop`` ends the
    program (Exit) when the loop asks for that step. Used outside
    ``easyscale run``, by the self-check and by tests.
    """

    def __init__(self, order: list[int] | None = None, start: int = 0, stop: int | None = None,
                 replica: bytes | None = None, contexts: dict[int, dict[str, Any]] | None = None,
                 check: int = 0) -> None:
        self.order, self.start, self.stop = order, start, stop
        self.replica, self.contexts = replica, contexts or {}
        #: Steps of the self-check before the first step (0: none) and its result once run.
        self.check, self.check_result = check, None

    def attach(self, s: Session) -> int:
        assert s.replica is not None
        if self.replica is not None:
            s.registry.decode(self.replica)
        for lw in range(s.config.logical_workers):
            if lw not in s.replica.cursors:
                s.replica.add(lw, self.contexts.get(lw))
        return self.start

    def next_step(self, s: Session) -> StepOrder:
        if self.stop is not None and s.next_step >= self.stop:
            raise Exit(0)
        if self.check and self.check_result is None:
            from .selfcheck import SelfCheck  # the check builds on this module

            def done(result: dict[str, Any]) -> None:
                self.check_result = result
            check = SelfCheck(s, s.next_step, self.check, None, self, done)
            first = check.begin()
            if first is not None:
                s.driver = check
                return first
        return StepOrder(s.next_step, self.order, True)

    def reduce(self, s: Session, run: StepRun) -> Reduced | StepOrder:
        res = run.result()
        return Reduced(reduce.scale(res.local, s.config.logical_workers), mean_loss(res.losses, s.config.logical_workers))

    def begin_commit(self, s: Session, batch: Batch) -> None:
        pass

    def finalize(self, s: Session, batch: Batch) -> None:
        pass


class Session:
    """This process's side of a training program: what the loop API's objects call into.

    One per process (:func:`session`): the Go worker installs one driven by
    its requests (``easyscale.worker``); without one, the first call makes a
    standalone session that runs every logical worker here (LocalDriver).
    """

    def __init__(self, config: Config, driver: Any, device: str = "cpu") -> None:
        self.config, self.driver, self.device = config, driver, device
        self.registry = Registry()
        self.loader: ElasticLoader | None = None
        self.replica: Replica | None = None
        #: The Job of a setup() module (Go's evaluate request uses its test set); None for scripts.
        self.job: Any = None
        self.attached = False
        #: The step the loop runs next (after attach).
        self.next_step = 0
        #: The step whose micro-batch loop or commit window is open (None at a boundary).
        self.batch: Batch | None = None
        #: The rank the process was started for, until its first assignment (dist.get_rank()).
        self.rank_hint = 0
        #: A standalone session whose N is not set yet: the first DistributedSampler's num_replicas sets it.
        self.standalone = False

    # --- registration ----------------------------------------------------------------------------------------

    def add(self, name: str | None, obj: Any) -> None:
        if self.attached:
            raise JobError(f"{type(obj).__name__} registered after the training loop started: register every "
                           "object with state before the first step")
        if isinstance(obj, DistributedDataParallel):
            obj = obj.module
        if self.registry.holds(obj):
            return
        if name is None:
            name = self._name(obj)
        try:
            self.registry.add(name, obj)
        except StateError as e:
            raise JobError(str(e)) from e

    def _name(self, obj: Any) -> str:
        if isinstance(obj, nn.Module):
            base = "model"
        elif isinstance(obj, torch.optim.Optimizer):
            base = "optimizer"
        elif hasattr(obj, "optimizer") and hasattr(obj, "last_epoch"):
            base = "lr_scheduler"
        elif isinstance(obj, dict):
            base = "state"
        else:
            base = type(obj).__name__.lower() or "object"
        name, i = base, 1
        while name in self.registry.objects:
            i += 1
            name = f"{base}{i}"
        return name

    def set_loader(self, loader: ElasticLoader) -> None:
        if self.loader is not None and self.loader is not loader:
            raise JobError("a second easyscale.DataLoader with an easyscale.DistributedSampler: a job trains on "
                           "one; use torch's DataLoader (no sampler) for evaluation")
        self.loader = loader

    # --- attach ----------------------------------------------------------------------------------------------

    def attach(self) -> None:
        """Hand the registered program to the runtime: done once, at the loop's first need of its position."""
        if self.attached:
            return
        self._check_registered()
        assert self.loader is not None
        ld = self.loader
        data = Data(ld.dataset, ld.batch_size, ld.sampler.seed, ld.sampler.shuffle, ld.collate_fn, ld.transform)
        self.replica = Replica(None, self.config, [], self.device, registry=self.registry, data=data)
        self.replica.job = self.job
        try:
            self.registry.round_trip()
        except StateError as e:
            raise JobError(f"registered state cannot be checkpointed: {e}") from e
        self.attached = True
        self.next_step = self.driver.attach(self)
        self.replica.show()

    def _check_registered(self) -> None:
        if self.loader is None:
            raise JobError("the training loop has no easyscale.DataLoader built with an easyscale.DistributedSampler")
        modules = self.registry.modules()
        if not modules:
            raise JobError("no model is registered: wrap it in easyscale.DistributedDataParallel or pass it to "
                           "easyscale.register")
        opts = self.registry.optimizers()
        if not opts:
            raise JobError("no optimizer is registered: pass it to easyscale.register, so resume restores it")
        owned = {id(p) for m in modules.values() for p in m.parameters()}
        for name, opt in opts.items():
            for group in opt.param_groups:
                if any(id(p) not in owned for p in group["params"]):
                    raise JobError(f"{name} holds a parameter of no registered model: register that model too")
        for obj in gc.get_referrers(*opts.values()):
            if hasattr(obj, "optimizer") and hasattr(obj, "last_epoch") and not self.registry.holds(obj) \
                    and any(obj.optimizer is o for o in opts.values()):
                raise JobError(f"a {type(obj).__name__} steps a registered optimizer but is not registered: pass "
                               "it to easyscale.register, so resume restores its position")
        if self.config.micro_batch and self.loader.batch_size != self.config.micro_batch:
            raise JobError(f"the DataLoader's batch_size is {self.loader.batch_size}, the job file's micro_batch "
                           f"{self.config.micro_batch}: make them equal")
        n = self.loader.sampler.num_replicas
        if n is not None and n != self.config.logical_workers:
            raise JobError(f"DistributedSampler(num_replicas={n}), the job's logical_workers "
                           f"{self.config.logical_workers}: leave num_replicas out")

    # --- steps -----------------------------------------------------------------------------------------------

    def require_boundary(self) -> None:
        b = self.batch
        if b is not None and not b.reduced:
            raise JobError(f"the micro-batch loop of step {b.step} was left before its end: iterate every "
                           "micro-batch of a batch")

    def boundary(self) -> None:
        """Close the open step: everything the loop did since its reduction is part of it."""
        b = self.batch
        if b is not None:
            self.require_boundary()
            self.driver.finalize(self, b)
            self.batch = None

    def next_batch(self, epoch: int) -> Batch:
        self.require_boundary()
        if self.config.steps and self.next_step >= self.config.steps:
            raise JobError(f"the training loop asks for step {self.next_step + 1}, past the job's "
                           f"{self.config.steps} steps: set the job file's steps to the optimizer steps the loop "
                           "takes (epochs x len(loader))")
        self.boundary()
        order = self.driver.next_step(self)
        self.batch = Batch(self, order, epoch)
        self.next_step = order.step + 1
        return self.batch

    def end(self) -> None:
        """The program returned: its last step ends here."""
        if self.attached:
            self.boundary()


class Batch:
    """One optimizer step of this process: iterate it for the micro-batches of its logical workers.

    ``step`` is the step's number (from 0, over the whole job), ``epoch`` its
    epoch. After the micro-batch loop every parameter's ``.grad`` holds the
    reduced gradient and ``loss`` the mean loss over all N logical workers
    (the same in every process).
    """

    def __init__(self, session: Session, order: StepOrder, epoch: int) -> None:
        self.session, self.order, self.step, self.epoch = session, order, order.step, epoch
        self.loss: float | None = None
        self.reduced = False
        self.run: StepRun | None = None
        self._iterated = False

    def __iter__(self) -> Iterator[Any]:
        if self._iterated:
            raise JobError(f"the micro-batches of step {self.step} are iterated once")
        self._iterated = True
        s = self.session
        assert s.replica is not None
        order = self.order
        while True:
            self.run = StepRun(s.replica, order.step, order.first_in_chain, order.order)
            yield from self.run
            out = s.driver.reduce(s, self.run)
            if isinstance(out, StepOrder):  # aborted (a worker was lost): redo the step, maybe on other workers
                if out.step != self.step:
                    raise JobError(f"step {self.step} was aborted and step {out.step} asked for")
                order = out
                continue
            s.replica.set_grads(out.gradient)
            s.replica.show()
            self.loss, self.reduced = out.loss, True
            s.driver.begin_commit(s, self)
            return

    def backward(self, loss: torch.Tensor) -> None:
        """Run ``loss.backward()`` for this micro-batch and record the loss (the ledger's; NaN is refused)."""
        if self.run is None:
            raise JobError("batch.backward(loss) outside the micro-batch loop")
        self.run.backward(loss)

    @property
    def logical_workers(self) -> list[int]:
        """The logical workers whose micro-batches this process runs in this step, in order."""
        assert self.session.replica is not None
        return self.order.order or self.session.replica.logical_workers()

    def __len__(self) -> int:
        return len(self.logical_workers)


# --- drop-ins for torch.utils.data and torch.nn.parallel ---------------------------------------------------------


class DistributedSampler:
    """torch.utils.data.DistributedSampler's order over the job's N logical workers (not over processes).

    Each logical worker reads its shard of epoch e's permutation (``randperm``
    from ``seed + e``, padded to a multiple of N), as DDP's rank would; a
    cursor per logical worker moves with it between processes. ``rank`` is
    ignored and ``num_replicas``, when given, must equal the job's
    logical_workers. ``set_epoch(e)`` is checked against the job's position.
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if drop_last:
            raise JobError("DistributedSampler(drop_last=True) is not supported: the padded order "
                           "(drop_last=False) is the one every logical worker reads")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.epoch = 0
        self._epoch_set = False
        _standalone_world(self)

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self._epoch_set = int(epoch), True

    def __len__(self) -> int:
        n = self.num_replicas or session().config.logical_workers
        return math.ceil(len(self.dataset) / n)

    def __iter__(self) -> Iterator[int]:
        raise TypeError("an easyscale.DistributedSampler is read by the easyscale.DataLoader it is given to, "
                        "one shard per logical worker")


class DataLoader:
    """torch.utils.data.DataLoader, elastic when given an easyscale.DistributedSampler.

    With such a sampler, iterating it gives one :class:`Batch` per optimizer
    step of the current epoch (``len(loader)`` of them), each holding this
    process's logical workers' micro-batches of ``batch_size`` samples.
    ``drop_last=True`` is required; ``num_workers`` and ``pin_memory`` are
    ignored (samples are read in this process, after the logical worker's
    generators are seeded). ``transform(input, generator)`` is the Job API's
    per-sample augmentation (one generator per micro-batch, seeded from the job's
    seed, the logical worker and the step, drawn by its samples in order). Without such a sampler it *is* torch's
    DataLoader (evaluation loaders keep working unchanged).
    """

    def __new__(cls, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None, sampler: Any = None,
                *args: Any, **kwargs: Any) -> Any:
        if not isinstance(sampler, DistributedSampler):
            kwargs.pop("transform", None)
            return torch.utils.data.DataLoader(dataset, batch_size, shuffle, sampler, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None, sampler: Any = None,
                 batch_sampler: Any = None, num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, *args: Any,
                 transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None,
                 **kwargs: Any) -> None:
        if shuffle:
            raise JobError("DataLoader(shuffle=True) with a sampler: shuffle in the DistributedSampler")
        if batch_sampler is not None or not batch_size or batch_size < 1:
            raise JobError("the elastic DataLoader needs batch_size >= 1 and no batch_sampler")
        if not drop_last:
            raise JobError("the elastic DataLoader needs drop_last=True: every logical worker takes full "
                           "micro-batches (the last partial one of each epoch is dropped, in every logical worker)")
        if sampler.dataset is not dataset:
            raise JobError("the DistributedSampler was built on another data set than the DataLoader's")
        if isinstance(dataset, torch.utils.data.DataLoader):
            raise JobError("the data set is a DataLoader: give its dataset")
        try:
            if len(dataset) < 1:
                raise JobError("the training data set is empty")
        except TypeError as e:
            raise JobError("the training data set has no len(): give an indexable data set") from e
        self.dataset, self.batch_size, self.sampler = dataset, int(batch_size), sampler
        self.collate_fn = collate_fn or default_collate
        self.transform = transform
        self.drop_last = True
        session().set_loader(self)

    @property
    def epoch(self) -> int:
        """The epoch of the next step: 0 at the start, where the job stands when it resumed."""
        s = session()
        s.attach()
        assert s.replica is not None
        return s.replica.epoch()

    @property
    def step(self) -> int:
        """The number of the next step (from 0, over the whole job)."""
        s = session()
        s.attach()
        return s.next_step

    def __len__(self) -> int:
        """Steps per epoch: each logical worker's shard, ceil(len(dataset) / N), in full micro-batches."""
        return math.ceil(len(self.dataset) / session().config.logical_workers) // self.batch_size

    def __iter__(self) -> Iterator[Batch]:
        s = session()
        s.attach()
        assert s.replica is not None
        now = s.replica.epoch()
        epoch = self.sampler.epoch if self.sampler._epoch_set else now
        if epoch < now:
            raise JobError(f"iterating epoch {epoch}, but the job is in epoch {now}"
                           f"{' (it resumed there)' if s.next_step else ''}: start the epoch loop at loader.epoch")
        if epoch > now:
            raise JobError(f"sampler.set_epoch({epoch}), but the job is in epoch {now}: epochs run in order")
        self.sampler._epoch_set = False
        return self._steps(s, epoch)

    def _steps(self, s: Session, epoch: int) -> Iterator[Batch]:
        assert s.replica is not None
        while s.replica.epoch() == epoch:
            yield s.next_batch(epoch)


class DistributedDataParallel(nn.Module):
    """torch.nn.parallel.DistributedDataParallel's interface without its collectives: registers ``module``.

    ``model.module``, ``state_dict()`` (keys ``module.``...) and ``no_sync()``
    behave as DDP's; the gradient is reduced by the runtime at the end of each
    step's micro-batch loop. Other keywords are accepted and ignored.
    """

    def __init__(self, module: nn.Module, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.module = module
        session().add(None, module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        yield


def register(*objects: Any, **named: Any) -> None:
    """Register everything with state the training loop changes, once, before the loop.

    Models (``nn.Module``; a DistributedDataParallel registered its own),
    optimizers, LR schedulers, a GradScaler, any object with
    ``state_dict``/``load_state_dict``, and dicts of the loop's own counters
    (restored in place). Positional objects are named by kind ("model",
    "optimizer", "lr_scheduler", "state", a second one "optimizer2"); keywords
    name them. Every process must register the same objects in the same
    order. Joiners copy them and resume restores them.
    """
    s = session()
    for obj in objects:
        s.add(None, obj)
    for name, obj in named.items():
        s.add(name, obj)


def config() -> Config:
    """The job's values (seed, logical workers, micro-batch, steps, [torch.params])."""
    return session().config


def device() -> torch.device:
    """The device of this process's logical workers: the job file's ``[torch] device`` ("cpu", or "cuda": the
    one GPU this process was given). The script moves its model there before wrapping it and its micro-batches
    before the forward, as a DDP script does with its local rank's GPU; the reduced gradient lands there. It reads
    as a tensor's ``.device`` does (cuda:0, the process's GPU under its CUDA_VISIBLE_DEVICES)."""
    return normal_device(session().device)


# --- the process's session -------------------------------------------------------------------------------------

_session: Session | None = None


def install(s: Session | None) -> None:
    """Make ``s`` this process's session (the Go worker does, before it runs the program)."""
    global _session
    _session = s


def session() -> Session:
    """This process's session; outside ``easyscale run`` a standalone one (every logical worker here)."""
    global _session
    if _session is None:
        n = int(os.environ.get("EASYSCALE_LOGICAL_WORKERS", "0") or 0)
        s = Session(Config(seed=int(os.environ.get("EASYSCALE_SEED", "0")), logical_workers=max(n, 1),
                           micro_batch=0, steps=0), LocalDriver())
        s.standalone = n == 0
        _session = s
    return _session


def _standalone_world(sampler: DistributedSampler) -> None:
    s = session()
    if s.standalone and sampler.num_replicas:
        s.config = dataclasses.replace(s.config, logical_workers=int(sampler.num_replicas))
        s.standalone = False
