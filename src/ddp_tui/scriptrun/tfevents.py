"""Scalars out of a TensorBoard event file (``events.out.tfevents.*``), with the standard library.

The job side may import nothing the job's environment lacks, and tensorboard (or tbparse, which
wraps tensorboard's ``EventAccumulator`` and pandas) is not in every training environment: both
pull in protobuf and numpy, and tensorboard's loader is built for a live, growing log directory
(a reload thread, reservoir sampling). We need the scalars of a few small files once, so this
module reads the two stable formats it takes by hand:

- TFRecord framing: ``uint64 length``, ``uint32 masked CRC-32C of the length``, ``data``,
  ``uint32 masked CRC-32C of the data``, little-endian. The length's CRC is checked (a torn or
  foreign file stops the read there); the data's is not, since a scalar file is re-read whole
  and a record's protobuf parse fails on garbage anyway.
- The ``Event``/``Summary`` protobuf wire format: ``Event.step`` (field 2), ``Event.summary``
  (5) -> ``Summary.value`` (1) -> ``Value.tag`` (1) and either ``simple_value`` (2, a float:
  ``torch.utils.tensorboard``'s ``add_scalar``) or ``tensor`` (8, a one-element ``TensorProto``
  of float or double: TF2's and tensorboardX's newer form).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

_MASK_DELTA = 0xA282EAD8
_DT_FLOAT, _DT_DOUBLE = 1, 2


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as TFRecord uses it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def records(data: bytes) -> Iterator[bytes]:
    """The records of a TFRecord file's bytes, up to the first torn or foreign one."""
    pos = 0
    while pos + 12 <= len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        end = pos + 12 + length + 4
        if crc != masked_crc(header) or end > len(data):
            return
        yield data[pos + 12 : pos + 12 + length]
        pos = end


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of one protobuf message: ints for varints and
    fixed widths (their raw little-endian value), bytes for length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:  # groups (3, 4) are not in these messages
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield number, wire, value


def _tensor_scalar(buf: bytes) -> float | None:
    """A one-element float or double ``TensorProto``'s value."""
    dtype, content, floats, doubles = 0, b"", b"", b""
    for number, wire, value in fields(buf):
        if number == 1 and wire == 0:
            dtype = int(value)
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number == 5:  # float_val: packed (bytes) or one fixed32
            floats += value if isinstance(value, bytes) else value.to_bytes(4, "little")
        elif number == 6:  # double_val
            doubles += value if isinstance(value, bytes) else value.to_bytes(8, "little")
    if dtype == _DT_FLOAT:
        raw = floats or content
        return struct.unpack("<f", raw[:4])[0] if len(raw) >= 4 else None
    if dtype == _DT_DOUBLE:
        raw = doubles or content
        return struct.unpack("<d", raw[:8])[0] if len(raw) >= 8 else None
    return None


def _summary_values(buf: bytes) -> Iterator[tuple[str, float]]:
    for number, _, value in fields(buf):
        if number != 1 or not isinstance(value, bytes):
            continue
        tag, scalar = "", None
        for n, wire, v in fields(value):
            if n == 1 and isinstance(v, bytes):
                tag = v.decode(errors="replace")
            elif n == 2 and wire == 5 and isinstance(v, int):
                scalar = struct.unpack("<f", v.to_bytes(4, "little"))[0]
            elif n == 8 and isinstance(v, bytes):
                scalar = _tensor_scalar(v)
        if tag and scalar is not None:
            yield tag, scalar


def scalars(path: Path) -> list[tuple[int, str, float]]:
    """Every scalar of an event file: ``(step, tag, value)`` in file order. A record that is no
    Event (or a file that is no event file) ends the read; what came before it is kept."""
    out: list[tuple[int, str, float]] = []
    for record in records(path.read_bytes()):
        try:
            step, summary = 0, b""
            for number, _, value in fields(record):
                if number == 2 and isinstance(value, int):
                    step = value - (1 << 64) if value >= 1 << 63 else value
                elif number == 5 and isinstance(value, bytes):
                    summary = value
            out += [(step, tag, v) for tag, v in _summary_values(summary)]
        except (ValueError, struct.error):
            break
    return out
