"""Forming one generation's gloo process group so that a lost member cannot hold the others.

``torch.distributed.init_process_group`` blocks in C++ until every rank has
published its address in the store, for as long as the group's timeout; a
member that dies (or is cut off) before it arrives leaves the others blocked
there, and nothing on the control channel can reach a thread blocked in C++.
So the members first meet at an *arrival barrier* that Python polls: each adds
1 to a counter in the generation's store and waits, in steps of
:data:`POLL_S`, until the counter reaches the group's size. Between polls it
looks at ``cancelled()``: the Go side, which sees every member's liveness
through its heartbeats, cancels the generation as soon as one member is lost
(a ``cancel`` request answered by the control thread), and the survivors
return within one poll instead of at a timeout. Only once all have arrived
does ``init_process_group`` run, and then it waits for peers that are alive
and connecting, bounded by the group's (short) timeout.

The barrier waits at most ``arrival_s`` on its own (a Go side that died
closes the control channel, which cancels too).
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Callable

import torch.distributed as dist

__all__ = ["POLL_S", "Cancelled", "arrive", "form"]

#: Seconds between two looks at the arrival counter and at the cancellation.
POLL_S = 0.02


class Cancelled(RuntimeError):
    """The generation was cancelled (a member was lost) or its members did not all arrive in time."""


def arrive(store: Any, rank: int, size: int) -> None:
    """Count this member in at ``store`` (the generation's own prefix store).

    A separate function so that tests can hold one member back before it
    arrives (python/tests/toyjob.py).
    """
    store.add("easyscale/arrived", 1)


def wait_all(store: Any, size: int, cancelled: Callable[[], bool], arrival_s: float) -> None:
    """Wait until ``size`` members have arrived at ``store``; raise Cancelled when cancelled or past arrival_s."""
    deadline = time.monotonic() + arrival_s
    while True:
        n = store.add("easyscale/arrived", 0)
        if n >= size:
            return
        if cancelled():
            raise Cancelled(f"cancelled with {n} of {size} members arrived (a member was lost)")
        if time.monotonic() > deadline:
            raise Cancelled(f"only {n} of {size} members arrived within {arrival_s:g} s")
        time.sleep(POLL_S)


def form(store: Any, generation: int, rank: int, size: int, timeout_s: float,
         cancelled: Callable[[], bool], arrival_s: float = 600.0) -> None:
    """Make this process rank ``rank`` of generation ``generation``'s gloo group of ``size`` members.

    ``store`` is the TCPStore hosted by rank 0; ``timeout_s`` bounds every
    collective of the group (and its connection setup, once all have
    arrived). Raises Cancelled (see wait_all) or RuntimeError from gloo.
    """
    prefixed = dist.PrefixStore(f"generation-{generation}", store)
    arrive(prefixed, rank, size)
    wait_all(prefixed, size, cancelled, arrival_s)
    dist.init_process_group("gloo", store=prefixed, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout_s))
