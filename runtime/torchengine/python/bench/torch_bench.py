"""Benchmarks of the torch engine; prints `name value unit` lines (run by `make bench`, tests/bench/torch.go).

    python3 torch_bench.py EXAMPLES_DIR MNIST_DIR OPTICKS_PATH

torch_est_overhead_pct_{lenet,charlm}: one step of 8 (lenet) / 4 (charlm) logical
workers on one process with easyscale.Replica (buffer swaps, per-worker seeding,
sampler, the autograd fold) against plain gradient accumulation of the same
micro-batches from the same data set (index, collate, forward, backward,
optimizer step); min over repeated steps, both in this process, one thread.
torch_est_overhead_pct is the larger. Goal <= 2 (issue 9).
"""

from __future__ import annotations

import os
import sys
import time

import torch

import easyscale
from easyscale.job import collate, load_module
from easyscale.reduce import scale
from easyscale.replica import Replica


def plain_step(job: easyscale.Job, batches: list[list[int]], n: int) -> None:
    job.model.train()
    for idx in batches:
        x, y = collate([job.train_set[i] for i in idx])
        job.loss(job.model(x), y).backward()
    for p in job.model.parameters():
        if p.grad is not None:
            p.grad.mul_(1.0 / n)
    job.optimizer.step()
    if job.lr_scheduler is not None:
        job.lr_scheduler.step()
    job.optimizer.zero_grad(set_to_none=True)


def measure(module: str, n: int, b: int, params: dict[str, object], repeats: int) -> float:
    setup = load_module(module)
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=1000, params=params)
    job_plain, job_est = setup(cfg), setup(cfg)
    replica = Replica(job_est, cfg, list(range(n)))
    batches = [list(range(k * b, (k + 1) * b)) for k in range(n)]
    best_plain = best_est = float("inf")
    for step in range(repeats):  # interleaved, so a noisy moment hurts both
        t = time.perf_counter()
        plain_step(job_plain, batches, n)
        best_plain = min(best_plain, time.perf_counter() - t)
        t = time.perf_counter()
        res = replica.compute(step, True)
        replica.apply(scale(res.local, n))
        best_est = min(best_est, time.perf_counter() - t)
    return 100 * (best_est / best_plain - 1)


def main() -> None:
    examples, mnist, opticks = sys.argv[1:4]
    torch.set_num_threads(1)
    lenet = measure(os.path.join(examples, "torch-mnist", "model.py"), 8, 32, {"data_dir": mnist}, 30)
    charlm = measure(os.path.join(examples, "torch-charlm", "model.py"), 4, 8, {"text": opticks}, 15)
    print(f"torch_est_overhead_pct_lenet {lenet:.2f} %")
    print(f"torch_est_overhead_pct_charlm {charlm:.2f} %")
    print(f"torch_est_overhead_pct {max(lenet, charlm):.2f} %")


if __name__ == "__main__":
    main()
