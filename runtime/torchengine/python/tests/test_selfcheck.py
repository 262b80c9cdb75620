"""The self-check and issue 18's cases: what it must catch, what the engine keeps, and the schedulers."""

from __future__ import annotations

import copy
import unittest
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import default_collate

from easyscale import loop, reduce, streams
from easyscale.job import Config, JobError
from easyscale.sampler import Cursor, LogicalSampler
from easyscale.state import Registry

from . import toyloop
from .test_loop import N, STEPS, fingerprint, run


def check(argv: list[str], steps: int = STEPS) -> tuple[dict[str, Any], loop.Session]:
    driver = loop.LocalDriver(check=2)
    s, _ = run(driver, argv, steps=steps)
    assert driver.check_result is not None
    return driver.check_result, s


class Caught(unittest.TestCase):
    def test_a_dropout_drawn_from_a_generator_the_model_owns(self) -> None:
        res, _ = check(["--case", "owned-generator"])
        self.assertEqual(res["result"], "failed", res)
        self.assertIn("model.gen is a torch.Generator of its own", res["message"])
        self.assertIn("(parameter) differs first", res["message"])

    def test_a_running_statistic_in_a_plain_tensor_attribute(self) -> None:
        res, _ = check(["--case", "running-stat"])
        self.assertEqual(res["result"], "failed", res)
        self.assertIn("model.running is a plain tensor attribute, not a registered buffer", res["message"])
        self.assertIn("register_buffer", res["message"])

    def test_a_module_level_counter_read_by_the_model(self) -> None:
        res, _ = check(["--case", "global-counter"])
        self.assertEqual(res["result"], "failed", res)
        self.assertIn("Likely cause: a global", res["message"])


    def test_a_counter_on_the_model_whose_effect_starts_after_the_checked_steps(self) -> None:
        res, _ = check(["--case", "late-counter"])
        self.assertEqual(res["result"], "failed", res)
        self.assertIn("model.calls changed during training", res["message"])
        self.assertIn("model.calls is a plain number attribute", res["message"])


    def test_a_history_list_on_the_model_and_a_read_counter_on_the_data_set(self) -> None:
        for argv, key, kind in ((["--case", "history"], "model.hist", "container"),
                                (["--data-rng", "counter"], "the data set.reads", "number")):
            with self.subTest(key):
                res, _ = check(argv)
                self.assertEqual(res["result"], "failed", res)
                self.assertIn(f"{key} changed during training", res["message"])
                self.assertIn(f"{key} is a plain {kind} attribute", res["message"])
                self.assertEqual("register_buffer" in res["message"], kind == "number" and key.startswith("model."),
                                 res["message"])

    def test_a_class_attribute_counter_and_a_counter_on_the_optimizer(self) -> None:
        # Not an instance attribute, and not in the optimizer's state_dict(): neither is checkpointed.
        for argv, key in ((["--case", "class-counter"], "model class ClassCounterNet.calls"),
                          (["--opt-counter"], "optimizer.micro_batches")):  # set by training: none before it
            with self.subTest(key):
                res, _ = check(argv)
                self.assertEqual(res["result"], "failed", res)
                self.assertIn(f"Likely cause: {key} is a", res["message"])

    def test_a_python_or_numpy_generator_the_data_set_owns(self) -> None:
        for kind, what in (("python", "a random.Random"), ("numpy", "a numpy generator")):
            with self.subTest(kind):
                res, _ = check(["--data-rng", kind])
                self.assertEqual(res["result"], "failed", res)
                self.assertIn(f"the data set.rng is {what} of its own", res["message"])


class Kept(unittest.TestCase):
    def test_the_check_passes_and_leaves_the_job_as_if_it_had_not_run(self) -> None:
        res, checked = check([])
        self.assertEqual(res["result"], "passed", res)
        self.assertEqual(res["steps"], 2)
        plain, _ = run(loop.LocalDriver(), [])
        self.assertEqual(fingerprint(checked)[0], fingerprint(plain)[0])

    def test_a_transform_drawing_from_torchs_and_pythons_global_generators(self) -> None:
        res, _ = check(["--jitter"])
        self.assertEqual(res["result"], "passed", res)

    def test_an_lstm_and_a_custom_autograd_function(self) -> None:
        for case in ("lstm", "function"):
            with self.subTest(case):
                res, ref = check(["--case", case])
                self.assertEqual(res["result"], "passed", res)
                got, _ = run(loop.LocalDriver(order=[3, 1, 2, 0]), ["--case", case])
                self.assertEqual(fingerprint(got)[0], fingerprint(ref)[0])

    def test_a_registered_buffer_updated_in_place_beside_batchnorm(self) -> None:
        res, ref = check(["--case", "in-place-buffer"])  # failed before: BatchNorm's update bumped its version
        self.assertEqual(res["result"], "passed", res)
        got, _ = run(loop.LocalDriver(order=[3, 1, 2, 0]), ["--case", "in-place-buffer"])
        self.assertEqual(fingerprint(got)[0], fingerprint(ref)[0])

    def test_a_job_resumed_at_an_epochs_last_step_is_not_checked_and_says_so(self) -> None:
        first, _ = run(loop.LocalDriver(stop=3))
        assert first.replica is not None
        contexts = {lw: first.replica.remove(lw) for lw in range(N)}
        driver = loop.LocalDriver(start=3, replica=first.registry.encode(), contexts=contexts, check=2)
        run(driver)
        assert driver.check_result is not None
        self.assertEqual(driver.check_result["result"], "skipped")
        self.assertIn("1 step(s) left", driver.check_result["message"])


class DuringTheCheck(unittest.TestCase):
    def test_a_checkpoint_taken_during_the_check_holds_the_state_the_check_began_from(self) -> None:
        from easyscale import safetensors
        from easyscale.selfcheck import SelfCheck
        driver = loop.LocalDriver(check=2)
        s = loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS), driver)
        loop.install(s)
        try:
            torch.manual_seed(7)
            model = loop.DistributedDataParallel(toyloop.Net())
            train = toyloop.Images(48)
            ld = loop.DataLoader(train, batch_size=3, sampler=loop.DistributedSampler(train, seed=7), drop_last=True)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            loop.register(opt)
            before = s.registry.encode() if s.attached else None
            taken: list[bytes] = []
            for batch in ld:
                if before is None:
                    before = s.registry.encode()
                for x, y in batch:
                    batch.backward(F.cross_entropy(model(x), y))
                opt.step()
                if isinstance(s.driver, SelfCheck) and batch.step == 1:
                    taken.append(s.driver.checkpoint({"easyscale.step": "0"}))
                if batch.step >= 2 and not isinstance(s.driver, SelfCheck):
                    break
        finally:
            loop.install(None)
        self.assertEqual(len(taken), 2, "no checkpoint was taken during the check's two placements")
        assert before is not None
        want, _ = safetensors.loads(before)
        for data in taken:
            got, meta = safetensors.loads(data)
            self.assertEqual(meta["easyscale.step"], "0")
            self.assertEqual(set(got), set(want))
            for k in want:
                self.assertTrue(torch.equal(got[k], want[k]), k)


class RoundTrip(unittest.TestCase):
    def test_state_that_cannot_be_saved_is_refused_before_the_first_step(self) -> None:
        class Bad:
            def state_dict(self) -> dict[str, Any]:
                return {"fn": lambda step: step}

            def load_state_dict(self, state: dict[str, Any]) -> None:
                pass

        loop.install(loop.Session(Config(seed=7, logical_workers=N, micro_batch=3, steps=STEPS), loop.LocalDriver()))
        try:
            model = loop.DistributedDataParallel(toyloop.Net())
            train = toyloop.Images(48)
            ld = loop.DataLoader(train, batch_size=3, sampler=loop.DistributedSampler(train), drop_last=True)
            loop.register(torch.optim.SGD(model.parameters(), lr=0.1), schedule=Bad())
            with self.assertRaisesRegex(JobError, "cannot be checkpointed: schedule .Bad.: schedule.fn holds a function"):
                iter(ld)
        finally:
            loop.install(None)

    def test_stock_onecycle_lr_is_saved_with_its_annealing_method_by_name(self) -> None:
        model = toyloop.Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="linear")
        reg = Registry()
        for name, obj in (("model", model), ("optimizer", opt), ("lr_scheduler", sched)):
            reg.add(name, obj)
        data = reg.encode()
        other = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)  # anneal_func: cos
        reg.objects["lr_scheduler"] = other
        reg.decode(data)
        if hasattr(other, "_anneal_func_type"):  # torch 2.x keeps the strategy by its name
            self.assertEqual(other._anneal_func_type, "linear")
        else:  # torch 1.13 keeps the bound method, which the registry saves by name
            self.assertEqual(other.anneal_func, other._annealing_linear)
        self.assertEqual(reg.encode(), data)


class Schedulers(unittest.TestCase):
    def test_stock_schedulers_are_checkpointed_and_resumed(self) -> None:
        for sched in ("onecycle", "lambda", "plateau", "step"):
            with self.subTest(sched):
                argv = ["--sched", sched]
                res, ref = check(argv)
                self.assertEqual(res["result"], "passed", res)
                first, _ = run(loop.LocalDriver(stop=5), argv)
                assert first.replica is not None
                contexts = {lw: first.replica.remove(lw) for lw in range(N)}
                resumed, _ = run(loop.LocalDriver(start=5, replica=first.registry.encode(), contexts=contexts), argv)
                self.assertEqual(fingerprint(resumed)[0], fingerprint(ref)[0])


class Clipping(unittest.TestCase):
    def test_clip_grad_norm_sees_the_reduced_gradient_of_all_logical_workers(self) -> None:
        _, out = run(loop.LocalDriver(order=[2, 0, 3, 1]), [])
        assert out is not None
        seen = out["progress"]["norms"][0]
        # DDP's semantics by hand: each logical worker's gradient of step 0 on the initial model, the left fold
        # in logical-worker order, x float32(1/N); clip_grad_norm_ on that.
        torch.manual_seed(7)
        initial = toyloop.Net()
        train = toyloop.Images(48)
        sampler = LogicalSampler(len(train), N, 7)
        grads = []
        for lw in range(N):
            m = copy.deepcopy(initial).train()
            streams.seed_globals(7, lw, 0)
            idx, _ = sampler.next(Cursor(), lw, 3)
            x, y = default_collate([train[i] for i in idx])
            F.cross_entropy(m(x), y).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]))
        g = reduce.scale(reduce.fold(None, grads), N)
        at = 0
        for p in initial.parameters():
            p.grad = g[at:at + p.numel()].view_as(p)
            at += p.numel()
        want = float(torch.nn.utils.clip_grad_norm_(initial.parameters(), 0.5))
        self.assertEqual(seen, want)
        first = copy.deepcopy(initial)
        at = 0
        for p in first.parameters():
            p.grad = grads[0][at:at + p.numel()].view_as(p).clone()
            at += p.numel()
        self.assertNotEqual(float(torch.nn.utils.clip_grad_norm_(first.parameters(), 0.5)), seen,
                            "one logical worker's own gradient has the reduced one's norm: the test shows nothing")


if __name__ == "__main__":
    unittest.main()
