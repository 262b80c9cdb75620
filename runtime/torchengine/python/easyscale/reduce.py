"""Placement-independent gradient reduction over torch.distributed.

The reduced gradient of one step is defined as the left fold of the logical
workers' gradients in increasing logical-worker order, every addition rounded
to float32, then multiplied by float32(1/N):

    G = fl(fl(...fl(fl(g_0 + g_1) + g_2)... + g_{N-1}) * fl(1/N))

the same definition as the native engine's (``runtime/trainer/reduce.go``).
It does not depend on how many processes there are or which logical workers
each runs, provided each process holds a *contiguous* range of logical workers
and the processes are ranked by their ranges. gloo's and NCCL's own
``all_reduce`` do not have this property: a ring reduce-scatter adds an
element's contributions in an order that depends on its chunk
(docs/pytorch-bits.md §3).

The *chain* (NOTES §3, checked there with 0 of 262,144 elements differing):
rank 0 folds its logical workers (autograd accumulation into ``.grad`` from
None is exactly that fold, so it needs no per-worker slot) and sends the
partial sum to rank 1; rank r > 0 keeps one gradient slot per logical worker,
receives the partial of ranks < r, adds its slots in order and passes the
result on; the last rank scales by float32(1/N) and broadcasts. The flat
gradient is cut into chunks so that rank r folds chunk c while rank r-1 sends
chunk c+1 (a pipelined chain). Each link carries the gradient once in each
direction, about 2x the bytes, like a ring all-reduce.
"""

from __future__ import annotations

import functools
from typing import Sequence

import torch
import torch.distributed as dist

__all__ = ["DEFAULT_CHUNK_ELEMENTS", "fold", "scale", "chain"]

#: Elements per pipelined chunk (1 MiB of float32).
DEFAULT_CHUNK_ELEMENTS = 1 << 18


def fold(acc: torch.Tensor | None, slots: Sequence[torch.Tensor]) -> torch.Tensor:
    """Left-fold ``slots`` onto ``acc`` in order (``acc`` is updated in place when given).

    Returns the folded tensor; with acc None the first slot starts the fold
    (copied, so the slot is left intact). Raises ValueError on no input.
    """
    it = iter(slots)
    if acc is None:
        try:
            acc = next(it).clone()
        except StopIteration:
            raise ValueError("fold of no gradients") from None
    for g in it:
        acc.add_(g)
    return acc


def scale(acc: torch.Tensor, world: int) -> torch.Tensor:
    """Multiply ``acc`` in place by float32(1/world), the mean's definition here."""
    return acc.mul_(_reciprocal(world, acc.dtype))


@functools.lru_cache(maxsize=16)
def _reciprocal(world: int, dtype: torch.dtype) -> torch.Tensor:
    """fl(1/world) in ``dtype``, a 0-dim CPU tensor made once (making it took about as long as the
    multiplication of a LeNet's gradient; nothing writes to it)."""
    return torch.tensor(1.0 / world, dtype=dtype)


def chain(local: torch.Tensor, slots: Sequence[torch.Tensor], world: int,
          group: dist.ProcessGroup | None = None,
          chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> torch.Tensor:
    """Reduce one step's flat float32 gradient over the processes of ``group``; return it.

    On rank 0, ``local`` is the fold of its logical workers' gradients (what
    autograd accumulated) and ``slots`` is empty. On rank r > 0, ``local`` is a
    buffer of the gradient's size that receives the result, and ``slots`` are its
    logical workers' gradients in increasing logical-worker order. ``world`` is
    the number of logical workers N. Every rank returns ``local`` holding G.

    Tensors on a GPU are reduced through host copies (gloo's send and
    receive take CPU tensors); the result is copied back into ``local``.

    Collective errors (a dead peer, the group's timeout) propagate as
    RuntimeError: the caller aborts the step and rebuilds the group.
    """
    if local.dtype != torch.float32 or local.dim() != 1:
        raise ValueError(f"chain reduces flat float32 gradients, got {local.dtype}{list(local.shape)}")
    size = dist.get_world_size(group) if group is not None or dist.is_initialized() else 1
    rank = dist.get_rank(group) if size > 1 else 0
    if size == 1:
        if slots:
            fold(local, slots)
        return scale(local, world)
    if rank == 0 and slots:
        raise ValueError("rank 0's gradient is its autograd accumulation: pass no slots")
    if rank > 0 and not slots:
        raise ValueError(f"rank {rank} holds no logical worker: every process of the chain must hold one")
    if local.device.type != "cpu" or any(g.device.type != "cpu" for g in slots):
        # gloo's point-to-point calls take CPU tensors only, so a GPU job's
        # chain runs on host copies; a float32 addition rounds the same on
        # either side (IEEE 754), so G does not change. Rank 0's fold and
        # each slot go to the host, G comes back; rank r > 0's buffer is
        # only received into, so its host buffer is fresh.
        host = local.cpu() if rank == 0 else torch.empty(local.numel(), dtype=local.dtype)
        return local.copy_(chain(host, [g.cpu() for g in slots], world, group, chunk_elements))
    n = local.numel()
    bounds = [(b, min(b + chunk_elements, n)) for b in range(0, n, chunk_elements)] or [(0, 0)]
    peer_prev = _global(group, rank - 1) if rank > 0 else None
    peer_next = _global(group, rank + 1) if rank < size - 1 else None
    recvs = [dist.irecv(local[b:e], src=peer_prev, group=group) for b, e in bounds] if peer_prev is not None else []
    sends = []
    for i, (b, e) in enumerate(bounds):
        if recvs:
            recvs[i].wait()
            part = local[b:e]
            for g in slots:
                part.add_(g[b:e])
        if peer_next is not None:
            sends.append(dist.isend(local[b:e], dst=peer_next, group=group))
    for s in sends:
        s.wait()
    last = size - 1
    if rank == last:
        scale(local, world)
    dist.broadcast(local, src=_global(group, last), group=group)
    return local


def _global(group: dist.ProcessGroup | None, rank: int) -> int:
    """The global rank of ``rank`` in ``group`` (point-to-point calls take global ranks).

    ``dist.get_global_rank`` is public in torch 1.13 and 2.x; the private
    ``_get_global_rank`` this called before warns in 2.x that it is deprecated.
    """
    if group is None:
        return rank
    return dist.get_global_rank(group, rank)
