"""Each consistency factor's handling matters: switched off, a changing allocation changes the digests."""

import unittest

import torch

from easyscale.replica import Ablation

from . import test_replica

FIXED = {0: [1, 1, 1, 1]}
CHANGING = {0: [4], 2: [2, 1, 1], 5: [2, 2]}


class EachFactorMatters(unittest.TestCase):
    def test_each_ablation_is_harmless_when_fixed_and_breaks_a_changing_allocation(self) -> None:
        ref = test_replica.train(FIXED)
        for name, ab in {
            "random streams keyed by the physical worker": Ablation(key_rng_by_worker=True),
            "sampler cursor not carried with a moving logical worker": Ablation(drop_cursor_on_move=True),
            "buffers kept per physical worker": Ablation(buffers_per_worker=True),
            "gradients pre-summed per process": Ablation(grouped_reduction=True),
        }.items():
            with self.subTest(name):
                self.assertEqual(test_replica.train(FIXED, ablation=ab), ref,
                                 "the ablation changed the fixed run: the test would not isolate the factor")
                self.assertNotEqual(test_replica.train(CHANGING, ablation=ab), ref,
                                    "the changing allocation still matched: the factor is not exercised")

    def test_a_process_with_another_thread_count_changes_the_digests(self) -> None:
        # The fingerprint check refuses such a worker (numerics.differences names "threads").
        ref = test_replica.train(FIXED)
        try:
            got = test_replica.train(CHANGING, threads_of=lambda physical: 1 + physical % 2)
        finally:
            torch.set_num_threads(1)
        self.assertNotEqual(got, ref)


if __name__ == "__main__":
    unittest.main()
