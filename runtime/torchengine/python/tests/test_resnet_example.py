"""examples/torch-resnet/model.py: 1 and several replicas give the same digests (CPU).

The example reads MNIST's idx files; the test writes a small set of random
digits in that format, so it needs no data set and stays fast (ResNet-18 with
the CIFAR stem, 4 logical workers of 2 samples, 2 steps).
"""

import gzip
import os
import struct
import tempfile
import unittest

import torch

import easyscale
from easyscale.job import load_module
from easyscale.reduce import fold, scale
from easyscale.replica import Ablation, Replica

MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "examples", "torch-resnet", "model.py")
N, B, STEPS = 4, 2, 2


def write_idx(path: str, data: torch.Tensor) -> None:
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, data.dim()) + struct.pack(">" + "I" * data.dim(), *data.shape))
        f.write(data.numpy().tobytes())


def fake_mnist(root: str, n: int) -> None:
    g = torch.Generator().manual_seed(5)
    for prefix in ("train", "t10k"):
        write_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"),
                  torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8))
        write_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"),
                  torch.randint(0, 10, (n,), generator=g, dtype=torch.uint8))


def layout(sizes: list[int]) -> list[list[int]]:
    out, at = [], 0
    for s in sizes:
        out.append(list(range(at, at + s)))
        at += s
    return out


class ResNetExample(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        try:
            import torchvision  # noqa: F401
        except ImportError as e:
            if os.environ.get("CI"):
                raise
            raise unittest.SkipTest(f"the ResNet example needs torchvision (python3-torchvision): {e}")
        cls.tmp = tempfile.TemporaryDirectory()
        fake_mnist(cls.tmp.name, 40)
        cls.setup_fn = staticmethod(load_module(MODEL))
        cls.cache: dict[str, list[str]] = {}

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def config(self, seed: int = 3) -> easyscale.Config:
        return easyscale.Config(seed=seed, logical_workers=N, micro_batch=B, steps=STEPS,
                                params={"data_dir": self.tmp.name, "warmup_steps": 1})

    def train(self, schedule: dict[int, list[int]], seed: int = 3, ablation: Ablation = Ablation()) -> list[str]:
        """One Replica per physical worker in this process; schedule maps a step to the sizes from then on."""
        key = repr((sorted(schedule.items()), seed, ablation))
        if key not in self.cache:
            self.cache[key] = self._train(schedule, seed, ablation)
        return self.cache[key]

    def _train(self, schedule: dict[int, list[int]], seed: int, ablation: Ablation) -> list[str]:
        cfg = self.config(seed)
        replicas: list[Replica] = []
        digests = []
        for step in range(STEPS):
            if step in schedule:
                contexts = {lw: r.remove(lw) for r in replicas for lw in r.logical_workers()}
                state = replicas[0].replica_state() if replicas else None
                want = layout(schedule[step])
                while len(replicas) < len(want):
                    r = Replica(self.setup_fn(cfg), cfg, [], ablation=ablation)
                    if state is not None:
                        r.load_replica_state(state)
                    replicas.append(r)
                replicas = replicas[:len(want)]
                for r, lws in zip(replicas, want):
                    for lw in lws:
                        r.add(lw, contexts.get(lw))
            results = [r.compute(step, first_in_chain=(i == 0)) for i, r in enumerate(replicas)]
            acc = results[0].local
            for res in results[1:]:
                fold(acc, res.slots)
            scale(acc, N)
            for r in replicas:
                r.apply(acc.clone())
            digests.append(replicas[0].digest())
        return digests

    def test_the_model_is_resnet18_with_batchnorm(self) -> None:
        job = self.setup_fn(self.config())
        self.assertEqual(sum(p.numel() for p in job.model.parameters()), 11_173_962)
        self.assertTrue(any(isinstance(m, torch.nn.BatchNorm2d) for m in job.model.modules()))
        x, _ = job.train_set[0]
        self.assertEqual(tuple(x.shape), (3, 32, 32))

    def test_one_and_several_replicas_give_the_same_digests(self) -> None:
        want = self.train({0: [1, 1, 1, 1]})
        self.assertEqual(len(set(want)), STEPS, "the digest must change every step")
        for name, schedule in {
            "one replica": {0: [4]},
            "two replicas": {0: [2, 2]},
            "1 -> 3 replicas mid-run": {0: [4], 1: [2, 1, 1]},
        }.items():
            with self.subTest(name):
                self.assertEqual(self.train(schedule), want)

    def test_another_seed_gives_other_digests(self) -> None:
        self.assertNotEqual(self.train({0: [4]}, seed=4), self.train({0: [4]}))

    def test_batchnorm_buffers_shared_by_the_logical_workers_of_a_replica_change_the_digests(self) -> None:
        self.assertNotEqual(self.train({0: [4]}, ablation=Ablation(buffers_per_worker=True)),
                            self.train({0: [1, 1, 1, 1]}))


if __name__ == "__main__":
    unittest.main()
