"""The telemetry file's JSON lines (``start``, ``host``, ``gpu``, ``note``) and the rank ranges
they carry (written by :func:`ddp_tui.jobfiles.format_ranks`); the shapes are the run-directory
contract in docs/architecture.md.

Annotations only name ``list[...]`` and ``X | None``: postponed (``from __future__ import
annotations``), they are never evaluated, so they work on the Python 3.8 a job may run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ddp_tui.jobfiles import format_ranks


@dataclass(frozen=True)
class Origin:
    """What every line of one sampler says about where it comes from."""

    host: str
    node: int
    job: str
    restart: int


def layout_ranks(node: int, ranks_per_node: int | None) -> str:
    """The ranks a node holds in the usual layout, K*N .. K*N+N-1; ``""`` when N is unknown."""
    if not ranks_per_node or ranks_per_node < 1 or node < 0:
        return ""
    return format_ranks(range(node * ranks_per_node, (node + 1) * ranks_per_node))


def line(kind: str, t: float, origin: Origin, ranks: str, **fields: Any) -> dict[str, Any]:
    """One line: the common fields, then the kind's own."""
    record: dict[str, Any] = {
        "t": round(t, 3),
        "kind": kind,
        "host": origin.host,
        "node": origin.node,
        "ranks": ranks,
        "job": origin.job,
        "restart": origin.restart,
    }
    record.update(fields)
    return record


def encode(records: Iterable[dict[str, Any]]) -> bytes:
    """Compact JSON lines, each ending in a newline, for one ``os.write``."""
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    return text.encode("utf-8", "replace")
