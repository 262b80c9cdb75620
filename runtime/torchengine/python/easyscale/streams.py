"""Random streams keyed by logical identity.

Every random draw a logical worker makes (dropout masks, augmentation, any
``torch.rand*`` in the user's model) must depend on (seed, logical worker,
step, purpose) only, never on which process runs the logical worker or what ran
before it there (docs/pytorch-bits.md §2 "Dropout"; EasyScale §3.2). The
runtime therefore re-seeds torch's global generators from such a key before
each micro-batch, which covers stock ``nn.Dropout`` without any change to the
model, and hands the Job API's transform a generator seeded once per
micro-batch from (seed, logical worker, step, "augment"), drawn by the
micro-batch's samples in order (as the native engine's rng.Augment stream).
A logical worker's micro-batch at a step is the same on every placement, so
are its draws. (Until December 2026 that generator was re-seeded per sample
from (seed, epoch, sample index); 256 seedings a step cost about 1 % of a
LeNet step, and the digests of jobs with a transform changed with it.)

Keys are the first 8 bytes of SHA-256 over the decimal fields, masked to 63
bits (``torch.manual_seed`` takes any int below 2**64; 63 bits keeps them
positive for every torch version).
"""

from __future__ import annotations

import _random
import hashlib
import random
import sys
from typing import Iterable

import torch
import torch.random as _trandom

__all__ = ["PURPOSE_MICRO_BATCH", "PURPOSE_AUGMENT", "key", "worker_keys", "seed_globals", "seed_globals_key",
           "GlobalSeedGuard", "ForbiddenSeedError"]

# random.seed(k) for an int k is Random.seed's type checks, then _random.Random.seed(k) and gauss_next = None;
# calling those two directly gives the same state on a shorter path (it runs once per micro-batch, with cold caches).
_python_random = random._inst  # type: ignore[attr-defined]
_seed_python_c = _random.Random.seed

#: Purpose of the stream seeded before a logical worker's micro-batch.
PURPOSE_MICRO_BATCH = "micro-batch"
#: Purpose of the Job API transform's stream (seeded once per micro-batch).
PURPOSE_AUGMENT = "augment"


_sha256 = hashlib.sha256
_from_bytes = int.from_bytes
_MASK = (1 << 63) - 1


def key(*fields: int | str) -> int:
    """Return the 63-bit stream key of ``fields`` (ints and strs, in order)."""
    return _from_bytes(_sha256("\x1f".join(map(str, fields)).encode()).digest()[:8], "little") & _MASK


def worker_keys(seed: int, logical_workers: Iterable[int], step: int, purpose: str = PURPOSE_MICRO_BATCH) -> list[int]:
    """``[key(seed, lw, step, purpose) for lw in logical_workers]``: one step's keys, computed together.

    The same bits as :func:`key`. A step computes its keys before its first
    micro-batch: one call per micro-batch, between forward and backward
    passes that evict the caches, cost about 50 us each, the batch about
    1 us a key.
    """
    head, tail = f"{seed}\x1f", f"\x1f{step}\x1f{purpose}"
    return [_from_bytes(_sha256((head + str(lw) + tail).encode()).digest()[:8], "little") & _MASK
            for lw in logical_workers]


def seed_globals(seed: int, logical_worker: int, step: int, purpose: str = PURPOSE_MICRO_BATCH) -> int:
    """Seed torch's global CPU generator (every CUDA device's, Python's ``random`` and, when imported, numpy's
    global one) for one micro-batch.

    Returns the key used. Works while a GlobalSeedGuard is installed (it seeds
    the generators directly, not through ``torch.manual_seed``).
    """
    k = key(seed, logical_worker, step, purpose)
    seed_globals_key(k)
    return k


def seed_globals_key(k: int) -> None:
    """:func:`seed_globals` from its key ``k`` (a 63-bit key of :func:`key` or :func:`worker_keys`)."""
    _seed_python_c(_python_random, k)  # Python's and numpy's global generators too: a transform may draw from them
    _python_random.gauss_next = None
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(k & 0xFFFFFFFF)
    # torch.manual_seed(k) does exactly this, plus a lazy CUDA seeding call that records a stack trace:
    # 43-56 us in torch 1.13 against about 1 us here, paid once per micro-batch.
    torch.default_generator.manual_seed(k)
    # An initialized CUDA is an available one; is_available() asks the driver (about 5 us, once per micro-batch).
    if torch.cuda.is_initialized():
        for g in torch.cuda.default_generators:
            g.manual_seed(k)


class ForbiddenSeedError(RuntimeError):
    """Raised when user code re-seeds torch's global generator during training."""


class GlobalSeedGuard:
    """Refuses ``torch.manual_seed`` / ``torch.random.manual_seed`` / ``torch.seed`` while active.

    A re-seed inside the training loop would make every logical worker draw the
    same stream (transformers #31412) or tie the draws to the process: the
    runtime seeds per logical worker itself. Use as a context manager around the
    step loop; the user's setup code (model construction) may still seed.
    """

    _names: Iterable[tuple[object, str]] = ()

    def __enter__(self) -> "GlobalSeedGuard":
        trandom = _trandom
        self._saved = [(torch, "manual_seed", torch.manual_seed), (trandom, "manual_seed", trandom.manual_seed),
                       (torch, "seed", torch.seed), (trandom, "seed", trandom.seed)]
        for mod, name, _ in self._saved:
            setattr(mod, name, _refuse(name))
        return self

    def __exit__(self, *exc: object) -> None:
        for mod, name, fn in self._saved:
            setattr(mod, name, fn)


def _refuse(name: str):  # type: ignore[no-untyped-def]
    def refuse(*args: object, **kwargs: object) -> None:
        raise ForbiddenSeedError(
            f"torch.{name}() was called during training: easyscale seeds torch's generators per logical "
            "worker and step itself (so dropout and augmentation do not depend on the placement); "
            "seed only before the training loop, and draw from torch's global generator (a torch.Generator the "
            "model owns would draw by process, not by logical worker)")
    return refuse
