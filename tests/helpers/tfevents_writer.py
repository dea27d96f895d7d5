"""TensorBoard event files written byte for byte as ``torch.utils.tensorboard`` and TF2 write
them, for the reader's tests (tensorboard is not installed here, and need not be).

The wire format, from tensorboard's ``event.proto``/``summary.proto``/``tensor.proto``:
``Event{wall_time=1 (double), step=2 (int64), file_version=3 (string), summary=5}``,
``Summary{value=1 (repeated)}``, ``Summary.Value{tag=1, simple_value=2 (float), tensor=8}``,
``TensorProto{dtype=1, tensor_shape=2, tensor_content=4, float_val=5 (packed), double_val=6}``;
each Event framed as a TFRecord with masked CRC-32C checksums.
"""

from __future__ import annotations

import struct
from pathlib import Path

from ddp_tui.scriptrun.tfevents import masked_crc


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as protobuf writes them: ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, wire: int, payload: bytes) -> bytes:
    key = varint(number << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def scalar_value(tag: str, value: float, form: str = "simple") -> bytes:
    """A ``Summary.Value``: ``simple`` (add_scalar), ``tensor-float``/``tensor-double`` (TF2)."""
    body = field(1, 2, tag.encode())
    if form == "simple":
        return body + field(2, 5, struct.pack("<f", value))
    if form == "tensor-float":
        tensor = field(1, 0, varint(1)) + field(2, 2, b"") + field(5, 2, struct.pack("<f", value))
    else:
        tensor = field(1, 0, varint(2)) + field(2, 2, b"") + field(4, 2, struct.pack("<d", value))
    return body + field(9, 2, field(3, 2, b"scalars")) + field(8, 2, tensor)


def event(step: int, values: list[bytes], wall_time: float = 1.7e9) -> bytes:
    summary = b"".join(field(1, 2, v) for v in values)
    return (
        field(1, 1, struct.pack("<d", wall_time)) + field(2, 0, varint(step)) + field(5, 2, summary)
    )


def frame(record: bytes) -> bytes:
    header = struct.pack("<Q", len(record))
    return (
        header
        + struct.pack("<I", masked_crc(header))
        + record
        + struct.pack("<I", masked_crc(record))
    )


def write_events(path: Path, events: list[bytes]) -> Path:
    """An event file: the ``file_version`` event first, as every writer puts it."""
    version = field(1, 1, struct.pack("<d", 1.7e9)) + field(3, 2, b"brain.Event:2")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(frame(e) for e in [version, *events]))
    return path
