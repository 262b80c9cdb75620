"""Replica state and logical-worker contexts as safetensors bytes.

Two payloads travel between processes (through the Go runtime) and into
checkpoints:

- a *replica*: tensors ``model.<parameter>`` and ``optimizer.<param index>.<key>``,
  and metadata ``easyscale.optimizer`` (the rest of ``optimizer.state_dict()``
  as JSON, tensors replaced by ``{"tensor": name}``) and
  ``easyscale.lr_scheduler`` (its ``state_dict()`` as JSON, or ``null``);
- a logical worker's *context*: its buffers as tensors and metadata
  ``easyscale.logical_worker`` and ``easyscale.cursor`` (``{"epoch": e, "pos": p}``);
  several travel in one frame as a concatenation with an index (:func:`pack`),
  so the Go side keeps and moves each logical worker's context without parsing it.

Both are byte-identical for equal states (:mod:`easyscale.safetensors` sorts
names), so their sha256 identifies them.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from . import safetensors
from .sampler import Cursor

__all__ = ["StateError", "encode_replica", "decode_replica", "encode_context", "decode_context", "pack", "unpack"]


class StateError(ValueError):
    """A replica or contexts payload that cannot be encoded or decoded; the message names the entry."""


def _jsonable(where: str, value: Any, tensors: dict[str, torch.Tensor], prefix: str) -> Any:
    if isinstance(value, torch.Tensor):
        tensors[prefix] = value
        return {"tensor": prefix}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(where, v, tensors, f"{prefix}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _jsonable(where, v, tensors, f"{prefix}.{k}") for k, v in value.items()}
    raise StateError(f"{where}: {prefix} holds a {type(value).__name__}, which cannot be saved")


def _restore(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"tensor"}:
            return tensors[value["tensor"]]
        return {k: _restore(v, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, tensors) for v in value]
    return value


def encode_replica(model: torch.nn.Module, optimizer: torch.optim.Optimizer, lr_scheduler: Any,
                   metadata: dict[str, str] | None = None) -> bytes:
    """Encode parameters, optimizer and LR-scheduler state; raises StateError for unsavable state."""
    tensors = {f"model.{n}": p.detach() for n, p in model.named_parameters()}
    opt = optimizer.state_dict()
    opt_tensors: dict[str, torch.Tensor] = {}
    opt_json = {"state": {str(k): _jsonable("optimizer state", v, opt_tensors, f"optimizer.{k}")
                          for k, v in opt["state"].items()},
                "param_groups": _jsonable("optimizer param_groups", opt["param_groups"], opt_tensors, "groups")}
    tensors.update(opt_tensors)
    sched = None
    if lr_scheduler is not None:
        sched = _jsonable("lr_scheduler", lr_scheduler.state_dict(), {}, "lr_scheduler")
    meta = {"easyscale.optimizer": json.dumps(opt_json, sort_keys=True),
            "easyscale.lr_scheduler": json.dumps(sched, sort_keys=True), **(metadata or {})}
    return safetensors.dumps(tensors, meta)


def decode_replica(data: bytes, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   lr_scheduler: Any) -> dict[str, str]:
    """Load ``data`` into model, optimizer and scheduler bit for bit; returns the metadata.

    Raises StateError naming a parameter that is missing, extra or of another shape.
    """
    tensors, meta = safetensors.loads(data)
    names = {f"model.{n}" for n, _ in model.named_parameters()}
    have = {k for k in tensors if k.startswith("model.")}
    if names != have:
        raise StateError(f"replica parameters differ from the model's: missing {sorted(names - have)}, "
                         f"unknown {sorted(have - names)}")
    with torch.no_grad():
        for n, p in model.named_parameters():
            t = tensors[f"model.{n}"]
            if t.shape != p.shape or t.dtype != p.dtype:
                raise StateError(f"replica parameter {n} is {t.dtype}{list(t.shape)}, "
                                 f"the model has {p.dtype}{list(p.shape)}")
            p.copy_(t)
    try:
        opt_json = json.loads(meta["easyscale.optimizer"])
        sched = json.loads(meta["easyscale.lr_scheduler"])
    except (KeyError, json.JSONDecodeError) as e:
        raise StateError(f"replica metadata: {e}") from e
    state = {int(k): _restore(v, tensors) for k, v in opt_json["state"].items()}
    optimizer.load_state_dict({"state": state, "param_groups": _restore(opt_json["param_groups"], tensors)})
    if lr_scheduler is not None and sched is not None:
        lr_scheduler.load_state_dict(sched)
    return {k: v for k, v in meta.items() if not k.startswith("easyscale.")}


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
