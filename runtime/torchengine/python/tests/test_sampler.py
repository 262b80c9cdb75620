import unittest

import torch
from torch.utils.data import DistributedSampler

from easyscale.sampler import Cursor, LogicalSampler


class MatchesDistributedSampler(unittest.TestCase):
    def test_each_logical_worker_reads_its_ddp_rank_shard_in_order(self) -> None:
        for n, world, b in [(100, 8, 4), (101, 3, 5), (7, 4, 1), (3, 5, 1)]:
            with self.subTest(n=n, world=world, b=b):
                s = LogicalSampler(n, world, seed=11)
                for rank in range(world):
                    ref = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=11)
                    cursor = Cursor()
                    for epoch in range(3):
                        ref.set_epoch(epoch)
                        shard = list(ref)
                        want = shard[: (len(shard) // b) * b]
                        got: list[int] = []
                        for _ in range(s.steps_per_epoch(b)):
                            self.assertEqual(cursor.epoch, epoch)
                            idx, cursor = s.next(cursor, rank, b)
                            got += idx
                        self.assertEqual(got, want)

    def test_a_cursor_taken_elsewhere_continues_the_same_order(self) -> None:
        a, b = LogicalSampler(50, 4, 3), LogicalSampler(50, 4, 3)
        c = Cursor()
        whole = []
        for _ in range(6):
            idx, c = a.next(c, 2, 3)
            whole += idx
        c2 = Cursor()
        first = []
        for _ in range(2):
            idx, c2 = a.next(c2, 2, 3)
            first += idx
        restored = Cursor.from_json(c2.to_json())
        rest = []
        for _ in range(4):
            idx, restored = b.next(restored, 2, 3)
            rest += idx
        self.assertEqual(first + rest, whole)


class Refusals(unittest.TestCase):
    def test_bad_values_name_the_field(self) -> None:
        s = LogicalSampler(10, 2, 0)
        for args, want in [((Cursor(), 2, 1), "logical worker 2"), ((Cursor(), 0, 6), "micro_batch 6"),
                           ((Cursor(-1, 0), 0, 1), "cursor"), ((Cursor(0, 6), 0, 1), "cursor")]:
            with self.subTest(args=args):
                with self.assertRaisesRegex(ValueError, want):
                    s.next(*args)
        for bad in [{"epoch": 1}, {"epoch": 1, "pos": "2"}, {"epoch": True, "pos": 0}, [1, 2]]:
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    Cursor.from_json(bad)
        with self.assertRaisesRegex(ValueError, "samples"):
            LogicalSampler(0, 1, 0)


if __name__ == "__main__":
    unittest.main()
