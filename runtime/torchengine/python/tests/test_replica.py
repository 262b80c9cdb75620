import unittest

import torch

import easyscale
from easyscale.job import JobError
from easyscale.reduce import fold, scale
from easyscale.replica import Ablation, NonFiniteLoss, Replica
from easyscale.sampler import Cursor
from typing import Callable

from . import toyjob

N, B = 4, 3


def config(seed: int = 7) -> easyscale.Config:
    return easyscale.Config(seed=seed, logical_workers=N, micro_batch=B, steps=8)


def layout(sizes: list[int]) -> list[list[int]]:
    out, at = [], 0
    for s in sizes:
        out.append(list(range(at, at + s)))
        at += s
    return out


def train(schedule: dict[int, list[int]], steps: int = 8, seed: int = 7, ablation: Ablation = Ablation(),
          threads_of: Callable[[int], int] = lambda physical: 1) -> list[str]:
    """Run the toy job in this process with one Replica per physical worker.

    schedule maps a step to the logical workers per physical worker from then on;
    the chain is folded locally (the multi-process chain is tested in test_reduce).
    """
    cfg = config(seed)
    replicas: list[Replica] = []
    digests = []
    for step in range(steps):
        if step in schedule:
            want = layout(schedule[step])
            contexts = {}
            for r in replicas:
                for lw in r.logical_workers():
                    contexts[lw] = r.remove(lw)
            state = replicas[0].replica_state() if replicas else None
            while len(replicas) < len(want):
                r = Replica(toyjob.setup(cfg), cfg, [], ablation=ablation)
                if state is not None:
                    r.load_replica_state(state)
                replicas.append(r)
            replicas = replicas[:len(want)]
            for physical, (r, lws) in enumerate(zip(replicas, want)):
                r.physical_rank = physical
                for lw in lws:
                    r.add(lw, contexts.get(lw))
        results = []
        for i, r in enumerate(replicas):
            torch.set_num_threads(threads_of(i))
            results.append(r.compute(step, first_in_chain=(i == 0)))
        torch.set_num_threads(1)
        acc = results[0].local
        for res in results[1:]:
            fold(acc, res.slots)
        scale(acc, N)
        for r in replicas:
            r.apply(acc.clone())
        digests.append(replicas[0].digest())
    return digests


class Consistency(unittest.TestCase):
    def test_any_placement_gives_the_one_worker_per_logical_worker_digests(self) -> None:
        want = train({0: [1, 1, 1, 1]})
        for name, schedule in {
            "one process": {0: [4]},
            "uneven": {0: [3, 1]},
            "changing 1 -> 3 -> 2": {0: [4], 2: [2, 1, 1], 5: [2, 2]},
            "grow 2 -> 4 mid-run": {0: [2, 2], 4: [1, 1, 1, 1]},
        }.items():
            with self.subTest(name):
                self.assertEqual(train(schedule), want)

    def test_a_replica_loaded_from_anothers_state_shares_no_tensor_with_it(self) -> None:
        # torch 2.x's Optimizer.load_state_dict keeps tensors whose dtype and device match (1.13 copied them):
        # shared momentum buffers were updated by both replicas' steps ("changing" above failed on torch 2.6)
        cfg = config()
        a = Replica(toyjob.setup(cfg), cfg, [0])
        a.apply(a.compute(0, True).local)
        b = Replica(toyjob.setup(cfg), cfg, [])
        b.load_replica_state(a.replica_state())
        ptrs = {t.data_ptr() for s in a.job.optimizer.state.values() for t in s.values() if torch.is_tensor(t)}
        self.assertTrue(ptrs, "the optimizer of the toy job keeps momentum buffers")
        for s in b.job.optimizer.state.values():
            for key, t in s.items():
                if torch.is_tensor(t):
                    self.assertNotIn(t.data_ptr(), ptrs, f"optimizer state {key} is the other replica's tensor")

    def test_another_seed_gives_other_digests(self) -> None:
        self.assertNotEqual(train({0: [4]}, seed=8), train({0: [4]}))

    def test_an_aborted_step_redone_gives_the_same_digests(self) -> None:
        cfg = config()
        r = Replica(toyjob.setup(cfg), cfg, list(range(N)))
        want = train({0: [4]}, steps=3)
        got = []
        for step in range(3):
            if step == 1:
                r.compute(step, True)
                r.abort()
            res = r.compute(step, True)
            r.apply(scale(res.local, N))
            got.append(r.digest())
        self.assertEqual(got, want)

    def test_the_transform_draws_one_stream_per_micro_batch_keyed_by_logical_worker_and_step(self) -> None:
        cfg = config()
        job = toyjob.setup(cfg)
        draws: list[float] = []
        job.transform = lambda x, g: (draws.append(float(torch.rand((), generator=g))), x)[1]
        r = Replica(job, cfg, [2, 3])
        r.compute(5, False)
        want = []
        for lw in (2, 3):
            g = torch.Generator()
            g.manual_seed(easyscale.streams.key(cfg.seed, lw, 5, easyscale.streams.PURPOSE_AUGMENT))
            want += [float(x) for x in torch.rand(B, generator=g)]  # the micro-batch's samples in order
        self.assertEqual(draws, want)

    def test_a_micro_batch_is_read_whole_before_the_transform_runs_on_its_samples_in_order(self) -> None:
        # As a plain script's two passes do: one pass of reads, then one of transforms (the same draws, since the
        # transform draws only from its generator). Alternating them cost about 2 % of a LeNet step (BENCHMARKS.md).
        cfg = config()
        job = toyjob.setup(cfg)
        calls: list[tuple[str, int]] = []
        tags: dict[int, int] = {}  # id of a sample's input (alive while the micro-batch is built) -> its index
        train, inner = job.train_set, job.transform
        assert inner is not None

        class Logged(torch.utils.data.Dataset):
            def __len__(self) -> int:
                return len(train)

            def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
                calls.append(("read", i))
                x, y = train[i]
                x = x.clone()
                tags[id(x)] = i
                return x, y

        def transform(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
            calls.append(("transform", tags[id(x)]))
            return inner(x, g)
        job.train_set, job.transform = Logged(), transform
        r = Replica(job, cfg, [1, 2])
        r.compute(0, False)
        want = []
        for lw in (1, 2):
            idx, _ = r.sampler.next(Cursor(), lw, B)
            want += [("read", i) for i in idx] + [("transform", i) for i in idx]
        self.assertEqual(calls, want)


class Refusals(unittest.TestCase):
    def test_a_nan_loss_names_the_logical_worker_and_step(self) -> None:
        cfg = config()
        job = toyjob.setup(cfg)
        job.loss = lambda out, y: out.sum() * float("nan")
        with self.assertRaisesRegex(NonFiniteLoss, "logical worker 0 at step 0"):
            Replica(job, cfg, [0]).compute(0, True)

    def test_manual_seed_in_the_model_is_refused(self) -> None:
        cfg = config()
        job = toyjob.setup(cfg)
        inner = job.model.forward

        def forward(x: torch.Tensor) -> torch.Tensor:
            torch.manual_seed(1)
            return inner(x)
        job.model.forward = forward  # type: ignore[method-assign]
        with self.assertRaisesRegex(easyscale.streams.ForbiddenSeedError, "manual_seed"):
            Replica(job, cfg, [0]).compute(0, True)

    def test_a_dataloader_is_refused(self) -> None:
        cfg = config()
        job = toyjob.setup(cfg)
        job.train_set = torch.utils.data.DataLoader(job.train_set, num_workers=2)
        with self.assertRaisesRegex(JobError, "DataLoader"):
            Replica(job, cfg, [0])

    def test_an_unused_parameter_is_named(self) -> None:
        cfg = config()
        job = toyjob.setup(cfg)
        job.model.register_parameter("unused", torch.nn.Parameter(torch.zeros(2)))
        job.optimizer.add_param_group({"params": [job.model.unused]})
        with self.assertRaisesRegex(JobError, "unused received no gradient"):
            Replica(job, cfg, [0]).compute(0, True)


if __name__ == "__main__":
    unittest.main()
