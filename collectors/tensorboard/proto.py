"""Decode the few ``Event`` / ``Summary`` / ``TensorProto`` fields a TensorBoard tail needs, by hand.

No TensorFlow/TensorBoard dependency. Field numbers from tensorflow/core/util/event.proto,
tensorflow/core/framework/summary.proto, tensor.proto and tensor_shape.proto:

* ``Event``: 1 wall_time (double, s), 2 step (int64), 5 summary.
* ``Summary``: 1 repeated value; ``Summary.Value``: 1 tag, 7 node_name (the tag of old tensor
  summaries), 2 simple_value (float), 8 tensor, 9 metadata (``SummaryMetadata``: 1 plugin_data,
  whose 1 is plugin_name).
* ``TensorProto``: 1 dtype, 2 tensor_shape (2 repeated dim, whose 1 is size), 4 tensor_content,
  5 float_val, 6 double_val, 7 int_val, 10 int64_val, 11 bool_val, 13 half_val, 16 uint32_val,
  17 uint64_val — each repeated field packed or not.

A tensor is a scalar when it holds exactly one element, read the way TensorBoard's own
``tensor_util.make_ndarray`` reads it (which its scalar dashboard calls ``.item()`` on):
``tensor_content`` first, else the value list that belongs to the dtype, a single listed value
standing for the whole tensor. Values with a plugin other than ``scalars`` (histograms, text,
hparams, images) are not scalars.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass


class ProtoError(ValueError):
    pass


_DOUBLE_LE = struct.Struct("<d").unpack
_FLOAT_LE = struct.Struct("<f").unpack
_DOUBLE_AT = struct.Struct("<d").unpack_from
_FLOAT_AT = struct.Struct("<f").unpack_from


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


_FIXED_SIZE = (0, 8, 0, 0, 0, 4, 0, 0)  # by wire type: 1 = 64-bit, 5 = 32-bit


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for every field; varints as ints, fixed as raw bytes.
    Single-byte keys, varints and lengths (nearly all of an event file) take a fast path."""
    out: list[tuple[int, int, int | bytes]] = []
    pos, n = 0, len(buf)
    while pos < n:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0 or wire == 2:
            if pos < n and buf[pos] < 0x80:
                val, pos = buf[pos], pos + 1
            else:
                val, pos = _varint(buf, pos)
            if wire == 0:
                out.append((num, 0, val))
                continue
            size = val
        else:
            size = _FIXED_SIZE[wire]
            if not size:
                raise ProtoError(f"bad wire type {wire} in field {num}")
        if pos + size > n:
            raise ProtoError(f"truncated field {num}")
        out.append((num, wire, buf[pos : pos + size]))
        pos += size
    return out


def _signed(raw: int) -> int:
    return raw - (1 << 64) if raw >= 1 << 63 else raw


def _varints(raw: int | bytes) -> list[int]:
    """A repeated varint field, one unpacked element or a packed run."""
    if isinstance(raw, int):
        return [raw]
    out, pos = [], 0
    while pos < len(raw):
        v, pos = _varint(raw, pos)
        out.append(v)
    return out


def _fixed(raw: int | bytes, fmt: str, width: int) -> list[float]:
    if isinstance(raw, int):
        return [float(raw)]
    n = len(raw) // width
    return [float(x) for x in struct.unpack(f"<{n}{fmt}", raw[: n * width])]


def _half(bits: int) -> float:
    value: float = struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    return value


def _bfloat16(bits: int) -> float:
    value: float = struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]
    return value


# dtype -> (struct format of one element in tensor_content, width, the TensorProto list field)
_FLOAT, _DOUBLE, _INT32, _UINT8, _INT16, _INT8, _INT64, _BOOL = 1, 2, 3, 4, 5, 6, 9, 10
_BFLOAT16, _UINT16, _HALF, _UINT32, _UINT64 = 14, 17, 19, 22, 23
_DTYPES: dict[int, tuple[str, int, int]] = {
    _FLOAT: ("f", 4, 5), _DOUBLE: ("d", 8, 6), _INT32: ("i", 4, 7), _UINT8: ("B", 1, 7),
    _INT16: ("h", 2, 7), _INT8: ("b", 1, 7), _UINT16: ("H", 2, 7), _INT64: ("q", 8, 10),
    _BOOL: ("?", 1, 11), _HALF: ("e", 2, 13), _BFLOAT16: ("H", 2, 13), _UINT32: ("I", 4, 16),
    _UINT64: ("Q", 8, 17),
}  # fmt: skip


def _list_values(dtype: int, num: int, raw: int | bytes) -> list[float]:
    if num == 5:
        return _fixed(raw, "f", 4)
    if num == 6:
        return _fixed(raw, "d", 8)
    ints = _varints(raw)
    if num == 13:
        conv = _bfloat16 if dtype == _BFLOAT16 else _half
        return [conv(v) for v in ints]
    if num in (7, 10):
        return [float(_signed(v)) for v in ints]
    return [float(v) for v in ints]


def _elements(shape: bytes) -> int:
    n = 1
    for num, _, raw in fields(shape):
        if num == 2 and isinstance(raw, bytes):
            size = next((_signed(v) for dn, _, v in fields(raw) if dn == 1 and isinstance(v, int)), 0)
            n *= max(size, 0)
    return n


def tensor_scalar(buf: bytes) -> float | None:
    """The value of a one-element numeric tensor, else None."""
    dtype, n, content = 0, 1, b""
    lists: dict[int, list[tuple[int, int | bytes]]] = {}
    for num, _, raw in fields(buf):
        if num == 1 and isinstance(raw, int):
            dtype = raw
        elif num == 2 and isinstance(raw, bytes):
            n = _elements(raw)
        elif num == 4 and isinstance(raw, bytes):
            content = raw
        else:
            lists.setdefault(num, []).append((num, raw))
    spec = _DTYPES.get(dtype)
    if spec is None or n != 1:
        return None
    fmt, width, list_field = spec
    if content:
        if len(content) != width:
            return None
        (v,) = struct.unpack("<" + fmt, content)
        return _bfloat16(v) if dtype == _BFLOAT16 else float(v)
    vals = [x for num, raw in lists.get(list_field, []) for x in _list_values(dtype, num, raw)]
    return vals[0] if len(vals) == 1 else None


@dataclass(frozen=True)
class Event:
    wall_time: float  # seconds since the epoch (as written: may be NaN in a hostile file)
    step: int
    scalars: dict[str, float]


def _short_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint of one or two bytes (lengths, steps below 16,384), else -1."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    c = buf[pos + 1] if pos + 1 < len(buf) else 0x80
    return (-1, pos) if c >= 0x80 else ((b & 0x7F) | c << 7, pos + 2)


def _simple_event(buf: bytes) -> Event | None:
    """The common event (torch, tensorboardX, Keras v1): wall time, step, then summary values that are
    only a tag and a ``simple_value``, in that order. Anything else: None (the general decoder runs)."""
    n = len(buf)
    if n < 12 or buf[0] != 0x09 or buf[9] != 0x10:
        return None
    (wall,) = _DOUBLE_AT(buf, 1)
    try:
        step, pos = _varint(buf, 10)
    except ProtoError:
        return None
    if pos >= n or buf[pos] != 0x2A:
        return None
    size, pos = _short_varint(buf, pos + 1)
    if size < 0 or pos + size != n:
        return None
    scalars: dict[str, float] = {}
    while pos < n:
        if buf[pos] != 0x0A:
            return None
        size, pos = _short_varint(buf, pos + 1)
        if size < 7 or buf[pos] != 0x0A:
            return None
        tag_len, tpos = _short_varint(buf, pos + 1)
        end = tpos + tag_len
        if tag_len < 0 or end + 5 != pos + size or buf[end] != 0x15:
            return None
        (val,) = _FLOAT_AT(buf, end + 1)
        if math.isfinite(val) and tag_len:
            scalars[buf[tpos:end].decode("utf-8", errors="replace")] = val
        pos += size
    return Event(wall, _signed(step), scalars)


def decode_event(buf: bytes) -> Event:
    """Decode an ``Event`` keeping only wall time, step and scalar summary values (the common layout
    by a fast path, ~3x quicker; the result is the same as :func:`decode_event_full`)."""
    fast = _simple_event(buf)
    return fast if fast is not None else decode_event_full(buf)


def decode_event_full(buf: bytes) -> Event:
    """Decode any ``Event``, field by field."""
    wall, step = math.nan, 0
    scalars: dict[str, float] = {}
    for num, _, raw in fields(buf):
        if num == 1 and isinstance(raw, bytes):
            (wall,) = _DOUBLE_LE(raw) if len(raw) == 8 else (math.nan,)
        elif num == 2 and isinstance(raw, int):
            step = _signed(raw)
        elif num == 5 and isinstance(raw, bytes):
            for vnum, _, value in fields(raw):
                if vnum == 1 and isinstance(value, bytes):
                    tag, val = summary_value(value)
                    if tag and val is not None and math.isfinite(val):
                        scalars[tag] = val
    return Event(wall, step, scalars)


def _plugin(metadata: bytes) -> str:
    for num, _, raw in fields(metadata):
        if num == 1 and isinstance(raw, bytes):
            for pnum, _, name in fields(raw):
                if pnum == 1 and isinstance(name, bytes):
                    return name.decode("utf-8", errors="replace")
    return ""


def summary_value(buf: bytes) -> tuple[str, float | None]:
    """(tag, scalar value or None) of one ``Summary.Value``."""
    tag, node_name, val, tensor, plugin = "", "", None, None, ""
    for num, _, raw in fields(buf):
        if not isinstance(raw, bytes):
            continue
        if num == 1:
            tag = raw.decode("utf-8", errors="replace")
        elif num == 7:
            node_name = raw.decode("utf-8", errors="replace")
        elif num == 2 and len(raw) == 4:
            (val,) = _FLOAT_LE(raw)
        elif num == 8:
            tensor = raw
        elif num == 9:
            plugin = _plugin(raw)
    if plugin not in ("", "scalars"):
        return tag or node_name, None
    if val is None and tensor is not None:
        val = tensor_scalar(tensor)
    return tag or node_name, val
