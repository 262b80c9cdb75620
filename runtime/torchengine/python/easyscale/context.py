"""Per-logical-worker context: the sampler cursor and the model's buffers.

A physical worker runs its logical workers one after another on one model
replica (EasyScale §3.2, time-sharing). What must differ per logical worker is
its *context*:

- its :class:`~easyscale.sampler.Cursor`;
- every buffer of the model (BatchNorm's ``running_mean``, ``running_var`` and
  ``num_batches_tracked``, and any buffer a user module registers): a DDP rank
  updates its own, so sharing one would count N batches where logical worker 0
  counted one (docs/pytorch-bits.md §2 "BatchNorm");
- its random streams, which need no state: they are re-derived from (seed,
  logical worker, step, purpose) before each micro-batch (:mod:`easyscale.streams`).

Switching a logical worker in is a pointer swap of each buffer in the modules'
``_buffers`` dicts: nothing is copied. Buffers change in place during the
forward pass, so :meth:`BufferBank.snapshot` copies them before a step that may
be aborted and :meth:`BufferBank.restore` puts the copy back.
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

__all__ = ["BufferBank", "BufferSnapshot"]


class BufferBank:
    """Holds one set of model buffers per logical worker and swaps them into ``model``.

    ``logical_workers`` lists the logical worker ids this process holds; each
    starts from a copy of the model's current buffers (as every DDP rank starts
    from the same module). The buffers of all held logical workers live in one
    flat tensor per dtype and device (each buffer a contiguous view of it), so
    a snapshot is one copy of each; adding or removing a logical worker moves
    them into new flat tensors (new views, the same values).
    """

    def __init__(self, model: nn.Module, logical_workers: list[int]) -> None:
        self._slots: list[tuple[nn.Module, str, str]] = []  # (module, buffer name, full name)
        for mod_name, module in model.named_modules():
            for name, buf in module._buffers.items():
                if buf is not None:
                    full = f"{mod_name}.{name}" if mod_name else name
                    self._slots.append((module, name, full))
        # (the module's _buffers dict, buffer name) of each slot: activate() assigns through these.
        self._dst = [(module._buffers, name) for module, name, _ in self._slots]
        self._initial = {full: module._buffers[name].detach().clone() for module, name, full in self._slots}
        self._bank: dict[int, dict[str, torch.Tensor]] = {}
        self._order: dict[int, list[torch.Tensor]] = {}  # each logical worker's buffers in slot order
        self._flat: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        self._keys: list[tuple[int, str, tuple[torch.dtype, torch.device]]] = []
        self._shapes: dict[int, dict[str, torch.Size]] = {}
        self._active: int | None = None
        for lw in logical_workers:
            self.add(lw)

    def names(self) -> list[str]:
        """Full names of the model's buffers, in module order."""
        return [full for _, _, full in self._slots]

    def logical_workers(self) -> list[int]:
        """The logical workers held, in increasing order."""
        return sorted(self._bank)

    def add(self, lw: int, buffers: dict[str, torch.Tensor] | None = None) -> None:
        """Hold logical worker ``lw``, with ``buffers`` (full name -> tensor) or the initial ones.

        Raises KeyError naming a buffer that is missing or unknown, and ValueError
        for a shape or dtype that differs from the model's or a tensor that is not dense.
        """
        src = self._initial if buffers is None else buffers
        missing = [full for _, _, full in self._slots if full not in src]
        extra = sorted(set(src) - {full for _, _, full in self._slots})
        if missing or extra:
            raise KeyError(f"logical worker {lw}: buffers missing {missing}, unknown {extra}")
        bank = {}
        for _, _, full in self._slots:
            ref, t = self._initial[full], src[full]
            if t.shape != ref.shape or t.dtype != ref.dtype:
                raise ValueError(f"logical worker {lw}: buffer {full} is {t.dtype}{list(t.shape)}, "
                                 f"the model has {ref.dtype}{list(ref.shape)}")
            if t.layout != torch.strided:
                raise ValueError(f"logical worker {lw}: buffer {full} is {t.layout}, want a dense tensor")
            bank[full] = t.detach().to(ref.device)
        self._bank[lw] = bank
        self._relayout()

    def remove(self, lw: int) -> dict[str, torch.Tensor]:
        """Stop holding ``lw`` and return its buffers (to send to the process that takes it)."""
        if self._active == lw:
            self._active = None
        out = {full: t.clone() for full, t in self._bank.pop(lw).items()}
        self._relayout()
        return out

    def _relayout(self) -> None:
        """Copy every held logical worker's buffers into new flat tensors, one per dtype and device (logical
        workers in increasing order, buffers in slot order), and make each buffer its view of them."""
        groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
        keys = []
        for lw in sorted(self._bank):
            for full, t in self._bank[lw].items():
                g = (t.dtype, t.device)
                groups.setdefault(g, []).append(t.reshape(-1))
                keys.append((lw, full, g))
        self._flat = {g: torch.cat(ts) for g, ts in groups.items()}
        at = {g: 0 for g in self._flat}
        for lw, full, g in keys:
            t = self._bank[lw][full]
            n = t.numel()
            self._bank[lw][full] = _alias(self._flat[g], at[g], t.shape)
            at[g] += n
        self._keys = keys
        self._shapes = {lw: {k: t.shape for k, t in b.items()} for lw, b in self._bank.items()}
        self._order = {lw: [b[full] for _, _, full in self._slots] for lw, b in self._bank.items()}
        if self._active is not None:
            self.activate(self._active)  # the model's buffers are the new views

    def activate(self, lw: int) -> None:
        """Swap logical worker ``lw``'s buffers into the model (a pointer swap per buffer)."""
        for (bufs, name), t in zip(self._dst, self._order[lw]):
            bufs[name] = t
        self._active = lw

    def buffers(self, lw: int) -> dict[str, torch.Tensor]:
        """Logical worker ``lw``'s buffers (live tensors, not copies)."""
        return self._bank[lw]

    def snapshot(self) -> BufferSnapshot:
        """A copy of every held logical worker's buffers, for :meth:`restore` after an aborted step.

        One copy of each flat tensor (a step takes one snapshot; a copy per
        buffer cost about 130 us for 8 logical workers of a LeNet with two
        BatchNorms, a concatenation of them 20 us quiet and 300 us between
        training steps).
        """
        return BufferSnapshot({g: t.clone() for g, t in self._flat.items()}, self._keys, self._shapes)

    def restore(self, snap: BufferSnapshot | dict[int, dict[str, torch.Tensor]]) -> None:
        """Put back the buffers of :meth:`snapshot` in place (the live tensors keep their identity)."""
        if isinstance(snap, BufferSnapshot) and snap._keys is self._keys:
            for g, t in snap._flat.items():
                self._flat[g].copy_(t)
            return
        for lw, b in snap.items():
            live = self._bank[lw]
            for k, t in b.items():
                live[k].copy_(t)

    def __iter__(self) -> Iterator[int]:
        return iter(self.logical_workers())


def _alias(flat: torch.Tensor, offset: int, shape: torch.Size) -> torch.Tensor:
    """A tensor of ``shape`` over ``flat``'s elements from ``offset`` on, with a version counter of its own.

    A view (``flat[a:b].view(shape)``) would share ``flat``'s version counter
    with every other view: BatchNorm's in-place update of its running mean
    would then bump the counter of a buffer the forward saved for backward
    (a registered buffer updated in place and used in the loss), and
    backward would refuse it ("modified by an inplace operation") where
    plain torch, whose buffers are separate tensors, does not. ``set_`` on
    a fresh tensor aliases the storage without making a view.
    """
    storage = flat.untyped_storage() if hasattr(flat, "untyped_storage") else flat.storage()  # 2.x, 1.13
    out = torch.empty(0, dtype=flat.dtype, device=flat.device)
    with torch.no_grad():
        out.set_(storage, flat.storage_offset() + offset, shape, _contiguous_strides(shape))
    return out


def _contiguous_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class BufferSnapshot:
    """The copy :meth:`BufferBank.snapshot` took: one flat tensor per dtype and device; read like
    ``{logical worker: {buffer name: tensor}}`` (``snap[lw]``, ``items()``), each tensor a view of the copy."""

    def __init__(self, flat: dict[tuple[torch.dtype, torch.device], torch.Tensor],
                 keys: list[tuple[int, str, tuple[torch.dtype, torch.device]]],
                 shapes: dict[int, dict[str, torch.Size]]) -> None:
        self._flat, self._keys, self._shapes = flat, keys, shapes

    def _views(self) -> dict[int, dict[str, torch.Tensor]]:
        at = {g: 0 for g in self._flat}
        out: dict[int, dict[str, torch.Tensor]] = {lw: {} for lw in self._shapes}
        for lw, full, g in self._keys:
            shape = self._shapes[lw][full]
            n = shape.numel()
            out[lw][full] = self._flat[g][at[g]:at[g] + n].view(shape)
            at[g] += n
        return {lw: {k: out[lw][k] for k in names} for lw, names in self._shapes.items()}  # bank order

    def __getitem__(self, lw: int) -> dict[str, torch.Tensor]:
        return self._views()[lw]

    def __contains__(self, lw: object) -> bool:
        return lw in self._shapes

    def items(self) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
        return iter(self._views().items())
