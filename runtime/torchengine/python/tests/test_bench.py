"""python/bench/torch_bench.py compares like with like: both arms read the same samples through the same transform."""

import gzip
import json
import os
import struct
import sys
import tempfile
import time
import unittest

import torch

import easyscale
from easyscale.reduce import scale
from easyscale.replica import Replica
from easyscale.sampler import Cursor, LogicalSampler

from . import toyjob

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import torch_bench  # noqa: E402


class Recording(torch.utils.data.Dataset):
    """Wraps a data set, recording the indices read and counting the transform's calls."""

    def __init__(self, inner: torch.utils.data.Dataset) -> None:
        self.inner, self.read = inner, []

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int):
        self.read.append(i)
        return self.inner[i]


class Counting:
    """Counts, per model (a module whose class is named in ``models``), its training forwards, the backwards
    through it and the steps of its optimizer (an SGD), while active: torch's global forward hook, a gradient
    hook on the model's first parameter and a wrapped SGD.step."""

    def __init__(self, *models: str) -> None:
        self.models = set(models)

    def __enter__(self) -> "Counting":
        self.counts: dict[int, list[int]] = {}
        self.owner: dict[int, int] = {}  # id(parameter) -> id(model)
        self.handle = torch.nn.modules.module.register_module_forward_hook(self._forward)
        self.step = torch.optim.SGD.step

        def step(opt: torch.optim.Optimizer, *args, **kwargs):
            model = self.owner.get(id(opt.param_groups[0]["params"][0]))
            if model is not None:
                self.counts[model][2] += 1
            return self.step(opt, *args, **kwargs)
        torch.optim.SGD.step = step
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()
        torch.optim.SGD.step = self.step

    def _forward(self, module: torch.nn.Module, inputs: object, output: object) -> None:
        if type(module).__name__ not in self.models or not module.training:
            return
        if id(module) not in self.counts:
            params = list(module.parameters())
            self.owner.update({id(p): id(module) for p in params})
            counts = self.counts[id(module)] = [0, 0, 0]
            params[0].register_hook(lambda g: counts.__setitem__(1, counts[1] + 1))
        self.counts[id(module)][0] += 1

    def per_model(self) -> list[tuple[int, int, int]]:
        """(forwards, backwards, optimizer steps) of each model seen."""
        return [(f, b, s) for f, b, s in self.counts.values()]


def fake_mnist(directory: str, sizes: dict[str, int]) -> None:
    """Write MNIST's four gzip'd idx files with random 28x28 images: sizes maps "train"/"t10k" to a count."""
    g = torch.Generator().manual_seed(5)
    for prefix, count in sizes.items():
        images = torch.randint(0, 256, (count, 28, 28), dtype=torch.uint8, generator=g)
        labels = torch.randint(0, 10, (count,), dtype=torch.uint8, generator=g)
        with gzip.open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">HBB3I", 0, 8, 3, count, 28, 28) + bytes(images.flatten().tolist()))
        with gzip.open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">HBBI", 0, 8, 1, count) + bytes(labels.tolist()))


class SameWork(unittest.TestCase):
    def test_the_plain_arm_reads_the_samples_of_the_logical_workers_through_the_transform(self) -> None:
        n, b = 4, 3
        cfg = easyscale.Config(seed=7, logical_workers=n, micro_batch=b, steps=8)
        jobs = []
        for _ in range(2):
            job = toyjob.setup(cfg)
            job.train_set = Recording(job.train_set)
            calls = []
            inner = job.transform
            job.transform = lambda x, g, inner=inner, calls=calls: (calls.append(1), inner(x, g))[1]
            jobs.append((job, calls))
        (pj, pcalls), (ej, ecalls) = jobs
        plain = torch_bench.Plain(pj, n, torch.device("cpu"))
        replica = Replica(ej, cfg, list(range(n)))
        sampler, cursors = LogicalSampler(len(pj.train_set), n, cfg.seed), [Cursor() for _ in range(n)]
        for step in range(6):  # 6 x 12 samples: past the end of the 50-sample epoch
            plain.step(torch_bench.step_batches(sampler, cursors, b))
            res = replica.compute(step, True)
            replica.apply(scale(res.local, n))
        self.assertEqual(pj.train_set.read, ej.train_set.read)
        self.assertEqual(len(pcalls), len(ecalls))
        self.assertEqual(len(pcalls), 6 * n * b)

    def test_the_loop_api_arm_and_the_plain_arm_do_the_same_work_step_for_step(self) -> None:
        n, b, warmup, repeats = 4, 3, 1, 3
        reads: list[list[int]] = []

        def setup(cfg: easyscale.Config) -> easyscale.Job:
            job = toyjob.setup(cfg)
            job.train_set = Recording(job.train_set)
            reads.append(job.train_set.read)
            return job
        with Counting("Sequential") as count:
            r = torch_bench.measure_job(setup, n, b, {}, repeats, warmup=warmup)
        plain, looped = reads
        steps = warmup + repeats  # the loop's; the plain arm runs one more, after the loop's last
        self.assertEqual(len(looped), steps * n * b)
        self.assertEqual(plain, looped + plain[len(looped):])
        self.assertEqual(len(plain), (steps + 1) * n * b)
        self.assertEqual(r.plain_samples[:steps], r.est_samples)
        self.assertEqual(len(r.plain_samples), steps + 1)
        self.assertEqual(sorted(count.per_model()),
                         [(steps * n,) * 2 + (steps,), ((steps + 1) * n,) * 2 + (steps + 1,)])
        self.assertEqual((len(r.plain), len(r.est), len(r.ratios())), (repeats + 1, repeats, repeats))
        self.assertTrue(all(0 < t < float("inf") for t in r.plain + r.est), (r.plain, r.est))

    def test_the_ported_ddp_script_and_its_plain_step_do_the_same_work_step_for_step(self) -> None:
        n, b, warmup, repeats = 4, 3, 1, 3
        script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples", "torch-ddp",
                              "easyscale_mnist.py")
        if not os.path.isfile(script):
            self.skipTest(f"{script}: the examples are not next to the package")
        with tempfile.TemporaryDirectory() as data, Counting("LeNet") as count:
            fake_mnist(data, {"train": 96, "t10k": 8})
            r = torch_bench.measure_script(script, n, b, data, repeats, warmup=warmup)
        steps = warmup + repeats
        self.assertEqual(r.plain_samples[:steps], r.est_samples)
        self.assertEqual(len(r.plain_samples), steps + 1)
        self.assertEqual(len({h for hs in r.est_samples for h in hs}), steps * n, "every micro-batch differs")
        self.assertEqual(sorted(count.per_model()),
                         [(steps * n,) * 2 + (steps,), ((steps + 1) * n,) * 2 + (steps + 1,)])
        self.assertEqual((len(r.plain), len(r.est)), (repeats + 1, repeats))

    def test_each_loop_step_is_paired_with_the_plain_steps_around_it(self) -> None:
        r = torch_bench.Result()
        for t in (1.0, 3.0, 1.0, 100.0, 1.0, 2.0):  # plain, est, plain, est, ...
            r.add_plain((t, t)) if len(r.plain) == len(r.est) else r.add_est((t, t))
        r.add_plain((3.0, 3.0))
        self.assertEqual(r.ratios(), [3.0, 100.0, 1.0])
        self.assertAlmostEqual(r.overhead_pct(), 200.0)
        self.assertEqual(r.step_ms(), (1000.0, 3000.0))

    def test_pooled_processes_pair_steps_only_inside_each_process(self) -> None:
        def result(times: tuple[float, ...]) -> torch_bench.Result:
            r = torch_bench.Result()
            for t in times:  # plain, est, plain, ..., plain
                r.add_plain((t, t)) if len(r.plain) == len(r.est) else r.add_est((t, t))
            return torch_bench.Result.from_json(json.loads(json.dumps(r.to_json())))  # as a child hands it over

        a, b = result((1.0, 2.0, 1.0)), result((10.0, 10.0, 10.0, 30.0, 10.0))
        pooled = torch_bench.Pooled([a, b])
        self.assertEqual(pooled.ratios(), [2.0, 1.0, 3.0])  # never b's first plain step against a's last
        self.assertAlmostEqual(pooled.overhead_pct(), 100.0)
        self.assertEqual([round(x) for x in pooled.process_medians_pct()], [100, 100])
        self.assertEqual(pooled.step_ms(), (10000.0, 10000.0))
        with self.assertRaises(ValueError):
            torch_bench.Pooled([])

    def test_the_median_interval_holds_the_middle_order_statistics(self) -> None:
        xs = list(range(1, 61))
        lo, hi = torch_bench.median_ci(xs)
        self.assertEqual((lo, hi), (22, 39))  # n = 60: P(Binomial(60, 1/2) <= 21) = 1.4 %, so x(22) .. x(39)
        self.assertEqual(torch_bench.median_ci([5.0, 1.0]), (1.0, 5.0))
        self.assertEqual(torch_bench.quantile([4.0, 1.0, 2.0, 3.0], 0.5), 2.5)

    def test_the_cpu_clock_is_the_process_cpu_time(self) -> None:
        work, wall = torch_bench._clock(torch.device("cpu"))()
        self.assertLessEqual(abs(work - time.process_time()), 1.0)


if __name__ == "__main__":
    unittest.main()
