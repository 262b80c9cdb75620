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

The store itself is built by :func:`tcp_store`, the same on every torch
version: torch 2.4 made the libuv server the default, and a torch built
without libuv (Debian 13's 2.6) then refuses to build any TCPStore
("use_libuv was requested but PyTorch was build without libuv support").
So every store asks for the legacy server, which is the only one torch 1.13
has, with ``use_libuv=False`` exactly where this torch's TCPStore takes that
keyword (:func:`store_keywords`). ``init_process_group`` builds no store of
its own here: it is handed the generation's prefixed store.
"""

from __future__ import annotations

import datetime
import inspect
import re
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

__all__ = ["POLL_S", "LIBUV_DEFAULT_SINCE", "Cancelled", "arrive", "form", "takes_keyword", "store_keywords",
           "tcp_store"]

#: Seconds between two looks at the arrival counter and at the cancellation.
POLL_S = 0.02
#: The first torch release (major, minor) whose TCPStore asks for the libuv server by default; it has the
#: ``use_libuv`` keyword (https://pytorch.org/tutorials/intermediate/TCPStore_libuv_backend.html).
LIBUV_DEFAULT_SINCE = (2, 4)

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
#: A signature line pybind11 writes at the start of a bound ``__init__``'s docstring (one per overload, numbered
#: when there are several): ``__init__(self: torch._C._distributed_c10d.TCPStore, host_name: str, ...) -> None``.
_PYBIND_INIT = re.compile(r"^\s*(?:\d+\.\s*)?__init__\(", re.MULTILINE)


class Cancelled(RuntimeError):
    """The generation was cancelled (a member was lost) or its members did not all arrive in time."""


def takes_keyword(cls: Any, name: str) -> bool | None:
    """Whether constructing ``cls`` takes the keyword argument ``name``: True, False, or None when unknown.

    A Python class is read with :func:`inspect.signature`; a signature of
    ``**kwargs`` without ``name`` says nothing. torch's stores are pybind11
    classes, which have no signature inspect can read: for them the
    signatures pybind11 writes into ``cls.__init__.__doc__`` are read
    instead. None when neither says (e.g. docstrings stripped).
    """
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # a pybind11 class: "no signature found for builtin"
        params = None
    if params is not None:
        p = params.get(name)
        if p is not None and p.kind in _KEYWORD_KINDS:
            return True
        if not any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()):
            return False
    doc = getattr(getattr(cls, "__init__", None), "__doc__", None) or ""
    if not _PYBIND_INIT.search(doc):
        return None
    return re.search(rf"[(,]\s*{re.escape(name)}\s*:", doc) is not None


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string ("1.13.0a0", "2.6.0+cpu"); (0, 0) when it has none."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def store_keywords(store_class: Any = None, torch_version: str | None = None) -> dict[str, Any]:
    """The keyword arguments every TCPStore of the engine is built with: ``{"use_libuv": False}`` or ``{}``.

    ``use_libuv=False`` is passed exactly when ``store_class`` (default
    ``torch.distributed.TCPStore``) takes it, as :func:`takes_keyword` reads
    its signature; when the signature says nothing, when ``torch_version``
    (default ``torch.__version__``) is at least :data:`LIBUV_DEFAULT_SINCE`,
    the release that made libuv the default. torch 1.13 has no such keyword and
    runs the legacy server always.
    """
    cls = dist.TCPStore if store_class is None else store_class
    takes = takes_keyword(cls, "use_libuv")
    if takes is None:
        takes = _release(str(torch.__version__) if torch_version is None else torch_version) >= LIBUV_DEFAULT_SINCE
    return {"use_libuv": False} if takes else {}


def tcp_store(host: str, port: int, is_master: bool, timeout: datetime.timedelta,
              wait_for_workers: bool = True) -> Any:
    """A ``torch.distributed.TCPStore`` at ``host:port`` (port 0 with is_master: any free port, see ``.port``),
    on the legacy server on every torch version (:func:`store_keywords`).

    ``timeout`` bounds the store's connection and its waits. Raises
    RuntimeError (torch's) when the server cannot bind or the client cannot
    connect within ``timeout``.
    """
    return dist.TCPStore(host, port, None, is_master, timeout=timeout, wait_for_workers=wait_for_workers,
                         **store_keywords())


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
