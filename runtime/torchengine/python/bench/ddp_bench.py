"""The PyTorch DDP baseline of torch_vs_ddp_step_ratio (tests/bench/torch.go).

    python3 ddp_bench.py MODULE STORE_FILE RANK WORLD LOGICAL_WORKERS MICRO_BATCH [key=value params...]
    python3 ddp_bench.py --script DDP_SCRIPT STORE_FILE RANK WORLD LOGICAL_WORKERS MICRO_BATCH data_dir=DIR

With --script, the step is the one of a stock DDP training script
(examples/torch-ddp/ddp_mnist.py, imported for its MNIST, LeNet and
random_shift; its main() is not run) with gradient accumulation: torch's
DistributedSampler and DataLoader of WORLD ranks, LOGICAL_WORKERS / WORLD
micro-batches per rank and step (each augmented batch-wise from the global
generator), ``no_sync()`` on all but the last, clipping, SGD and OneCycleLR
per step, as the script sets them. The engine's arm is the same script
ported to the loop API (examples/torch-ddp/easyscale_mnist.py). There is no
easyscale arm without the Go side in this mode: rank 0 prints ``ddp`` lines
only.

WORLD processes train MODULE's job with torch.nn.parallel.DistributedDataParallel
over gloo, with the global batch of LOGICAL_WORKERS micro-batches of
MICRO_BATCH: each rank accumulates LOGICAL_WORKERS / WORLD micro-batches,
under ``no_sync()`` on all but the last, so DDP all-reduces once per step,
as a plain PyTorch script with gradient accumulation does. The data path is
the one the easyscale arm reads: the same data set, the sample indices of
the same logical workers (rank r reads those of logical workers
r*k .. r*k+k-1, from easyscale.sampler), the same collate and the user's
transform drawing from one generator per process. ``broadcast_buffers`` is
off (the cheaper DDP: no buffer broadcast before each forward).

The same processes also run the easyscale step without the Go side: an
easyscale.Replica per process holding the same logical workers (of a twin of
the job) and easyscale.reduce.chain over the same process group, the steps of
the two arms alternating, so the difference to the engine's step through
torchengine.Local is the control protocol's share.

Rank 0 reads commands from stdin, one per line: an integer K runs K steps of
each arm and prints ``ddp SECONDS...`` and ``est SECONDS...`` (rank 0's wall
time of each step, from its start to the end of the optimizer step); 0 ends
both ranks. The other ranks receive K from rank 0 over the process group.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import os
import sys
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import easyscale
from easyscale.job import collate, load_module
from easyscale.reduce import chain
from easyscale.replica import Replica
from easyscale.sampler import Cursor, LogicalSampler


def job_steps(module: str, rank: int, world: int, n: int, b: int,
              params: dict[str, object]) -> tuple[Callable[[], None], Callable[[], None]]:
    """The DDP step of MODULE's job with gradient accumulation, and the easyscale step without the Go side."""
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=1000, params=params)
    job = load_module(module)(cfg)
    model = DistributedDataParallel(job.model, broadcast_buffers=False)
    k = n // world
    mine = list(range(rank * k, rank * k + k))
    sampler = LogicalSampler(len(job.train_set), n, cfg.seed)
    cursors = {lw: Cursor() for lw in mine}
    g = torch.Generator().manual_seed(12345 + rank)

    def step() -> None:
        model.train()
        for i, lw in enumerate(mine):
            idx, cursors[lw] = sampler.next(cursors[lw], lw, b)
            samples = [job.train_set[j] for j in idx]
            if job.transform is not None:
                samples = [(job.transform(x, g), y) for x, y in samples]
            x, y = collate(samples)
            if i < k - 1:
                with model.no_sync():
                    (job.loss(model(x), y) / k).backward()
            else:
                (job.loss(model(x), y) / k).backward()
        job.optimizer.step()
        if job.lr_scheduler is not None:
            job.lr_scheduler.step()
        job.optimizer.zero_grad(set_to_none=True)

    twin = load_module(module)(cfg)
    replica = Replica(twin, cfg, mine)
    est_step = 0

    def est() -> None:
        nonlocal est_step
        res = replica.compute(est_step, first_in_chain=(rank == 0))
        local = res.local if rank == 0 else torch.empty(replica.numel)
        replica.apply(chain(local, res.slots, n))
        est_step += 1

    return step, est


def script_step(path: str, rank: int, world: int, n: int, b: int, params: dict[str, object]) -> Callable[[], None]:
    """The accumulating DDP step of the stock script at ``path`` (see the module doc)."""
    spec = importlib.util.spec_from_file_location("easyscale_bench_ddp_script", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(1)
    train = mod.MNIST(str(params["data_dir"]), "train")
    sampler = torch.utils.data.DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = torch.utils.data.DataLoader(train, batch_size=b, sampler=sampler, drop_last=True)
    model = DistributedDataParallel(mod.LeNet(), broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    k = n // world
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=len(loader) // k)
    batches = iter(loader)

    def step() -> None:
        nonlocal batches
        model.train()
        opt.zero_grad(set_to_none=True)
        for i in range(k):
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
            with model.no_sync() if i < k - 1 else contextlib.nullcontext():
                (torch.nn.functional.cross_entropy(model(mod.random_shift(x, 2)), y) / k).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return step


def main() -> None:
    script = sys.argv[1] == "--script"
    args = sys.argv[2:] if script else sys.argv[1:]
    module, store_file = args[0], args[1]
    rank, world, n, b = (int(a) for a in args[2:6])
    params: dict[str, object] = dict(a.split("=", 1) for a in args[6:])  # type: ignore[misc]
    if n % world:
        sys.exit(f"ddp_bench: {n} logical workers do not split evenly over {world} processes")
    torch.set_num_threads(1)
    store = dist.FileStore(store_file, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=10))
    arms: dict[str, Callable[[], None]] = {}
    if script:
        arms["ddp"] = script_step(module, rank, world, n, b, params)
    else:
        arms["ddp"], arms["est"] = job_steps(module, rank, world, n, b, params)
    count = torch.zeros(1, dtype=torch.int64)
    while True:
        if rank == 0:
            line = sys.stdin.readline()
            count[0] = int(line) if line.strip() else 0
        dist.broadcast(count, 0)
        if int(count) == 0:
            break
        times: dict[str, list[float]] = {name: [] for name in arms}
        order = list(arms.items())
        for i in range(int(count)):
            for name, f in (order if i % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t)
        if rank == 0:
            for name, ts in times.items():
                print(name + " " + " ".join(f"{s:.6f}" for s in ts), flush=True)
    # Both ranks leave together, then exit without tearing the group down: torch 1.13's
    # destroy_process_group once left rank 1 waiting on a futex for good after rank 0 had exited
    # (one of three bench runs, 2 December 2026); there is nothing to clean up in a process that ends.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
