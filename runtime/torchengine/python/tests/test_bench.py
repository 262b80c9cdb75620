"""python/bench/torch_bench.py compares like with like: both arms read the same samples through the same transform."""

import os
import time
import sys
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

    def test_the_loop_api_arm_and_the_plain_arm_read_the_same_samples_in_turn(self) -> None:
        n, b, warmup, repeats = 4, 3, 1, 3
        reads: list[list[int]] = []

        def setup(cfg: easyscale.Config) -> easyscale.Job:
            job = toyjob.setup(cfg)
            job.train_set = Recording(job.train_set)
            reads.append(job.train_set.read)
            return job
        r = torch_bench.measure_job(setup, n, b, {}, repeats, warmup=warmup)
        plain, looped = reads
        self.assertEqual(len(plain), (warmup + repeats) * n * b)
        self.assertEqual(plain, looped)
        self.assertTrue(0 < r.plain < float("inf") and 0 < r.est < float("inf"), (r.plain, r.est))

    def test_the_cpu_clock_is_the_process_cpu_time(self) -> None:
        work, wall = torch_bench._clock(torch.device("cpu"))()
        self.assertLessEqual(abs(work - time.process_time()), 1.0)


if __name__ == "__main__":
    unittest.main()
