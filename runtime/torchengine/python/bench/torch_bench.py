"""Benchmarks of the torch engine; prints `name value unit` lines (run by `make bench`, tests/bench/torch.go).

    python3 torch_bench.py EXAMPLES_DIR MNIST_DIR OPTICKS_PATH [REPEATS]

torch_est_overhead_pct_{lenet,charlm}: one step of 8 (lenet) / 4 (charlm)
logical workers on one process with easyscale.Replica (buffer swaps, per-worker
seeding, the sampler, keyed augmentation generators, the autograd fold, the
flat gradient and its application) against plain gradient accumulation of the
*same* micro-batches through the *same* data path (the same data set, the same
sample indices, the same collate and the same transform, drawing from one
generator as a plain script's augmentation would) on a twin of the same job.

The arms are interleaved step by step, alternating which goes first, and the
figure compares the minimum of each over the repeats. Time is the process's
CPU time (time.process_time) on the CPU: on this shared 2-core machine a
wall-clock step includes whatever time the process spent descheduled, so
under heavy load wall-clock minima of a few repeats differ by tens of percent
for identical work (the -25 % once seen for charlm; BENCHMARKS.md). Both
arms run one intra-op thread, so CPU time is the work done. On CUDA the
clock is the wall clock after torch.cuda.synchronize().

torch_est_overhead_pct is the larger of the two. Goal <= 2 (issue 9).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Callable

import torch

import easyscale
from easyscale.job import collate, load_module
from easyscale.reduce import scale
from easyscale.replica import Replica
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


def measure(module: str, n: int, b: int, params: dict[str, object], repeats: int,
            device: str = "cpu", warmup: int = 2) -> Result:
    """Time ``repeats`` interleaved steps of both arms of ``module`` (after ``warmup`` untimed ones)."""
    dev = torch.device(device)
    setup = load_module(module)
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=1000, params=params)
    plain = Plain(setup(cfg), n, dev)
    replica = Replica(setup(cfg), cfg, list(range(n)), device)
    sampler = LogicalSampler(len(plain.job.train_set), n, cfg.seed)  # the replica's own order, for plain
    cursors = [Cursor() for _ in range(n)]
    clock = _clock(dev)

    def run_plain(step: int) -> tuple[float, float]:
        batches = step_batches(sampler, cursors, b)  # index lists, as a DataLoader's sampler hands them out
        t0 = clock()
        plain.step(batches)
        t1 = clock()
        return t1[0] - t0[0], t1[1] - t0[1]

    def run_est(step: int) -> tuple[float, float]:
        t0 = clock()
        res = replica.compute(step, True)
        replica.apply(scale(res.local, n))
        t1 = clock()
        return t1[0] - t0[0], t1[1] - t0[1]

    out = Result()
    gc.disable()
    try:
        for step in range(warmup + repeats):
            gc.collect()
            if step % 2 == 0:  # alternate which arm goes first
                tp, te = run_plain(step), run_est(step)
            else:
                te, tp = run_est(step), run_plain(step)
            if step >= warmup:
                out.add(tp, te)
    finally:
        gc.enable()
    return out


def main() -> None:
    examples, mnist, opticks = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    torch.set_num_threads(1)
    lenet = measure(os.path.join(examples, "torch-mnist", "model.py"), 8, 32, {"data_dir": mnist}, repeats)
    charlm = measure(os.path.join(examples, "torch-charlm", "model.py"), 4, 8, {"text": opticks},
                     max(repeats // 4, 4))
    for name, r in (("lenet", lenet), ("charlm", charlm)):
        print(f"torch_est_overhead_pct_{name} {r.overhead_pct():.2f} %")
        print(f"torch_step_ms_plain_{name} {1e3 * r.plain:.2f} ms")
        print(f"torch_step_ms_est_{name} {1e3 * r.est:.2f} ms")
        print(f"torch_est_overhead_wall_pct_{name} {r.overhead_wall_pct():.2f} %")
    print(f"torch_est_overhead_pct {max(lenet.overhead_pct(), charlm.overhead_pct()):.2f} %")


if __name__ == "__main__":
    main()
