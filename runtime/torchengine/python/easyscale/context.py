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
    from the same module).
    """

    def __init__(self, model: nn.Module, logical_workers: list[int]) -> None:
        self._slots: list[tuple[nn.Module, str, str]] = []  # (module, buffer name, full name)
        for mod_name, module in model.named_modules():
            for name, buf in module._buffers.items():
                if buf is not None:
                    full = f"{mod_name}.{name}" if mod_name else name
                    self._slots.append((module, name, full))
        self._initial = {full: module._buffers[name].detach().clone() for module, name, full in self._slots}
        self._bank: dict[int, dict[str, torch.Tensor]] = {}
        # Each logical worker's buffers as flat views of the same storage (bank order), for snapshot().
        self._flat: dict[int, list[tuple[str, torch.Tensor]]] = {}
        self._layout: tuple[dict[tuple[torch.dtype, torch.device], list[torch.Tensor]],
                            list[tuple[int, str, tuple[torch.dtype, torch.device]]],
                            dict[int, dict[str, torch.Size]]] | None = None
        for lw in logical_workers:
            self.add(lw)
        self._active: int | None = None

    def names(self) -> list[str]:
        """Full names of the model's buffers, in module order."""
        return [full for _, _, full in self._slots]

    def logical_workers(self) -> list[int]:
        """The logical workers held, in increasing order."""
        return sorted(self._bank)

    def add(self, lw: int, buffers: dict[str, torch.Tensor] | None = None) -> None:
        """Hold logical worker ``lw``, with ``buffers`` (full name -> tensor) or the initial ones.

        Raises KeyError naming a buffer that is missing or unknown, and ValueError
        for a shape or dtype that differs from the model's.
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
            bank[full] = t.detach().to(ref.device).clone()
        self._bank[lw] = bank
        # A non-contiguous buffer has no flat view: snapshot() flattens it (a copy) when it runs.
        self._flat[lw] = [(full, t.view(-1) if t.is_contiguous() else t) for full, t in bank.items()]
        self._layout = None

    def remove(self, lw: int) -> dict[str, torch.Tensor]:
        """Stop holding ``lw`` and return its buffers (to send to the process that takes it)."""
        if self._active == lw:
            self._active = None
        del self._flat[lw]
        self._layout = None
        return self._bank.pop(lw)

    def activate(self, lw: int) -> None:
        """Swap logical worker ``lw``'s buffers into the model (a pointer swap per buffer)."""
        bank = self._bank[lw]
        for module, name, full in self._slots:
            module._buffers[name] = bank[full]
        self._active = lw

    def buffers(self, lw: int) -> dict[str, torch.Tensor]:
        """Logical worker ``lw``'s buffers (live tensors, not copies)."""
        return self._bank[lw]

    def snapshot(self) -> BufferSnapshot:
        """A copy of every held logical worker's buffers, for :meth:`restore` after an aborted step.

        One concatenation per dtype and device of all of them (a step takes one
        snapshot; a copy per buffer cost about 130 us for 8 logical workers
        of a LeNet with two BatchNorms, the concatenation about 20 us).
        """
        if self._layout is None:
            self._layout = self._plan()
        groups, keys, shapes = self._layout
        return BufferSnapshot({g: torch.cat([t if t.dim() == 1 else t.reshape(-1) for t in ts])
                               for g, ts in groups.items()}, keys, shapes)

    def _plan(self) -> tuple[dict[tuple[torch.dtype, torch.device], list[torch.Tensor]],
                             list[tuple[int, str, tuple[torch.dtype, torch.device]]], dict[int, dict[str, torch.Size]]]:
        """snapshot()'s layout for the logical workers held now: the flat views grouped by dtype and device."""
        groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
        keys = []
        for lw in sorted(self._flat):
            for full, t in self._flat[lw]:
                groups.setdefault((t.dtype, t.device), []).append(t)
                keys.append((lw, full, (t.dtype, t.device)))
        return groups, keys, {lw: {k: t.shape for k, t in b.items()} for lw, b in self._bank.items()}

    def restore(self, snap: BufferSnapshot | dict[int, dict[str, torch.Tensor]]) -> None:
        """Put back the buffers of :meth:`snapshot` in place (the live tensors keep their identity)."""
        for lw, b in snap.items():
            live = self._bank[lw]
            for k, t in b.items():
                live[k].copy_(t)

    def __iter__(self) -> Iterator[int]:
        return iter(self.logical_workers())


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
