"""Benchmarks of the torch engine; prints `name value unit` lines (run by `make bench`, tests/bench/torch.go).

    python3 torch_bench.py EXAMPLES_DIR MNIST_DIR OPTICKS_PATH [REPEATS]

torch_est_overhead_pct_{ddp,lenet,charlm}: one step of a training program run
through the loop API (easyscale.loop) with every logical worker on this process
(LocalDriver: buffer swaps, per-worker seeding, the sampler's cursors, the
autograd fold, the reduction into .grad, the step boundary) against plain
gradient accumulation of the *same* micro-batches through the *same* data path
(the same data set, the same sample indices, the same collate and augmentation)
on a twin of the same model, optimizer and scheduler:

  ddp     examples/torch-ddp/easyscale_mnist.py, the DDP script ported to the
          loop API, 8 logical workers x 32 (LeNet with BatchNorm and dropout,
          batch-wise augmentation, clipping, SGD, OneCycleLR per step);
  lenet   examples/torch-mnist/model.py's Job trained by easyscale.job.run
          (the Job API's loop, written with the loop API), 8 x 32;
  charlm  examples/torch-charlm/model.py's Job the same way, 4 x 8.

The arms alternate step by step (a plain step at every step boundary of the
loop), and the figure compares the minimum of each over the repeats. Time is the process's
CPU time (time.process_time) on the CPU: on this shared 2-core machine a
wall-clock step includes whatever time the process spent descheduled, so
under heavy load wall-clock minima of a few repeats differ by tens of percent
for identical work (the -25 % once seen for charlm; BENCHMARKS.md). Both
arms run one intra-op thread, so CPU time is the work done. On CUDA the
clock is the wall clock after torch.cuda.synchronize().

torch_est_overhead_pct is the largest of the three. Goal <= 2 (issues 9 and 18).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import runpy
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import default_collate

import easyscale
from easyscale import job as jobmod
from easyscale import loop
from easyscale.job import collate, load_module
from easyscale.loop import LocalDriver
from easyscale.sampler import Cursor, LogicalSampler


def _clock(device: torch.device) -> Callable[[], tuple[float, float]]:
    """(work time, wall time) now: CPU time of the process on the CPU, the synchronized wall clock on CUDA."""
    if device.type == "cuda":
        def wall() -> tuple[float, float]:
            torch.cuda.synchronize(device)
            t = time.perf_counter()
            return t, t
        return wall
    return lambda: (time.process_time(), time.perf_counter())


class Plain:
    """Plain gradient accumulation of given micro-batches on one replica of ``job``."""

    def __init__(self, job: easyscale.Job, n: int, device: torch.device) -> None:
        self.job, self.n, self.device = job, n, device
        job.model.to(device)
        self.g = torch.Generator().manual_seed(12345)  # a plain script's augmentation stream

    def step(self, batches: list[list[int]]) -> None:
        job = self.job
        job.model.train()
        for idx in batches:
            samples = [job.train_set[i] for i in idx]
            if job.transform is not None:
                samples = [(job.transform(x, self.g), y) for x, y in samples]
            x, y = collate(samples)
            job.loss(job.model(x.to(self.device)), y.to(self.device)).backward()
        for p in job.model.parameters():
            if p.grad is not None:
                p.grad.mul_(1.0 / self.n)
        job.optimizer.step()
        if job.lr_scheduler is not None:
            job.lr_scheduler.step()
        job.optimizer.zero_grad(set_to_none=True)


def step_batches(sampler: LogicalSampler, cursors: list[Cursor], b: int) -> list[list[int]]:
    """The sample indices every logical worker reads in the next step (advances ``cursors``)."""
    out = []
    for lw in range(len(cursors)):
        idx, cursors[lw] = sampler.next(cursors[lw], lw, b)
        out.append(idx)
    return out


class Result:
    """Minimum step times (s) of both arms, by the work clock and by the wall clock."""

    def __init__(self) -> None:
        self.plain = self.est = self.plain_wall = self.est_wall = float("inf")

    def add(self, plain: tuple[float, float], est: tuple[float, float]) -> None:
        self.plain, self.est = min(self.plain, plain[0]), min(self.est, est[0])
        self.plain_wall, self.est_wall = min(self.plain_wall, plain[1]), min(self.est_wall, est[1])

    def overhead_pct(self) -> float:
        return 100 * (self.est / self.plain - 1)

    def overhead_wall_pct(self) -> float:
        return 100 * (self.est_wall / self.plain_wall - 1)


class Interleaved(LocalDriver):
    """Drives a training program through the loop API with every logical worker in this process, timing each
    step (from one step boundary to the next) and running one step of the plain arm at every boundary.

    The plain arm's steps and the loop's alternate: plain, loop, plain, loop, ... after ``warmup`` of each.
    """

    def __init__(self, plain: Callable[[int], tuple[float, float]], clock: Callable[[], tuple[float, float]],
                 warmup: int, repeats: int) -> None:
        super().__init__()
        self.plain, self.clock, self.warmup, self.repeats = plain, clock, warmup, repeats
        self.result = Result()
        self._t: tuple[float, float] | None = None
        self._plain: tuple[float, float] | None = None

    def next_step(self, s: loop.Session) -> loop.StepOrder:
        now = self.clock()
        step = s.next_step
        if self._t is not None and step - 1 >= self.warmup:
            assert self._plain is not None
            self.result.add(self._plain, (now[0] - self._t[0], now[1] - self._t[1]))
        if step >= self.warmup + self.repeats:
            raise loop.Exit(0)
        gc.collect()
        self._plain = self.plain(step)
        self._t = self.clock()
        return super().next_step(s)


def run_program(program: Callable[[], None], cfg: easyscale.Config, driver: Interleaved, device: str) -> Result:
    """Run ``program`` (a script's main or the Job API's loop) under a session driven by ``driver``."""
    loop.install(loop.Session(cfg, driver, device))
    gc.disable()
    try:
        program()
    except loop.Exit:
        pass
    finally:
        gc.enable()
        loop.install(None)
    return driver.result


def measure_job(setup: Callable[[easyscale.Config], easyscale.Job], n: int, b: int, params: dict[str, object],
                repeats: int, device: str = "cpu", warmup: int = 2) -> Result:
    """The Job API's loop (easyscale.job.run, written with the loop API) on ``setup``'s job against Plain on a
    twin of it."""
    dev = torch.device(device)
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=1000, params=params)
    plain = Plain(setup(cfg), n, dev)
    sampler = LogicalSampler(len(plain.job.train_set), n, cfg.seed)  # the loop's own order, for plain
    cursors = [Cursor() for _ in range(n)]
    clock = _clock(dev)

    def run_plain(step: int) -> tuple[float, float]:
        batches = step_batches(sampler, cursors, b)  # index lists, as a DataLoader's sampler hands them out
        t0 = clock()
        plain.step(batches)
        t1 = clock()
        return t1[0] - t0[0], t1[1] - t0[1]

    job = setup(cfg)
    return run_program(lambda: jobmod.run(job, cfg), cfg, Interleaved(run_plain, clock, warmup, repeats), device)


def measure_script(script: str, n: int, b: int, data_dir: str, repeats: int, warmup: int = 2) -> Result:
    """A DDP script ported to the loop API (examples/torch-ddp/easyscale_mnist.py: LeNet with BatchNorm and
    dropout, batch-wise augmentation from the global generator, gradient clipping, SGD, OneCycleLR per step)
    against plain gradient accumulation of the same step on the script's own pieces: the same n micro-batches
    of b samples per step (read through the same data set and default_collate), each forward on the
    augmented batch and backward, the gradient x 1/n, clipping, the optimizer and scheduler steps."""
    spec = importlib.util.spec_from_file_location("easyscale_bench_ddp_script", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # defines MNIST, LeNet, random_shift; main() is not run
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=60000 // n // b, params={})
    train = mod.MNIST(data_dir, "train")
    model = mod.LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=cfg.steps)
    sampler = LogicalSampler(len(train), n, cfg.seed)
    cursors = [Cursor() for _ in range(n)]
    clock = _clock(torch.device("cpu"))

    def run_plain(step: int) -> tuple[float, float]:
        batches = step_batches(sampler, cursors, b)
        t0 = clock()
        model.train()
        opt.zero_grad(set_to_none=True)
        for idx in batches:
            x, y = default_collate([train[i] for i in idx])
            F.cross_entropy(model(mod.random_shift(x, 2)), y).backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(1.0 / n)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        t1 = clock()
        return t1[0] - t0[0], t1[1] - t0[1]

    def program() -> None:
        argv = sys.argv
        sys.argv = [script, "--data", data_dir, "--epochs", "1", "--batch-size", str(b),
                    "--log-every", "1000000", "--eval-every", "1000000"]
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            sys.argv = argv

    return run_program(program, cfg, Interleaved(run_plain, clock, warmup, repeats), "cpu")


def main() -> None:
    examples, mnist, opticks = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    torch.set_num_threads(1)
    ddp = measure_script(os.path.join(examples, "torch-ddp", "easyscale_mnist.py"), 8, 32, mnist, repeats)
    lenet = measure_job(load_module(os.path.join(examples, "torch-mnist", "model.py")), 8, 32, {"data_dir": mnist},
                        repeats)
    charlm = measure_job(load_module(os.path.join(examples, "torch-charlm", "model.py")), 4, 8, {"text": opticks},
                         max(repeats // 4, 4))
    results = (("ddp", ddp), ("lenet", lenet), ("charlm", charlm))
    for name, r in results:
        print(f"torch_est_overhead_pct_{name} {r.overhead_pct():.2f} %")
        print(f"torch_step_ms_plain_{name} {1e3 * r.plain:.2f} ms")
        print(f"torch_step_ms_est_{name} {1e3 * r.est:.2f} ms")
        print(f"torch_est_overhead_wall_pct_{name} {r.overhead_wall_pct():.2f} %")
    print(f"torch_est_overhead_pct {max(r.overhead_pct() for _, r in results):.2f} %")


if __name__ == "__main__":
    main()
