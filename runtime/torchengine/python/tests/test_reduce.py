import os
import subprocess
import sys
import tempfile
import unittest

import torch

from easyscale.reduce import fold, scale

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER = os.path.join(_ROOT, "tests", "chain_worker.py")


def run(sizes: list[int], mode: str = "chain") -> str:
    """Run one process per entry of sizes; return the digest every process got (they must agree)."""
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "PYTHONPATH": _ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        spec = ",".join(map(str, sizes))
        procs = [subprocess.Popen([sys.executable, _WORKER, d, str(r), spec, mode, f"{d}/out{r}"], env=env,
                                  stderr=subprocess.PIPE, text=True) for r in range(len(sizes))]
        for p in procs:
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise AssertionError(f"worker failed ({p.returncode}): {err[-2000:]}")
        digests = set()
        for r in range(len(sizes)):
            with open(f"{d}/out{r}") as f:
                digests.add(f.read())
        if len(digests) != 1:
            raise AssertionError(f"processes disagree: {digests}")
        return digests.pop()


class Chain(unittest.TestCase):
    def test_the_reduced_gradient_does_not_depend_on_the_placement(self) -> None:
        want = run([8])
        for sizes in ([4, 4], [3, 3, 2], [1, 2, 5]):
            with self.subTest(sizes=sizes):
                self.assertEqual(run(sizes), want)

    def test_gloo_all_reduce_of_pre_sums_depends_on_the_placement(self) -> None:
        # The teeth of the test above: the backend's own ring all-reduce changes the bits.
        self.assertNotEqual(run([3, 3, 2], "allreduce"), run([8], "allreduce"))


class Fold(unittest.TestCase):
    def test_fold_is_the_left_fold_and_scale_multiplies_by_float32_reciprocal(self) -> None:
        a, b, c = torch.tensor([1e8]), torch.tensor([1.0]), torch.tensor([-1e8])
        self.assertEqual(fold(None, [a, b, c]).item(), 0.0)  # (1e8 + 1) rounds back to 1e8
        self.assertEqual(a.item(), 1e8)  # the first slot is not modified
        x = scale(torch.tensor([3.0]), 3)
        self.assertEqual(x.item(), torch.tensor(3.0) .mul(torch.tensor(1 / 3, dtype=torch.float32)).item())
        with self.assertRaises(ValueError):
            fold(None, [])

    def test_scale_multiplies_by_the_reciprocal_of_its_own_world_in_the_tensors_dtype(self) -> None:
        # The reciprocal is made once per (world, dtype): a cached one must never be another world's or dtype's.
        for world, dtype in [(3, torch.float32), (7, torch.float32), (3, torch.float64), (3, torch.float32)]:
            with self.subTest(world=world, dtype=dtype):
                x = torch.tensor([1.0, 3.0, -5.5], dtype=dtype)
                want = x.clone().mul(torch.tensor(1 / world, dtype=dtype))
                self.assertTrue(torch.equal(scale(x, world), want))
                self.assertEqual(x.dtype, dtype)


if __name__ == "__main__":
    unittest.main()
