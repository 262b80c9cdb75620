"""Benchmarks of the torch engine; prints `name value unit` lines (run by `make bench`, tests/bench/torch.go).

    python3 torch_bench.py EXAMPLES_DIR MNIST_DIR OPTICKS_PATH [REPEATS [ARMS [PROCESSES]]]

REPEATS (default 100) timed steps of each arm in all (charlm: REPEATS / 4), split
over PROCESSES (default 3) fresh Python processes run one after another, each
after 2 untimed steps; ARMS a comma-separated subset of ddp,lenet,charlm.

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
loop: plain, loop, plain, ..., loop, plain), the garbage collector runs,
untimed, before every step of either arm, and each loop step is paired with
the mean of the two plain steps around it. The figure is the median of
these ratios over all the processes' pairs (Pooled), minus 1, in percent; the 25th and 75th percentiles and a 95 %
interval of the median (the sign test's order statistics) show the spread.
Time is the process's CPU time (time.process_time) on the CPU: on this
shared 2-core machine a wall-clock step includes whatever time the process
spent descheduled, and even CPU time varies by tens of percent from step to
step under load (cache and TLB refills after every switch, the other
processes' memory traffic), so neither arm's minimum is a stable figure
(the -25 % once seen for charlm, -12 % for lenet; BENCHMARKS.md), while a
ratio of neighbours sees the same load on both sides and its median ignores
the pairs a burst of load hit. Both arms run one intra-op thread, so CPU
time is the work done. On CUDA the clock is the wall clock after
torch.cuda.synchronize().

torch_est_overhead_pct is the largest of the three. Goal <= 2 (issues 9 and 18).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import runpy
import subprocess
import sys
import tempfile
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
from easyscale.replica import sample_hash
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


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile of ``xs`` (linear interpolation between order statistics, as numpy's default)."""
    ys = sorted(xs)
    at = q * (len(ys) - 1)
    lo = int(at)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (at - lo)


def median_ci(xs: list[float]) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval of the median of ``xs``: the order statistics
    x(k), x(n-k+1) with k the largest for which P(Binomial(n, 1/2) < k) <= 2.5 % (the sign test's interval)."""
    ys, n = sorted(xs), len(xs)
    k, tail = 0, 0.0
    while True:
        nxt = tail + math.comb(n, k) / 2 ** n
        if nxt > 0.025:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return ys[0], ys[-1]
    return ys[k - 1], ys[n - k]


def spread_pct(ratios: list[float]) -> tuple[float, float, float, float]:
    """The ratios' 25th and 75th percentiles and the median's 95 % interval, as overheads in percent."""
    lo, hi = median_ci(ratios)
    return tuple(100 * (v - 1) for v in (quantile(ratios, 0.25), quantile(ratios, 0.75), lo, hi))  # type: ignore


class Result:
    """Step times (s) of both arms, in the order they ran: plain[0], est[0], plain[1], est[1], ..., plain[-1].

    Each loop step k is paired with the plain steps just before and just
    after it: its ratio is est[k] / ((plain[k] + plain[k+1]) / 2). Pairs
    are adjacent in time, so a slow stretch of the machine (cache and TLB
    refills after being descheduled, another process's memory traffic) slows
    both sides of a pair alike, and the mean of the two neighbours cancels
    any cost of running first or second. The figure is the median of the
    ratios; one pair hit by a burst of load moves the median by at most one
    rank, where it would move a mean or a minimum of either arm alone.
    """

    def __init__(self) -> None:
        self.plain: list[float] = []
        self.est: list[float] = []
        self.plain_wall: list[float] = []
        self.est_wall: list[float] = []
        #: Per step of each arm (warm-up included), the sample hashes of its micro-batches in logical-worker order
        #: (replica.sample_hash): what a test compares to show that both arms read the same samples.
        self.plain_samples: list[list[str]] = []
        self.est_samples: list[list[str]] = []

    def to_json(self) -> dict[str, list[float]]:
        """The step times (what :meth:`from_json` reads back in the parent of a pooled measurement)."""
        return {"plain": self.plain, "est": self.est, "plain_wall": self.plain_wall, "est_wall": self.est_wall}

    @staticmethod
    def from_json(d: dict[str, list[float]]) -> "Result":
        r = Result()
        r.plain, r.est, r.plain_wall, r.est_wall = d["plain"], d["est"], d["plain_wall"], d["est_wall"]
        return r

    def add_plain(self, t: tuple[float, float]) -> None:
        self.plain.append(t[0])
        self.plain_wall.append(t[1])

    def add_est(self, t: tuple[float, float]) -> None:
        self.est.append(t[0])
        self.est_wall.append(t[1])

    @staticmethod
    def _ratios(plain: list[float], est: list[float]) -> list[float]:
        return [e / ((plain[k] + plain[k + 1]) / 2) for k, e in enumerate(est) if k + 1 < len(plain)]

    def ratios(self) -> list[float]:
        """est / plain of every pair (work clock)."""
        return self._ratios(self.plain, self.est)

    def overhead_pct(self) -> float:
        """100 x (median ratio - 1): the figure."""
        return 100 * (quantile(self.ratios(), 0.5) - 1)

    def spread_pct(self) -> tuple[float, float, float, float]:
        """The ratios' 25th and 75th percentiles and the median's 95 % interval, as overheads in percent."""
        return spread_pct(self.ratios())

    def overhead_min_pct(self) -> float:
        """100 x (fastest loop step / fastest plain step - 1): the figure's earlier definition, for comparison."""
        return 100 * (min(self.est) / min(self.plain) - 1)

    def overhead_wall_pct(self) -> float:
        """The median ratio by the wall clock (on a loaded machine mostly the other load)."""
        return 100 * (quantile(self._ratios(self.plain_wall, self.est_wall), 0.5) - 1)

    def step_ms(self) -> tuple[float, float]:
        """Median step time of each arm (work clock), in ms."""
        return 1e3 * quantile(self.plain, 0.5), 1e3 * quantile(self.est, 0.5)


class Interleaved(LocalDriver):
    """Drives a training program through the loop API with every logical worker in this process, timing each
    step (from one step boundary to the next) and running one step of the plain arm at every boundary.

    The arms alternate: plain, loop, plain, loop, ..., plain, after ``warmup``
    of each; the garbage collector runs (untimed) before every step of either arm.
    """

    def __init__(self, plain: Callable[[int], tuple[float, float]], clock: Callable[[], tuple[float, float]],
                 warmup: int, repeats: int, plain_hashes: Callable[[], list[str]]) -> None:
        super().__init__()
        self.plain, self.clock, self.warmup, self.repeats = plain, clock, warmup, repeats
        self.plain_hashes = plain_hashes
        self.result = Result()
        self._t: tuple[float, float] | None = None

    def next_step(self, s: loop.Session) -> loop.StepOrder:
        now = self.clock()
        step = s.next_step
        if self._t is not None and step - 1 >= self.warmup:
            self.result.add_est((now[0] - self._t[0], now[1] - self._t[1]))
        gc.collect()
        p = self.plain(step)
        self.result.plain_samples.append(self.plain_hashes())
        if step >= self.warmup:
            self.result.add_plain(p)
        if step >= self.warmup + self.repeats:
            raise loop.Exit(0)
        gc.collect()
        self._t = self.clock()
        return super().next_step(s)

    def finalize(self, s: loop.Session, batch: loop.Batch) -> None:
        assert batch.run is not None
        self.result.est_samples.append([h for _, h in sorted(batch.run.samples.items())])


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
    last: list[list[int]] = []

    def hashes() -> list[str]:
        return [sample_hash(idx) for idx in last]

    def run_plain(step: int) -> tuple[float, float]:
        batches = step_batches(sampler, cursors, b)  # index lists, as a DataLoader's sampler hands them out
        last[:] = batches
        t0 = clock()
        plain.step(batches)
        t1 = clock()
        return t1[0] - t0[0], t1[1] - t0[1]

    job = setup(cfg)
    driver = Interleaved(run_plain, clock, warmup, repeats, hashes)
    return run_program(lambda: jobmod.run(job, cfg), cfg, driver, device)


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
    train = mod.MNIST(data_dir, "train")
    cfg = easyscale.Config(seed=1, logical_workers=n, micro_batch=b, steps=math.ceil(len(train) / n) // b, params={})
    model = mod.LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=cfg.steps)
    sampler = LogicalSampler(len(train), n, cfg.seed)
    cursors = [Cursor() for _ in range(n)]
    clock = _clock(torch.device("cpu"))
    last: list[list[int]] = []

    def hashes() -> list[str]:
        return [sample_hash(idx) for idx in last]

    def run_plain(step: int) -> tuple[float, float]:
        batches = step_batches(sampler, cursors, b)
        last[:] = batches
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

    return run_program(program, cfg, Interleaved(run_plain, clock, warmup, repeats, hashes), "cpu")


class Pooled:
    """The pairs of several processes' Results taken together (each pair stays inside its process).

    One process's median has a bias of its own that its interval does not
    show: the two arms' models, data and buffers sit at other addresses in
    every process, and the medians of separate processes on a quiet host
    differed by up to 1.5 points while each one's interval was about ±0.5
    (BENCHMARKS.md, issue 18). Pooling the pairs of fresh processes averages
    that over layouts; :meth:`process_medians_pct` shows each one.
    """

    def __init__(self, parts: list[Result]) -> None:
        if not parts:
            raise ValueError("a pooled measurement of no process")
        self.parts = parts

    def ratios(self) -> list[float]:
        return [x for r in self.parts for x in r.ratios()]

    def overhead_pct(self) -> float:
        return 100 * (quantile(self.ratios(), 0.5) - 1)

    def spread_pct(self) -> tuple[float, float, float, float]:
        return spread_pct(self.ratios())

    def overhead_min_pct(self) -> float:
        return 100 * (min(min(r.est) for r in self.parts) / min(min(r.plain) for r in self.parts) - 1)

    def overhead_wall_pct(self) -> float:
        return 100 * (quantile([x for r in self.parts for x in Result._ratios(r.plain_wall, r.est_wall)], 0.5) - 1)

    def step_ms(self) -> tuple[float, float]:
        return (1e3 * quantile([x for r in self.parts for x in r.plain], 0.5),
                1e3 * quantile([x for r in self.parts for x in r.est], 0.5))

    def process_medians_pct(self) -> list[float]:
        """Each process's own median overhead, in percent."""
        return [r.overhead_pct() for r in self.parts]


def report(name: str, r: Result | Pooled) -> None:
    """Print one arm's figures: the median overhead, its spread, the earlier minimum-based figure, step times."""
    p25, p75, lo, hi = r.spread_pct()
    plain_ms, est_ms = r.step_ms()
    print(f"torch_est_overhead_pct_{name} {r.overhead_pct():.2f} %")
    print(f"torch_est_overhead_p25_pct_{name} {p25:.2f} %")
    print(f"torch_est_overhead_p75_pct_{name} {p75:.2f} %")
    print(f"torch_est_overhead_ci95_lo_pct_{name} {lo:.2f} %")
    print(f"torch_est_overhead_ci95_hi_pct_{name} {hi:.2f} %")
    print(f"torch_est_overhead_min_pct_{name} {r.overhead_min_pct():.2f} %")
    print(f"torch_est_overhead_wall_pct_{name} {r.overhead_wall_pct():.2f} %")
    print(f"torch_est_pairs_{name} {len(r.ratios())} pairs")
    print(f"torch_step_ms_plain_{name} {plain_ms:.2f} ms")
    print(f"torch_step_ms_est_{name} {est_ms:.2f} ms")
    if isinstance(r, Pooled):
        medians = r.process_medians_pct()
        print(f"torch_est_processes_{name} {len(medians)} processes")
        print(f"torch_est_overhead_process_lo_pct_{name} {min(medians):.2f} %")
        print(f"torch_est_overhead_process_hi_pct_{name} {max(medians):.2f} %")


def _measure(arm: str, examples: str, mnist: str, opticks: str, repeats: int) -> Result:
    """One process's measurement of ``arm`` (ddp, lenet or charlm) with ``repeats`` pairs."""
    torch.set_num_threads(1)
    if arm == "ddp":
        return measure_script(os.path.join(examples, "torch-ddp", "easyscale_mnist.py"), 8, 32, mnist, repeats)
    if arm == "lenet":
        return measure_job(load_module(os.path.join(examples, "torch-mnist", "model.py")), 8, 32,
                           {"data_dir": mnist}, repeats)
    if arm == "charlm":
        return measure_job(load_module(os.path.join(examples, "torch-charlm", "model.py")), 4, 8,
                           {"text": opticks}, repeats)
    raise SystemExit(f"torch_bench: unknown arm {arm!r}: use ddp, lenet or charlm")


def pooled(arm: str, examples: str, mnist: str, opticks: str, repeats: int, processes: int) -> Pooled:
    """``arm`` measured in ``processes`` fresh Python processes one after another, ``repeats`` pairs in all."""
    per = max(math.ceil(repeats / processes), 4)
    parts = []
    with tempfile.TemporaryDirectory(prefix="torch-bench-") as tmp:
        for i in range(processes):
            out = os.path.join(tmp, f"{arm}-{i}.json")
            # The program's own prints go to stderr: stdout carries only this script's figure lines.
            subprocess.run([sys.executable, os.path.abspath(__file__), "--one", arm, examples, mnist, opticks,
                            str(per), out], check=True, stdout=sys.stderr)
            with open(out, encoding="utf-8") as f:
                parts.append(Result.from_json(json.load(f)))
    return Pooled(parts)


def main() -> None:
    if sys.argv[1] == "--one":  # a child of pooled(): one arm, its step times as JSON into OUT
        arm, examples, mnist, opticks, repeats, out = sys.argv[2:8]
        result = _measure(arm, examples, mnist, opticks, int(repeats))
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result.to_json(), f)
        return
    examples, mnist, opticks = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    arms = sys.argv[5].split(",") if len(sys.argv) > 5 else ["ddp", "lenet", "charlm"]
    processes = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    if processes < 1:
        raise SystemExit(f"torch_bench: PROCESSES {processes}: want at least 1")
    results = [(name, pooled(name, examples, mnist, opticks, repeats if name != "charlm" else max(repeats // 4, 4),
                             processes)) for name in arms]
    for name, r in results:
        report(name, r)
    print(f"torch_est_overhead_pct {max(r.overhead_pct() for _, r in results):.2f} %")


if __name__ == "__main__":
    main()
