"""The wire format between the trusted trainer and a sandboxed loss server.

Only the loss runs inside the sandbox (docs/sandbox.md). For every hook call the
trainer sends one frame to each member's server and reads one frame back:

    frame    = u32 little-endian header length, JSON header, raw payload
    request  = {"hook": name, "leaves": [[dtype, shape], ...], "args": [value, ...],
                "kwargs": {name: value}, "grad": [leaf, ...], "mutable": [leaf, ...]}
               payload: every leaf's bytes, in order (C order)
    value    = {"t": leaf} | {"v": number} | {"l": [value]} | {"tu": [value]}
               | {"r": [[field, ...], [value, ...]]}  (a named tuple, e.g. an LMBatch)
               | {"fn": value}  (a callable taking no argument that returns the value)
    reply    = {"ok": true}, payload: the reduced loss (float64), then d loss / d leaf for
               every leaf in "grad" (its dtype and shape), then every "mutable" leaf's new
               value (the per-sample ``state`` slice the hook may write)
             | {"error": text, "reason": reason}, no payload
    apply    = a request with "apply": true (a post-hoc hook, no loss, no gradient); its
               reply is {"ok": true, "out": [dtype, shape]} and the output's bytes, at most
               remote.MAX_APPLY_BYTES (checked before they are read)
    trace    = {"trace": name, "leaves": ..., "args": ..., "kwargs": ...} (no payload);
               reply {"graph": ...} and its constants' bytes, or {"untraceable": why}

The trusted side knows every size in a reply before it reads it: it never takes a
length from the child except the header's, which is capped (``MAX_HEADER``).
The first frame a server sends, before any request, is ``{"hello": {...}}``: what the
objective declares (its hooks, the context they ask for, its hyperparameters, its
``MODEL`` settings), or an error frame when it could not be loaded.
"""

from __future__ import annotations

import collections
import functools
import json
import keyword
import os
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_HEADER = 4 << 20  # a reply header (an error's text, a traced graph)
DTYPES = frozenset({"<f4", "<f8", "<f2", "<i8", "<i4", "|b1", "|u1"})
LENGTH = struct.Struct("<I")


class ProtocolError(Exception):
    """A frame that breaks the format (from the child: an invalid output)."""


def frame(header: dict[str, Any], payload: list[bytes | memoryview] = ()) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([LENGTH.pack(len(text)), text, *payload])


def header_length(prefix: bytes) -> int:
    (n,) = LENGTH.unpack(prefix)
    if n > MAX_HEADER:
        raise ProtocolError(f"a reply header of {n:,} bytes (at most {MAX_HEADER:,})")
    return n


def parse_header(raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"a reply header that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("a reply header that is not a JSON object")
    return header


def nbytes(leaves: list[tuple[str, tuple[int, ...]]], which: list[int]) -> int:
    return sum(np.dtype(leaves[i][0]).itemsize * int(np.prod(leaves[i][1], dtype=np.int64))
               for i in which)


def split(payload: bytes | bytearray | memoryview, leaves: list[tuple[str, tuple[int, ...]]],
          which: list[int]) -> list[np.ndarray]:
    """The arrays of ``which`` leaves laid end to end in ``payload`` (copies, writable)."""
    out, offset = [], 0
    for i in which:
        dtype, shape = np.dtype(leaves[i][0]), tuple(leaves[i][1])
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        out.append(np.frombuffer(payload, dtype, count=size // dtype.itemsize or 0,
                                 offset=offset).reshape(shape).copy()
                   if size else np.empty(shape, dtype))
        offset += size
    if offset != len(payload):
        raise ProtocolError(f"a payload of {len(payload):,} bytes where {offset:,} were due")
    return out


def rebuild(value: Any, leaves: list[Any]) -> Any:
    """A request value with its leaves filled in (the server's side)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ProtocolError(f"malformed value {value!r:.100}")
    (kind, inner), = value.items()
    if kind == "t":
        return leaves[inner]
    if kind == "v":
        return inner
    if kind == "l":
        return [rebuild(v, leaves) for v in inner]
    if kind == "tu":
        return tuple(rebuild(v, leaves) for v in inner)
    if kind == "fn":
        made = rebuild(inner, leaves)
        return lambda: made
    if kind == "r":
        names, values = _record_parts(inner)
        return record(names)(*(rebuild(v, leaves) for v in values))
    raise ProtocolError(f"unknown value kind {kind!r}")


@functools.cache
def record(names: tuple[str, ...]) -> type:
    """The named tuple a ``{"r": [names, values]}`` value is rebuilt as: fields read by
    name, as the trusted side's (e.g. an ``LMBatch``)."""
    return collections.namedtuple("Record", names)


def _record_parts(inner: Any) -> tuple[tuple[str, ...], list[Any]]:
    if (not isinstance(inner, list) or len(inner) != 2 or not isinstance(inner[0], list)
            or not isinstance(inner[1], list) or len(inner[0]) != len(inner[1])
            or len(inner[0]) > 64 or len(set(inner[0])) != len(inner[0])
            or not all(isinstance(n, str) and n.isidentifier() and not n.startswith("_")
                       and not keyword.iskeyword(n) for n in inner[0])):
        raise ProtocolError(f"malformed record {inner!r:.100}")
    return tuple(inner[0]), inner[1]


def flatten(value: Any, leaves: list[Any], is_leaf: Callable[[Any], bool]) -> Any:
    """The JSON description of ``value``, appending its tensors to ``leaves`` (the trainer's
    side); a callable is called now, so what it computes is sent precomputed."""
    if is_leaf(value):
        leaves.append(value)
        return {"t": len(leaves) - 1}
    if isinstance(value, bool | int | float) or value is None:
        return {"v": value}
    if isinstance(value, list):
        return {"l": [flatten(v, leaves, is_leaf) for v in value]}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple (LMBatch)
        return {"r": [list(value._fields), [flatten(v, leaves, is_leaf) for v in value]]}
    if isinstance(value, tuple):
        return {"tu": [flatten(v, leaves, is_leaf) for v in value]}
    if callable(value):
        return {"fn": flatten(value(), leaves, is_leaf)}
    raise TypeError(f"cannot send a {type(value).__name__} to a sandboxed objective")


def read_exact(fd: int, n: int) -> bytes:
    """``n`` bytes from a blocking descriptor (the server's side); b"" at end of file."""
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return b""
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
