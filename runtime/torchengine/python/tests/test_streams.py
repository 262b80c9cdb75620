import hashlib
import unittest
from unittest import mock

import torch
from torch import nn

from easyscale import streams


class Keys(unittest.TestCase):
    def test_keys_depend_on_every_field_only(self) -> None:
        base = streams.key(1, 2, 3, "p")
        self.assertEqual(base, streams.key(1, 2, 3, "p"))
        for other in [(2, 2, 3, "p"), (1, 3, 3, "p"), (1, 2, 4, "p"), (1, 2, 3, "q"), (12, 3, "p")]:
            self.assertNotEqual(base, streams.key(*other), other)
        self.assertLess(base, 1 << 63)

    def test_keys_are_the_first_bytes_of_the_sha256_of_the_joined_fields(self) -> None:
        raw = hashlib.sha256(b"1\x1f2\x1f3\x1fp").digest()
        self.assertEqual(streams.key(1, 2, 3, "p"), int.from_bytes(raw[:8], "little") & ((1 << 63) - 1))

    def test_worker_keys_are_the_keys_of_each_logical_worker(self) -> None:
        lws = [0, 7, 3, 123456789012, -1, 7]
        for seed, step, purpose in [(1, 0, streams.PURPOSE_AUGMENT), (2**40, 3, "x"), (5, 9, streams.PURPOSE_MICRO_BATCH)]:
            self.assertEqual(streams.worker_keys(seed, lws, step, purpose),
                             [streams.key(seed, lw, step, purpose) for lw in lws])
        self.assertEqual(streams.worker_keys(1, [], 2), [])

    def test_dropout_mask_depends_on_the_logical_worker_not_on_what_ran_before(self) -> None:
        drop = nn.Dropout(0.5)
        x = torch.ones(64)
        streams.seed_globals(5, 3, 10)
        want = drop(x)
        torch.rand(1000)  # another logical worker's draws in the same process
        streams.seed_globals(5, 3, 10)
        self.assertTrue(torch.equal(drop(x), want))
        streams.seed_globals(5, 4, 10)
        self.assertFalse(torch.equal(drop(x), want))

    def test_seed_globals_key_is_seed_globals_from_its_key(self) -> None:
        import random
        import numpy as np
        k = streams.seed_globals(5, 3, 10)
        # gauss() leaves its pair's second normal cached: seeding must drop it, as random.seed does.
        want = (torch.rand(8), random.random(), random.gauss(0, 1), np.random.rand(3))
        streams.seed_globals_key(k)
        got = (torch.rand(8), random.random(), random.gauss(0, 1), np.random.rand(3))
        self.assertTrue(torch.equal(want[0], got[0]))
        self.assertEqual(want[1:3], got[1:3])
        self.assertTrue((want[3] == got[3]).all())
        random.seed(k)
        self.assertEqual(random.random(), want[1])

    def test_cuda_generators_are_seeded_once_cuda_is_initialized_without_asking_the_driver(self) -> None:
        # torch.cuda.is_available() queries the driver (about 5 us a micro-batch); an initialized CUDA is available.
        class Gen:
            seeds: list[int] = []

            def manual_seed(self, k: int) -> None:
                self.seeds.append(k)

        def asked() -> bool:
            raise AssertionError("torch.cuda.is_available() was called")
        gens = [Gen(), Gen()]
        with mock.patch.object(torch.cuda, "is_available", asked), \
                mock.patch.object(torch.cuda, "is_initialized", lambda: True), \
                mock.patch.object(torch.cuda, "default_generators", gens, create=True):
            streams.seed_globals_key(12345)
        self.assertEqual(Gen.seeds, [12345, 12345])
        Gen.seeds.clear()
        with mock.patch.object(torch.cuda, "is_available", asked), \
                mock.patch.object(torch.cuda, "is_initialized", lambda: False):
            streams.seed_globals_key(12345)
        self.assertEqual(Gen.seeds, [])


class Guard(unittest.TestCase):
    def test_manual_seed_inside_the_loop_is_refused_and_restored_after(self) -> None:
        with streams.GlobalSeedGuard():
            with self.assertRaisesRegex(streams.ForbiddenSeedError, "seeds torch's generators per logical"):
                torch.manual_seed(0)
            with self.assertRaises(streams.ForbiddenSeedError):
                torch.random.manual_seed(0)
            streams.seed_globals(1, 0, 0)  # the runtime's own seeding still works
        torch.manual_seed(0)


if __name__ == "__main__":
    unittest.main()
