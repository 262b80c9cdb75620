"""Data order over N logical workers, independent of the physical workers.

The semantics are PyTorch's ``DistributedSampler(num_replicas=N, rank=r,
shuffle=True, seed=seed, drop_last=False)`` with ``set_epoch(e)``, followed per
logical worker by a DataLoader with ``drop_last=True`` -- the order a DDP job
with one rank per logical worker reads -- and match the native engine's
``runtime/data.Sampler``:

- epoch e's permutation is ``torch.randperm(n)`` from a generator seeded with
  ``seed + e`` (exactly DistributedSampler's), padded to ``shard_len * N`` by
  repeating it from the start;
- logical worker r's shard is padded positions r, r+N, r+2N, ...;
- a logical worker takes micro-batches of b in order; when fewer than b
  entries remain they are dropped and its cursor moves to the next epoch.

A :class:`Cursor` (epoch, position) is part of the logical worker's context:
it moves with the logical worker from process to process, so which process
runs it never changes what it reads.
"""

from __future__ import annotations

import dataclasses

import torch

__all__ = ["Cursor", "LogicalSampler"]


@dataclasses.dataclass(frozen=True)
class Cursor:
    """A logical worker's position in its shard: the epoch and the entries taken in it."""

    epoch: int = 0
    pos: int = 0

    def to_json(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos}

    @staticmethod
    def from_json(d: object) -> "Cursor":
        if not isinstance(d, dict) or set(d) != {"epoch", "pos"} or \
                not all(isinstance(d[k], int) and not isinstance(d[k], bool) for k in d):
            raise ValueError(f"cursor {d!r}: want {{\"epoch\": int, \"pos\": int}}")
        return Cursor(d["epoch"], d["pos"])


class LogicalSampler:
    """Splits ``n`` samples among ``world`` logical workers for the job ``seed``.

    ``shuffle=False`` keeps the data set's order (DistributedSampler's shuffle=False).

    Raises ValueError unless n >= 1 and world >= 1. The permutations of the two
    most recent epochs are cached, so :meth:`next` costs O(micro_batch).
    """

    def __init__(self, n: int, world: int, seed: int, shuffle: bool = True) -> None:
        if n < 1:
            raise ValueError(f"data set has {n} samples, want at least 1")
        if world < 1:
            raise ValueError(f"{world} logical workers, want at least 1")
        self.n, self.world, self.seed, self.shuffle = n, world, seed, shuffle
        self.shard_len = (n + world - 1) // world
        self._cache: dict[int, list[int]] = {}

    def steps_per_epoch(self, micro_batch: int) -> int:
        """Micro-batches each logical worker takes per epoch: floor(shard_len / micro_batch)."""
        return self.shard_len // micro_batch if micro_batch >= 1 else 0

    def check(self, cursor: Cursor, rank: int, micro_batch: int) -> None:
        """Raise ValueError naming the field when a restored cursor, rank or micro-batch is invalid."""
        if not 0 <= rank < self.world:
            raise ValueError(f"logical worker {rank} outside 0..{self.world - 1}")
        if not 1 <= micro_batch <= self.shard_len:
            raise ValueError(f"micro_batch {micro_batch} outside 1..{self.shard_len} (the shard length of "
                             f"{self.n} samples over {self.world} logical workers)")
        if cursor.epoch < 0 or not 0 <= cursor.pos <= self.shard_len:
            raise ValueError(f"cursor {cursor} outside epoch >= 0, pos 0..{self.shard_len}")

    def permutation(self, epoch: int) -> list[int]:
        """Epoch ``epoch``'s permutation of 0..n-1, as DistributedSampler draws it."""
        perm = self._cache.get(epoch)
        if perm is None and not self.shuffle:
            perm = list(range(self.n))
            self._cache = {epoch: perm}
        elif perm is None:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            perm = torch.randperm(self.n, generator=g).tolist()
            self._cache = {e: p for e, p in self._cache.items() if e == epoch - 1}
            self._cache[epoch] = perm
        return perm

    def batch_epoch(self, cursor: Cursor, micro_batch: int) -> int:
        """The epoch the next micro-batch at ``cursor`` belongs to."""
        return cursor.epoch + 1 if self.shard_len - cursor.pos < micro_batch else cursor.epoch

    def next(self, cursor: Cursor, rank: int, micro_batch: int) -> tuple[list[int], Cursor]:
        """Return the sample indices of logical worker ``rank``'s next micro-batch and the advanced cursor.

        After the batch the cursor moves to the next epoch at once when its shard
        cannot give another full micro-batch, so ``cursor.epoch`` always names the
        epoch of the next batch.
        """
        self.check(cursor, rank, micro_batch)
        epoch, pos = cursor.epoch, cursor.pos
        if self.shard_len - pos < micro_batch:
            epoch, pos = epoch + 1, 0
        perm = self.permutation(epoch)
        world, n = self.world, self.n
        q = rank + pos * world
        end = q + (micro_batch - 1) * world + 1
        if end <= n:  # inside the permutation: its slice (no padding reached)
            out = perm[q:end:world]
        else:
            out = [perm[(q + i * world) % n] for i in range(micro_batch)]
        pos += micro_batch
        if self.shard_len - pos < micro_batch:
            epoch, pos = epoch + 1, 0
        return out, Cursor(epoch, pos)
