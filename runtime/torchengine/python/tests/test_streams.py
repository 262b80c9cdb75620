import hashlib
import unittest

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

    def test_sample_keys_are_the_keys_of_each_index(self) -> None:
        indices = [0, 7, 59999, 123456789012, -1, 7]
        for seed, epoch, purpose in [(1, 0, streams.PURPOSE_AUGMENT), (2**40, 3, "x")]:
            self.assertEqual(streams.sample_keys(seed, epoch, indices, purpose),
                             [streams.key(seed, epoch, i, purpose) for i in indices])
        self.assertEqual(streams.sample_keys(1, 2, []), [])

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

    def test_sample_generator_is_keyed_by_epoch_and_index(self) -> None:
        a = torch.rand(4, generator=streams.sample_generator(1, 0, 17))
        self.assertTrue(torch.equal(a, torch.rand(4, generator=streams.sample_generator(1, 0, 17))))
        self.assertFalse(torch.equal(a, torch.rand(4, generator=streams.sample_generator(1, 1, 17))))


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
