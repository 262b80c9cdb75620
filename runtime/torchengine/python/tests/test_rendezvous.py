"""The arrival barrier before a process group forms, and the store it meets at (easyscale.rendezvous)."""

import datetime
import threading
import time
import unittest
from typing import Any

import torch
import torch.distributed as dist

from easyscale import reduce, rendezvous

# The signature pybind11 writes into TCPStore.__init__.__doc__, as torch 1.13 (Debian 12) has it.
DOC_1_13 = ("__init__(self: torch._C._distributed_c10d.TCPStore, host_name: str, port: int, "
            "world_size: Optional[int] = None, is_master: bool = False, "
            "timeout: datetime.timedelta = datetime.timedelta(seconds=300), wait_for_workers: bool = True, "
            "multi_tenant: bool = False) -> None\n")
# The same for torch 2.4+ (2.6 in Debian 13): two more keywords, use_libuv last.
DOC_2_6 = DOC_1_13.replace("multi_tenant: bool = False)", "multi_tenant: bool = False, "
                           "master_listen_fd: Optional[int] = None, use_libuv: bool = True)")


def pybind_like(doc: str | None) -> type:
    """A class that, like a pybind11 class, has a (*args, **kwargs) constructor and its signatures in the doc."""
    class Store:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass
    Store.__init__.__doc__ = doc
    return Store


class StoreWith:
    """A TCPStore as a Python class of torch 2.4+ would declare it."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=300), wait_for_workers: bool = True,
                 multi_tenant: bool = False, master_listen_fd: int | None = None, use_libuv: bool = True) -> None:
        pass


class StoreWithout:
    """A TCPStore as a Python class of torch 1.13 would declare it."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=300), wait_for_workers: bool = True,
                 multi_tenant: bool = False) -> None:
        pass


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



class StoreKeywordsTest(unittest.TestCase):
    def test_use_libuv_false_is_passed_exactly_when_the_signature_has_the_keyword(self) -> None:
        for name, cls, want in [
            ("a Python signature with use_libuv", StoreWith, {"use_libuv": False}),
            ("a Python signature without it", StoreWithout, {}),
            ("torch 2.6's pybind11 signature", pybind_like(DOC_2_6), {"use_libuv": False}),
            ("torch 1.13's pybind11 signature", pybind_like(DOC_1_13), {}),
            ("an overloaded pybind11 constructor, one overload with use_libuv",
             pybind_like("__init__(*args, **kwargs)\nOverloaded function.\n\n1. " + DOC_1_13 + "\n2. " + DOC_2_6),
             {"use_libuv": False}),
        ]:
            with self.subTest(name):
                # The signature decides, whatever the version says.
                self.assertEqual(rendezvous.store_keywords(cls, torch_version="1.13.0a0"), want)
                self.assertEqual(rendezvous.store_keywords(cls, torch_version="2.6.0"), want)

    def test_without_a_readable_signature_the_version_decides(self) -> None:
        for doc in (None, "A store."):
            for version, want in [("1.13.0a0", {}), ("2.3.1", {}), ("2.4.0", {"use_libuv": False}),
                                  ("2.6.0+cpu", {"use_libuv": False}), ("", {})]:
                with self.subTest(doc=doc, version=version):
                    self.assertIsNone(rendezvous.takes_keyword(pybind_like(doc), "use_libuv"))
                    self.assertEqual(rendezvous.store_keywords(pybind_like(doc), torch_version=version), want)

    def test_a_keyword_only_or_positional_only_parameter_is_read_as_such(self) -> None:
        class KeywordOnly:
            def __init__(self, host: str, *, use_libuv: bool = True) -> None:
                pass

        class PositionalOnly:
            def __init__(self, host: str, use_libuv: bool = True, /) -> None:
                pass
        self.assertIs(rendezvous.takes_keyword(KeywordOnly, "use_libuv"), True)
        self.assertIs(rendezvous.takes_keyword(PositionalOnly, "use_libuv"), False)

    def test_the_installed_torch_is_read_from_its_signature(self) -> None:
        takes = rendezvous.takes_keyword(dist.TCPStore, "use_libuv")
        release = rendezvous._release(str(torch.__version__))
        self.assertIsNotNone(takes, f"torch {torch.__version__}: TCPStore's signature cannot be read")
        if release < (2, 2):
            self.assertFalse(takes, f"torch {torch.__version__}")
        if release >= rendezvous.LIBUV_DEFAULT_SINCE:
            self.assertTrue(takes, f"torch {torch.__version__}")

    def test_a_store_and_a_one_member_group_form_on_the_installed_torch(self) -> None:
        timeout = datetime.timedelta(seconds=10)
        server = rendezvous.tcp_store("127.0.0.1", 0, True, timeout, wait_for_workers=False)
        client = rendezvous.tcp_store("127.0.0.1", server.port, False, timeout)
        client.set("k", b"v")
        self.assertEqual(server.get("k"), b"v")
        rendezvous.form(server, 0, 0, 1, 10.0, lambda: False)
        try:
            self.assertEqual(dist.get_world_size(), 1)
            self.assertEqual(reduce._global(dist.new_group([0]), 0), 0)
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
