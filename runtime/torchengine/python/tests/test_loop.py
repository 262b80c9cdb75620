"""The loop API in one process: placements (orders of the logical workers), resume, and the refusals."""

from __future__ import annotations

import unittest
from typing import Any

import torch

from easyscale import loop
from easyscale.job import Config, JobError

from . import toyloop

N, STEPS = 4, 8  # 48 samples over 4 logical workers in micro-batches of 3: 4 steps per epoch, 2 epochs


def run(driver: loop.LocalDriver, argv: list[str] | None = None, steps: int = STEPS,
        n: int = N) -> tuple[loop.Session, dict[str, Any] | None]:
    """Run toyloop.main under a session of ``driver``; returns the session and main's result (None: stopped)."""
    s = loop.Session(Config(seed=7, logical_workers=n, micro_batch=3, steps=steps), driver)
    loop.install(s)
    try:
        out = toyloop.main(argv or [])
        s.end()
        return s, out
    except loop.Exit:
        s.boundary()
        return s, None
    finally:
        loop.install(None)


def fingerprint(s: loop.Session) -> tuple[bytes, dict[int, Any]]:
    """The registered state's bytes and every logical worker's cursor and buffers."""
    assert s.replica is not None
    r = s.replica
    return s.registry.encode(), {lw: (r.cursors[lw], {k: v.clone() for k, v in r.bank.buffers(lw).items()})
                                 for lw in r.logical_workers()}


class Placement(unittest.TestCase):
    def assertSameState(self, a: loop.Session, b: loop.Session) -> None:
        (ra, ca), (rb, cb) = fingerprint(a), fingerprint(b)
        self.assertEqual(ra, rb, "registered state differs")
        self.assertEqual(ca.keys(), cb.keys())
        for lw in ca:
            self.assertEqual(ca[lw][0], cb[lw][0], f"cursor of logical worker {lw}")
            for k in ca[lw][1]:
                self.assertTrue(torch.equal(ca[lw][1][k], cb[lw][1][k]), f"buffer {k} of logical worker {lw}")

    def test_the_order_of_the_logical_workers_does_not_change_the_bits(self) -> None:
        ref, out = run(loop.LocalDriver())
        assert out is not None
        self.assertEqual(out["progress"]["steps"], STEPS)
        for order in ([3, 2, 1, 0], [2, 3, 0, 1]):
            with self.subTest(order=order):
                got, _ = run(loop.LocalDriver(order=order))
                self.assertSameState(ref, got)

    def test_a_transform_drawing_from_the_global_generators_is_keyed_per_logical_worker(self) -> None:
        ref, _ = run(loop.LocalDriver(), ["--jitter"])
        got, _ = run(loop.LocalDriver(order=[1, 0, 3, 2]), ["--jitter"])
        self.assertSameState(ref, got)
        plain, _ = run(loop.LocalDriver())
        self.assertNotEqual(fingerprint(plain)[0], fingerprint(ref)[0], "--jitter changed nothing")

    def test_a_job_resumed_mid_epoch_and_at_an_epoch_end_gives_the_uninterrupted_state(self) -> None:
        ref, _ = run(loop.LocalDriver())
        for at in (2, 4, 6):
            with self.subTest(stopped_at=at):
                first, out = run(loop.LocalDriver(stop=at))
                self.assertIsNone(out)
                assert first.replica is not None
                contexts = {lw: first.replica.remove(lw) for lw in range(N)}
                resumed, out = run(loop.LocalDriver(start=at, replica=first.registry.encode(), contexts=contexts))
                assert out is not None
                self.assertEqual(out["progress"]["steps"], STEPS, "the registered counter was not restored")
                self.assertSameState(ref, resumed)


class Refusals(unittest.TestCase):
    def test_a_loop_longer_than_the_job_is_refused_naming_steps(self) -> None:
        with self.assertRaisesRegex(JobError, "past the job's 6 steps"):
            run(loop.LocalDriver(), steps=6)

    def test_a_resumed_loop_that_starts_at_epoch_0_is_told_to_start_at_loader_epoch(self) -> None:
        first, _ = run(loop.LocalDriver(stop=5))
        assert first.replica is not None
        contexts = {lw: first.replica.remove(lw) for lw in range(N)}
        with self.assertRaisesRegex(JobError, "iterating epoch 0, but the job is in epoch 1 .it resumed there.: "
                                    "start the epoch loop at loader.epoch"):
            run(loop.LocalDriver(start=5, replica=first.registry.encode(), contexts=contexts), ["--from-epoch-0"])

    def test_what_resume_could_not_restore_is_refused_before_the_first_step(self) -> None:
        def program(register_sched: bool, batch_size: int = 3, drop_last: bool = True) -> None:
            torch.manual_seed(7)
            model = loop.DistributedDataParallel(toyloop.Net())
            train = toyloop.Images(48)
            sampler = loop.DistributedSampler(train, seed=7)
            ld = loop.DataLoader(train, batch_size=batch_size, sampler=sampler, drop_last=drop_last)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 2)
            loop.register(opt, *([sched] if register_sched else []))
            for batch in ld:
                for x, y in batch:
                    batch.backward(torch.nn.functional.cross_entropy(model(x), y))
        for name, fn, want in [
            ("an unregistered scheduler", lambda: program(False), "StepLR steps a registered optimizer"),
            ("another micro-batch", lambda: program(True, batch_size=2), "batch_size is 2, the job file's micro_batch 3"),
        ]:
            with self.subTest(name):
                loop.install(loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS),
                                          loop.LocalDriver()))
                try:
                    with self.assertRaisesRegex(JobError, want):
                        fn()
                finally:
                    loop.install(None)
        loop.install(loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS), loop.LocalDriver()))
        try:
            with self.assertRaisesRegex(JobError, "drop_last=True"):
                program(True, drop_last=False)
        finally:
            loop.install(None)

    def test_a_micro_batch_without_backward_is_refused(self) -> None:
        loop.install(loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS), loop.LocalDriver()))
        try:
            model = loop.DistributedDataParallel(toyloop.Net())
            train = toyloop.Images(48)
            ld = loop.DataLoader(train, batch_size=3, sampler=loop.DistributedSampler(train), drop_last=True)
            loop.register(torch.optim.SGD(model.parameters(), lr=0.1))
            with self.assertRaisesRegex(JobError, "call batch.backward"):
                for batch in ld:
                    for x, y in batch:
                        torch.nn.functional.cross_entropy(model(x), y).backward()
        finally:
            loop.install(None)

    def test_device_is_the_jobs_and_a_model_left_elsewhere_is_refused_naming_the_fix(self) -> None:
        self.assertEqual(loop.device(), torch.device("cpu"))  # outside a job: a standalone CPU session
        # "meta" stands in for a GPU here: the job's device, while the script left its model on the CPU.
        loop.install(loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS), loop.LocalDriver(),
                                  "meta"))
        try:
            self.assertEqual(loop.device(), torch.device("meta"))
            model = loop.DistributedDataParallel(toyloop.Net())
            train = toyloop.Images(48)
            ld = loop.DataLoader(train, batch_size=3, sampler=loop.DistributedSampler(train), drop_last=True)
            loop.register(torch.optim.SGD(model.parameters(), lr=0.1))
            with self.assertRaisesRegex(JobError, r"is on cpu but the job runs on meta \(\[torch\] device\).*"
                                                  r"Net\(\)\.to\(easyscale\.device\(\)\)"):
                for batch in ld:
                    for x, y in batch:
                        batch.backward(torch.nn.functional.cross_entropy(model(x), y))
        finally:
            loop.install(None)


if __name__ == "__main__":
    unittest.main()
