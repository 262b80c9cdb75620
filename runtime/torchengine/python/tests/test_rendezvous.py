"""The arrival barrier before a process group forms (easyscale.rendezvous)."""

import threading
import time
import unittest

import torch.distributed as dist

from easyscale import rendezvous


class ArrivalBarrierTest(unittest.TestCase):
    def test_returns_once_every_member_has_arrived(self) -> None:
        store = dist.HashStore()
        for rank in range(3):
            rendezvous.arrive(store, rank, 3)
        rendezvous.wait_all(store, 3, lambda: False, arrival_s=5)

    def test_waits_for_a_member_that_arrives_late(self) -> None:
        store = dist.HashStore()
        rendezvous.arrive(store, 0, 2)
        late = threading.Timer(0.2, rendezvous.arrive, (store, 1, 2))
        late.start()
        t0 = time.monotonic()
        rendezvous.wait_all(store, 2, lambda: False, arrival_s=5)
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        late.join()

    def test_a_cancelled_generation_gives_up_within_a_poll(self) -> None:
        store = dist.HashStore()
        rendezvous.arrive(store, 0, 2)
        cancelled = threading.Event()
        threading.Timer(0.1, cancelled.set).start()
        t0 = time.monotonic()
        with self.assertRaisesRegex(rendezvous.Cancelled, "1 of 2 members arrived"):
            rendezvous.wait_all(store, 2, cancelled.is_set, arrival_s=60)
        self.assertLess(time.monotonic() - t0, 0.1 + 10 * rendezvous.POLL_S)

    def test_members_that_never_arrive_end_the_wait_at_its_bound(self) -> None:
        store = dist.HashStore()
        with self.assertRaisesRegex(rendezvous.Cancelled, "only 0 of 2 members arrived within 0.1 s"):
            rendezvous.wait_all(store, 2, lambda: False, arrival_s=0.1)


if __name__ == "__main__":
    unittest.main()
