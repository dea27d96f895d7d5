"""What a preflight run found, from its ``preflight.json``: pure functions, no I/O.

A preflight job (``ddp-tui preflight``, ``ctrl+t`` in Compose) checks all_reduce,
broadcast and barrier over every rank and measures all_reduce bandwidth. It has no epochs,
metrics or checkpoint, so the jobs table, ``ls``, Run detail and ``verify`` show this
summary instead (see ``ddp_tui/trainer/preflight.py`` for the file it reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PreflightSummary:
    ok: bool | None  # None: preflight.json not written yet
    world_size: int | None = None
    backend: str | None = None
    hosts: tuple[str, ...] = ()  # by rank; empty in files from before hosts were recorded
    bandwidth_rows: int = 0
    largest_bytes: int | None = None
    busbw_gbps: float | None = None  # at the largest message size
    failed_ranks: tuple[int, ...] = ()
    error: str | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        """One word for a table cell."""
        return {True: "passed", False: "FAILED", None: "-"}[self.ok]

    @property
    def bandwidth_label(self) -> str:
        """Bus bandwidth at the largest size, for a table cell; "-" when not measured."""
        return "-" if self.busbw_gbps is None else f"bw {self.busbw_gbps:.3g}GB/s"

    def describe(self) -> str:
        """One line: the result, world size and bus bandwidth at the largest size."""
        if self.ok is None:
            return "preflight: no result yet"
        parts = [f"preflight {self.label}"]
        if self.world_size is not None:
            parts.append(f"world size {self.world_size}")
        if self.busbw_gbps is not None and self.largest_bytes is not None:
            parts.append(f"busbw {self.busbw_gbps:.3g} GB/s at {format_bytes(self.largest_bytes)}")
        elif self.note:
            parts.append(self.note)
        if self.error:
            parts.append(self.error)
        return ", ".join(parts)


def summarize(doc: Mapping[str, Any] | None) -> PreflightSummary:
    """The summary of a ``preflight.json`` document (None: not written yet)."""
    if not doc:
        return PreflightSummary(ok=None)
    rows = [r for r in doc.get("bandwidth") or () if isinstance(r, Mapping)]
    largest = max(rows, key=lambda r: _int(r.get("bytes")) or 0, default=None)
    hosts = doc.get("hosts")
    failed = doc.get("failed_ranks")
    return PreflightSummary(
        ok=bool(doc.get("ok")),
        world_size=_int(doc.get("world_size")),
        backend=doc.get("backend") if isinstance(doc.get("backend"), str) else None,
        hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
        bandwidth_rows=len(rows),
        largest_bytes=_int(largest.get("bytes")) if largest else None,
        busbw_gbps=_float(largest.get("busbw_gbps")) if largest else None,
        failed_ranks=tuple(r for r in failed if isinstance(r, int))
        if isinstance(failed, list)
        else (),
        error=str(doc["error"]) if doc.get("error") else None,
        note=str(doc["note"]) if doc.get("note") else None,
    )


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
