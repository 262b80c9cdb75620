"""Bit-exact reader and writer of the safetensors format.

Debian ships no ``safetensors`` package, so this module implements the format
(https://github.com/huggingface/safetensors, "Format" section) with torch alone:

    8 bytes   little-endian unsigned header length H
    H bytes   JSON header: {"name": {"dtype": "F32", "shape": [2, 3],
              "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
    rest      raw little-endian tensor data; offsets are relative to its start

Tensors are stored in name order with no gaps, as the reference writer does, so
two saves of equal tensors are byte-identical and a file's sha256 identifies
its content. The Go side (``statedb``) reads these files with
github.com/nlpodyssey/safetensors.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import BinaryIO, Mapping

import torch

__all__ = ["SafetensorsError", "DTYPES", "dumps", "loads", "save", "load"]

#: safetensors dtype name for each torch dtype that can be stored.
DTYPES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_TORCH_DTYPES = {name: dtype for dtype, name in DTYPES.items()}

#: Largest header accepted when reading (the reference reader's limit).
MAX_HEADER_BYTES = 100_000_000


class SafetensorsError(ValueError):
    """A file or a tensor that cannot be stored or read; the message names it."""


def _require_little_endian() -> None:
    if sys.byteorder != "little":
        raise SafetensorsError("safetensors data is little-endian; this host is big-endian")


def _raw(name: str, tensor: torch.Tensor) -> bytes:
    if tensor.dtype not in DTYPES:
        raise SafetensorsError(f"tensor {name!r}: dtype {tensor.dtype} cannot be stored "
                               f"(supported: {', '.join(sorted(DTYPES.values()))})")
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return flat.view(torch.uint8).numpy().tobytes()


def dumps(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """Encode ``tensors`` (name -> tensor, any device) and string ``metadata``.

    Raises SafetensorsError for an unsupported dtype, an empty or reserved name,
    or non-string metadata.
    """
    _require_little_endian()
    header: dict[str, object] = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"metadata {k!r}: keys and values must be str")
        header["__metadata__"] = dict(sorted(metadata.items()))
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        if not name or name == "__metadata__":
            raise SafetensorsError(f"tensor name {name!r} is empty or reserved")
        tensor = tensors[name]
        raw = _raw(name, tensor)
        header[name] = {"dtype": DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, separators=(",", ":"), sort_keys=False).encode()
    encoded += b" " * (-len(encoded) % 8)  # data starts 8-byte aligned, as the reference writer pads
    return struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks)


def loads(data: bytes) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Decode a safetensors byte string into (tensors, metadata).

    Raises SafetensorsError naming the problem: a short file, a bad header, an
    unknown dtype, offsets that overlap, leave gaps or run past the end, or a
    shape that does not match its byte count.
    """
    _require_little_endian()
    if len(data) < 8:
        raise SafetensorsError(f"file is {len(data)} bytes, shorter than the 8-byte header length")
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > MAX_HEADER_BYTES or 8 + hlen > len(data):
        raise SafetensorsError(f"header length {hlen} runs past the end of a {len(data)}-byte file")
    try:
        header = json.loads(data[8:8 + hlen])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError("__metadata__ must map strings to strings")
    body = memoryview(data)[8 + hlen:]
    spans: list[tuple[int, int, str]] = []
    tensors: dict[str, torch.Tensor] = {}
    for name, info in header.items():
        tensors[name] = _decode_one(name, info, body, spans)
    spans.sort()
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            raise SafetensorsError(f"tensor {name!r} starts at byte {begin}, expected {end} (gap or overlap)")
        end = stop
    if end != len(body):
        raise SafetensorsError(f"data section is {len(body)} bytes but tensors cover {end}")
    return tensors, dict(meta)


def _decode_one(name: str, info: object, body: memoryview, spans: list[tuple[int, int, str]]) -> torch.Tensor:
    if not isinstance(info, dict):
        raise SafetensorsError(f"tensor {name!r}: entry is not an object")
    dtype = _TORCH_DTYPES.get(info.get("dtype"))  # type: ignore[arg-type]
    if dtype is None:
        raise SafetensorsError(f"tensor {name!r}: unknown dtype {info.get('dtype')!r}")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
            or not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)):
        raise SafetensorsError(f"tensor {name!r}: bad shape {shape!r} or data_offsets {offsets!r}")
    begin, stop = offsets
    if not 0 <= begin <= stop <= len(body):
        raise SafetensorsError(f"tensor {name!r}: data_offsets {offsets} outside the {len(body)}-byte data")
    count = 1
    for d in shape:
        count *= d
    size = torch.empty((), dtype=dtype).element_size()
    if count * size != stop - begin:
        raise SafetensorsError(f"tensor {name!r}: shape {shape} needs {count * size} bytes, has {stop - begin}")
    spans.append((begin, stop, name))
    raw = torch.frombuffer(bytearray(body[begin:stop]), dtype=torch.uint8) if stop > begin \
        else torch.empty(0, dtype=torch.uint8)
    if dtype == torch.bool:
        return raw.to(torch.bool).reshape(shape)
    return raw.view(dtype).reshape(shape)


def save(path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor],
         metadata: Mapping[str, str] | None = None) -> bytes:
    """Write ``tensors`` to ``path`` atomically (temporary file, fsync, rename).

    Returns the bytes written, so the caller can hash exactly what is on disk.
    Raises SafetensorsError for bad tensors and OSError (with the path) for I/O.
    """
    data = dumps(tensors, metadata)
    path = os.fspath(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            _write_all(f, data)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return data


def _write_all(f: BinaryIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = f.write(view)
        view = view[n:]


def load(path: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read a safetensors file; see loads for the errors (prefixed with the path)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return loads(data)
    except SafetensorsError as e:
        raise SafetensorsError(f"{os.fspath(path)}: {e}") from e
