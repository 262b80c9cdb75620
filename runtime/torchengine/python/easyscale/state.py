"""Replica state and logical-worker contexts as safetensors bytes.

Two payloads travel between processes (through the Go runtime) and into
checkpoints:

- a *replica* (:class:`Registry`): the parameters of every registered module
  as tensors ``<module name>.<parameter>``, and every other registered object's
  state (optimizers, LR schedulers, a GradScaler, the user's counters) with its
  tensors as ``<name>.<path>`` and the rest as JSON in the metadata
  ``easyscale.objects`` (tensors replaced by ``{"tensor": name}``);
- a logical worker's *context*: its buffers as tensors and metadata
  ``easyscale.logical_worker`` and ``easyscale.cursor`` (``{"epoch": e, "pos": p}``);
  several travel in one frame as a concatenation with an index (:func:`pack`),
  so the Go side keeps and moves each logical worker's context without parsing it.

Both are byte-identical for equal states (:mod:`easyscale.safetensors` sorts
names), so their sha256 identifies them.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import torch
from torch import nn

from . import safetensors
from .sampler import Cursor

__all__ = ["StateError", "Registry", "encode_context", "decode_context", "pack", "unpack"]


class StateError(ValueError):
    """A replica or contexts payload that cannot be encoded or decoded; the message names the entry."""


#: Marks a tensor in the JSON of a state_dict: ``{TENSOR: "safetensors name"}``.
TENSOR = "tensor"
#: Marks a bound method of the object being saved: ``{METHOD: "name"}`` (torch 1.13's OneCycleLR keeps
#: ``anneal_func = self._annealing_cos`` in its state_dict; restored as ``getattr(owner, name)``).
METHOD = "method"


def _jsonable(where: str, value: Any, tensors: dict[str, torch.Tensor], prefix: str, owner: Any = None) -> Any:
    if isinstance(value, torch.Tensor):
        tensors[prefix] = value.detach()
        return {TENSOR: prefix}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(where, v, tensors, f"{prefix}.{i}", owner) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _jsonable(where, v, tensors, f"{prefix}.{k}", owner) for k, v in value.items()}
    if inspect.ismethod(value) and owner is not None and value.__self__ is owner \
            and getattr(owner, value.__name__, None) == value:
        return {METHOD: value.__name__}
    raise StateError(f"{where}: {prefix} holds a {type(value).__name__}, which cannot be saved")


def _restore(value: Any, tensors: dict[str, torch.Tensor], owner: Any = None) -> Any:
    if isinstance(value, dict):
        if set(value) == {TENSOR}:
            return tensors[value[TENSOR]]
        if set(value) == {METHOD} and owner is not None:
            return getattr(owner, value[METHOD])
        return {k: _restore(v, tensors, owner) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, tensors, owner) for v in value]
    return value


class Registry:
    """The stateful objects of a training program, by name, in registration order.

    Three kinds are kept:

    - modules (``torch.nn.Module``): their parameters are the replica's (tensors
      ``<name>.<parameter>``); their buffers are per logical worker
      (:mod:`easyscale.context`) and travel with the logical workers, not here;
    - dicts (the user's own counters): saved as JSON, restored in place
      (``clear`` then ``update``), so the loop's reference stays valid;
    - anything with ``state_dict()`` and ``load_state_dict()``: optimizers,
      LR schedulers (``torch.optim.lr_scheduler``, ``ReduceLROnPlateau``
      included), a GradScaler; tensors go to ``<name>.<path>``, the rest to
      JSON. A bound method of the object itself in its state (torch 1.13's
      ``OneCycleLR.anneal_func``) is saved by name.

    :meth:`encode` and :meth:`decode` are the replica payload that joiners copy
    and checkpoints hold; both are byte-identical for equal states.
    """

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    def add(self, name: str, obj: Any) -> None:
        """Register ``obj`` as ``name``; raises StateError for a name taken or an object that cannot be saved."""
        if name in self.objects:
            raise StateError(f"{name!r} is registered twice: give each object its own name")
        if not name or "." in name:
            raise StateError(f"registered name {name!r}: want a non-empty name without dots")
        if not (isinstance(obj, (nn.Module, dict)) or
                (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)))):
            raise StateError(f"{name} ({type(obj).__name__}) has no state_dict() and load_state_dict(): "
                             "register an object that has them, or keep its state in a registered dict")
        self.objects[name] = obj

    def holds(self, obj: Any) -> bool:
        return any(o is obj for o in self.objects.values())

    def modules(self) -> dict[str, nn.Module]:
        return {k: v for k, v in self.objects.items() if isinstance(v, nn.Module)}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {k: v for k, v in self.objects.items() if isinstance(v, torch.optim.Optimizer)}

    def parameters(self) -> list[tuple[str, torch.Tensor]]:
        """Every registered module's parameters as (``<module name>.<parameter>``, tensor), in order."""
        return [(f"{m}.{n}", p) for m, mod in self.modules().items() for n, p in mod.named_parameters()]

    def _entry(self, name: str, obj: Any, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
        """One object's JSON entry; its tensors go to ``tensors`` (live, not copied)."""
        if isinstance(obj, nn.Module):
            return {"kind": "module"}
        if isinstance(obj, dict):
            return {"kind": "dict", "state": _jsonable(name, obj, tensors, name)}
        return {"kind": "state_dict", "state": _jsonable(self._where(name, obj), self._state_dict(name, obj),
                                                         tensors, name, obj)}

    @staticmethod
    def _where(name: str, obj: Any) -> str:
        return f"{name} ({type(obj).__name__})"

    def _state_dict(self, name: str, obj: Any) -> Any:
        try:
            return obj.state_dict()
        except Exception as e:
            raise StateError(f"{self._where(name, obj)}: state_dict() raised {type(e).__name__}: {e}") from e

    def light(self) -> dict[str, tuple[dict[str, Any], dict[str, torch.Tensor]]]:
        """A copy of the registered state but the parameters and the optimizers' per-parameter state.

        Small (schedulers, counters, learning rates): taken at every step
        boundary, so that a checkpoint taken during the next step (SIGTERM)
        holds the boundary's state even where the loop changed a counter or
        a learning rate before the step's reduction (:meth:`encode`'s ``light``).
        """
        out: dict[str, tuple[dict[str, Any], dict[str, torch.Tensor]]] = {}
        for name, obj in self.objects.items():
            if isinstance(obj, nn.Module):
                continue
            tensors: dict[str, torch.Tensor] = {}
            if isinstance(obj, torch.optim.Optimizer):
                groups = self._state_dict(name, obj)["param_groups"]
                entry = {"kind": "state_dict", "state": {
                    "param_groups": _jsonable(self._where(name, obj), groups, tensors, f"{name}.param_groups", obj)}}
            else:
                entry = self._entry(name, obj, tensors)
            out[name] = (json.loads(json.dumps(entry)), {k: t.clone() for k, t in tensors.items()})
        return out

    def encode(self, metadata: dict[str, str] | None = None,
               light: dict[str, tuple[dict[str, Any], dict[str, torch.Tensor]]] | None = None) -> bytes:
        """Encode parameters and every other object's state; raises StateError naming unsavable state.

        With ``light`` (:meth:`light`), the objects' state is that copy's, but
        the parameters' and the optimizers' per-parameter state, which are live.
        """
        tensors: dict[str, torch.Tensor] = dict(self.parameters())
        objects: dict[str, Any] = {}
        for name, obj in self.objects.items():
            if light is None or name not in light:
                objects[name] = self._entry(name, obj, tensors)
                continue
            entry, copied = light[name]
            tensors.update(copied)
            if isinstance(obj, torch.optim.Optimizer):
                live = _jsonable(self._where(name, obj), self._state_dict(name, obj)["state"], tensors,
                                 f"{name}.state", obj)
                entry = {"kind": entry["kind"], "state": {**entry["state"], "state": live}}
            objects[name] = entry
        try:
            meta_json = json.dumps(objects, sort_keys=True)
        except (TypeError, ValueError) as e:
            raise StateError(f"registered state cannot be saved as JSON: {e}") from e
        return safetensors.dumps(tensors, {"easyscale.objects": meta_json, **(metadata or {})})

    def decode(self, data: bytes) -> dict[str, str]:
        """Load ``data`` into the registered objects bit for bit; returns the metadata that is not easyscale's.

        Raises StateError naming an object or parameter that is missing, extra or of another shape.
        """
        tensors, meta = safetensors.loads(data)
        try:
            objects = json.loads(meta["easyscale.objects"])
        except (KeyError, json.JSONDecodeError) as e:
            raise StateError(f"replica metadata: {e}") from e
        if set(objects) != set(self.objects):
            raise StateError(f"replica objects differ from the registered ones: missing "
                             f"{sorted(set(self.objects) - set(objects))}, unknown {sorted(set(objects) - set(self.objects))}")
        params = self.parameters()
        have = {k for k, _ in params}
        for name, obj in self.objects.items():
            if isinstance(obj, nn.Module):
                got = {k for k in tensors if k.startswith(name + ".")}  # names hold no dots: no other object's
                want = {k for k in have if k.startswith(name + ".")}
                if got != want:
                    raise StateError(f"replica parameters of {name} differ from the model's: missing "
                                     f"{sorted(want - got)}, unknown {sorted(got - want)}")
        with torch.no_grad():
            for n, p in params:
                t = tensors[n]
                if t.shape != p.shape or t.dtype != p.dtype:
                    raise StateError(f"replica parameter {n} is {t.dtype}{list(t.shape)}, "
                                     f"the model has {p.dtype}{list(p.shape)}")
                p.copy_(t)
        for name, obj in self.objects.items():
            entry = objects[name]
            if isinstance(obj, nn.Module):
                continue
            state = _restore(entry["state"], tensors, obj)
            if isinstance(obj, dict):
                obj.clear()
                obj.update(state)
                continue
            if isinstance(obj, torch.optim.Optimizer):
                state = {"state": {int(k): v for k, v in state["state"].items()}, "param_groups": state["param_groups"]}
            try:
                obj.load_state_dict(state)
            except Exception as e:
                raise StateError(f"{name} ({type(obj).__name__}): load_state_dict() raised {type(e).__name__}: {e}") from e
        return {k: v for k, v in meta.items() if not k.startswith("easyscale.")}

    def round_trip(self) -> None:
        """Save every registered object, load the result back, save again: raises StateError unless both agree.

        Run at setup, so a job never dies at its first checkpoint (an object
        whose state cannot be saved, or does not survive a reload).
        """
        first = self.encode()
        self.decode(first)
        if self.encode() != first:
            raise StateError("registered state does not survive a save and load unchanged: "
                             + ", ".join(self._changed(first)))

    def _changed(self, data: bytes) -> list[str]:
        tensors, meta = safetensors.loads(data)
        now_t, now_m = safetensors.loads(self.encode())
        names = sorted(k for k in set(tensors) | set(now_t) if k not in tensors or k not in now_t
                       or not torch.equal(tensors[k], now_t[k]))
        old, new = json.loads(meta["easyscale.objects"]), json.loads(now_m["easyscale.objects"])
        names += sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return names or ["(metadata)"]


def encode_context(lw: int, cursor: Cursor, buffers: dict[str, torch.Tensor]) -> bytes:
    """Encode one logical worker's context: its buffers and, in the metadata, its id and cursor."""
    return safetensors.dumps(buffers, {"easyscale.logical_worker": str(lw),
                                       "easyscale.cursor": json.dumps(cursor.to_json(), sort_keys=True)})


def decode_context(data: bytes) -> tuple[int, dict[str, Any]]:
    """Decode :func:`encode_context` into (lw, {"cursor", "buffers"}); raises StateError when malformed."""
    tensors, meta = safetensors.loads(data)
    try:
        lw = int(meta["easyscale.logical_worker"])
        cursor = Cursor.from_json(json.loads(meta["easyscale.cursor"]))
    except (KeyError, ValueError) as e:
        raise StateError(f"logical-worker context: {e}") from e
    return lw, {"cursor": cursor, "buffers": tensors}


def pack(parts: dict[int, bytes]) -> tuple[list[list[int]], bytes]:
    """Concatenate per-logical-worker blobs: returns the index [[lw, length], ...] and the payload."""
    order = sorted(parts)
    return [[lw, len(parts[lw])] for lw in order], b"".join(parts[lw] for lw in order)


def unpack(index: Any, payload: bytes) -> dict[int, bytes]:
    """Split a payload made by :func:`pack`; raises StateError when the index does not cover it exactly."""
    out: dict[int, bytes] = {}
    at = 0
    if not isinstance(index, list):
        raise StateError(f"context index {index!r} is not a list")
    for entry in index:
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, int) for v in entry)) \
                or entry[1] < 0 or entry[0] in out:
            raise StateError(f"context index entry {entry!r}: want a unique [logical worker, length]")
        out[entry[0]] = payload[at:at + entry[1]]
        at += entry[1]
    if at != len(payload):
        raise StateError(f"context index covers {at} bytes of a {len(payload)}-byte payload")
    return out
