"""Framing of the control channel between a Go worker and its Python process.

The Go worker starts ``python3 -m easyscale.worker`` with the channel on the
child's stdin (Go -> Python) and a pipe on file descriptor 3 (Python -> Go);
stdout and stderr stay free for the user's prints and logs. Every message is
one frame:

    4 bytes  big-endian length H of the header
    H bytes  JSON object, at least {"type": str}; requests carry "id", replies echo it
    8 bytes  big-endian length P of the payload
    P bytes  payload (safetensors bytes for tensors; empty for most messages)

The protocol version (:data:`VERSION`) is exchanged in the first message
(``hello``); the Go side (``runtime/torchengine/protocol.go``) refuses another.
Frames above :data:`MAX_HEADER` / :data:`MAX_PAYLOAD` bytes are refused, so a
corrupt length cannot make either side allocate without bound.
"""

from __future__ import annotations

import json
import struct
import threading
from typing import Any, BinaryIO

__all__ = ["VERSION", "MAX_HEADER", "MAX_PAYLOAD", "ProtocolError", "Channel"]

#: Version of the message set; bumped on any incompatible change (2: a digest request; 3: a step is step,
#: reduce, commit, and cancel).
VERSION = 3
#: Largest JSON header accepted, bytes.
MAX_HEADER = 16 << 20
#: Largest payload accepted, bytes (a replica of a few billion parameters).
MAX_PAYLOAD = 64 << 30


class ProtocolError(RuntimeError):
    """A malformed frame, or the other side closed the channel (EOFError is its cause then)."""


class Channel:
    """Reads frames from ``rx`` and writes them to ``tx``; ``send`` is safe from several threads."""

    def __init__(self, rx: BinaryIO, tx: BinaryIO) -> None:
        self.rx, self.tx = rx, tx
        self._lock = threading.Lock()

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        head = json.dumps(header, separators=(",", ":")).encode()
        with self._lock:
            self.tx.write(struct.pack(">I", len(head)) + head + struct.pack(">Q", len(payload)))
            if payload:
                self.tx.write(payload)
            self.tx.flush()

    def recv(self) -> tuple[dict[str, Any], bytes]:
        """Return the next (header, payload); raises ProtocolError on EOF or a malformed frame."""
        (hlen,) = struct.unpack(">I", self._exact(4))
        if hlen > MAX_HEADER:
            raise ProtocolError(f"frame header of {hlen} bytes exceeds {MAX_HEADER}")
        try:
            header = json.loads(self._exact(hlen))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ProtocolError(f"frame header is not JSON: {e}") from e
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise ProtocolError(f"frame header {header!r} has no \"type\"")
        (plen,) = struct.unpack(">Q", self._exact(8))
        if plen > MAX_PAYLOAD:
            raise ProtocolError(f"frame payload of {plen} bytes exceeds {MAX_PAYLOAD}")
        return header, self._exact(plen) if plen else b""

    def _exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            b = self.rx.read(left)
            if not b:
                raise ProtocolError("control channel closed by the Go worker") from EOFError()
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
