"""The GPU check of issue 9 (run by gpu_check.sh): ResNet-18, 8 logical workers, one GPU.

    python3 gpu_check.py train  --device D --procs P --rank R --store FILE --out FILE [options]
    python3 gpu_check.py run    --device D --procs P --out FILE [options]     (starts the P ranks of train)
    python3 gpu_check.py overhead --device D [options]                        (torch_est_overhead_pct)
    python3 gpu_check.py fake-mnist DIR                                       (random digits in idx files)

``run`` trains examples/torch-resnet/model.py for --steps steps with 8 logical
workers on P processes of this machine, all on the one device: process r
holds logical workers [r*8/P, (r+1)*8/P) in an easyscale.Replica and the
gradients are reduced by easyscale.reduce.chain over gloo. Two processes
cannot share one GPU under NCCL (it refuses duplicate devices), and gloo's
point-to-point calls take CPU tensors, so with P > 1 each rank copies its
gradient to the CPU for the chain and the result back (the float32 additions
are the same IEEE operations on either side). With P = 1 the fold is the
autograd accumulation on the device. ``out`` receives the digest after every
step (rank 0: parameters and logical worker 0's buffers) and the parameter
digest of every rank at the end.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import struct
import subprocess
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "model.py")
N = 8


def write_idx(path: str, data: torch.Tensor) -> None:
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, data.dim()) + struct.pack(">" + "I" * data.dim(), *data.shape))
        f.write(data.numpy().tobytes())


def fake_mnist(root: str, n: int = 2048) -> None:
    """Random digits in MNIST's idx format (for a machine without the data set: digests still compare)."""
    os.makedirs(root, exist_ok=True)
    g = torch.Generator().manual_seed(5)
    for prefix in ("train", "t10k"):
        write_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"),
                  torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8))
        write_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"),
                  torch.randint(0, 10, (n,), generator=g, dtype=torch.uint8))


def config(a: argparse.Namespace):  # -> easyscale.Config
    import easyscale
    params = {"data_dir": a.data_dir, "stem": a.stem, "train_samples": a.train_samples, "test_samples": 16}
    return easyscale.Config(seed=a.seed, logical_workers=N, micro_batch=a.micro_batch, steps=max(a.steps, 1),
                            params=params)


def train(a: argparse.Namespace) -> None:
    from easyscale import numerics
    from easyscale.job import load_module
    from easyscale.reduce import chain, scale
    from easyscale.replica import Replica
    numerics.pin(1)
    if a.procs > 1:
        dist.init_process_group("gloo", store=dist.FileStore(a.store, a.procs), rank=a.rank, world_size=a.procs,
                                timeout=datetime.timedelta(minutes=5))
    per = N // a.procs
    lws = list(range(a.rank * per, (a.rank + 1) * per))
    cfg = config(a)
    replica = Replica(load_module(MODEL)(cfg), cfg, lws, a.device)
    digests, times = [], []
    for step in range(a.steps):
        t = time.perf_counter()
        res = replica.compute(step, first_in_chain=(a.rank == 0))
        if a.procs == 1:
            reduced = scale(res.local, N)
        else:
            local = res.local.cpu() if a.rank == 0 else torch.empty(replica.numel)
            reduced = chain(local, [s.cpu() for s in res.slots], N).to(a.device)
        replica.apply(reduced)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if a.rank == 0:
            digests.append(replica.digest(0))
    result = {"rank": a.rank, "digests": digests, "params": replica.digest(None), "step_s": times}
    with open(a.out, "w") as f:
        json.dump(result, f)
    if a.procs > 1:
        dist.destroy_process_group()


def run(a: argparse.Namespace) -> None:
    """Start the a.procs ranks of ``train`` and join their results into a.out."""
    outs = [f"{a.out}.rank{r}" for r in range(a.procs)]
    store = f"{a.out}.store"
    if os.path.exists(store):
        os.remove(store)
    common = ["--device", a.device, "--procs", str(a.procs), "--store", store, "--steps", str(a.steps),
              "--micro-batch", str(a.micro_batch), "--data-dir", a.data_dir, "--stem", a.stem,
              "--train-samples", str(a.train_samples), "--seed", str(a.seed)]
    ranks = [subprocess.Popen([sys.executable, __file__, "train", "--rank", str(r), "--out", outs[r]] + common)
             for r in range(a.procs)]
    codes = [p.wait() for p in ranks]
    if any(codes):
        sys.exit(f"gpu_check: ranks exited {codes}")
    results = []
    for o in outs:
        with open(o) as f:
            results.append(json.load(f))
    with open(a.out, "w") as f:
        json.dump({"digests": results[0]["digests"], "params": [r["params"] for r in results],
                   "step_s": results[0]["step_s"]}, f)


def overhead(a: argparse.Namespace) -> None:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "torchengine", "python", "bench"))
    import torch_bench
    from easyscale import numerics
    from easyscale.job import load_module
    numerics.pin(1)
    r = torch_bench.measure_job(load_module(MODEL), N, a.micro_batch, config(a).params, a.repeats, a.device)
    torch_bench.report("resnet", r)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["train", "run", "overhead", "fake-mnist"])
    p.add_argument("dir", nargs="?", help="fake-mnist: the directory to write")
    p.add_argument("--device", default="cuda")
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--store", default="")
    p.add_argument("--out", default="")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--data-dir", default="")
    p.add_argument("--stem", default="cifar")
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.command == "fake-mnist":
        if not a.dir:
            sys.exit("gpu_check: fake-mnist DIR")
        fake_mnist(a.dir)
        return
    if N % a.procs:
        sys.exit(f"gpu_check: --procs {a.procs} does not divide {N} logical workers")
    {"train": train, "run": run, "overhead": overhead}[a.command](a)


if __name__ == "__main__":
    main()
