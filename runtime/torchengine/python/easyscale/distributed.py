"""The part of ``torch.distributed`` a DDP training script calls, for ``import easyscale.distributed as dist``.

The runtime forms the process groups and reduces the gradients itself (a
gloo group per membership, the chain of :mod:`easyscale.reduce`), so a
script's own calls become:

- ``init_process_group(...)``: nothing to form (no rendezvous, no
  environment variables); the arguments are ignored;
- ``get_rank()``: this process's rank among the job's physical workers *now*
  (it changes when workers join or leave). Rank 0 holds logical worker 0: it
  is the process that logs, evaluates and saves, as DDP's rank 0 does; call
  it where it is used, not once at the start;
- ``get_world_size()``: N, the job's logical workers (the training's world
  size, whatever the physical workers);
- ``barrier()``, ``destroy_process_group()``: nothing to do (processes meet at
  every step boundary).

Collectives in user code (``all_reduce`` of a metric, ``broadcast``) are not
offered: every process computes the same values (``batch.loss`` is the mean
loss over all logical workers, the same everywhere), and the model outside the
micro-batch loop of rank 0 is logical worker 0's.
"""

from __future__ import annotations

from typing import Any

from . import loop

__all__ = ["init_process_group", "is_available", "is_initialized", "get_rank", "get_world_size", "barrier",
           "destroy_process_group"]


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Attach to the runtime's groups: the arguments (backend, init_method, rank, world_size) are ignored."""
    loop.session()


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def get_rank(group: Any = None) -> int:
    """This process's rank among the physical workers now (0 holds logical worker 0)."""
    s = loop.session()
    rank = getattr(s.driver, "rank", None)
    return s.rank_hint if rank is None else int(rank)


def get_world_size(group: Any = None) -> int:
    """N, the job's logical workers."""
    return loop.session().config.logical_workers


def barrier(*args: Any, **kwargs: Any) -> None:
    """Nothing to wait for: the processes meet at every step boundary."""


def destroy_process_group(*args: Any, **kwargs: Any) -> None:
    """Nothing to destroy: the runtime owns the groups."""


def __getattr__(name: str) -> Any:
    raise AttributeError(f"easyscale.distributed has no {name}: the runtime reduces the gradients itself, and "
                         "collectives in the training script are not supported (batch.loss is the mean loss over "
                         "every logical worker, the same in every process)")
