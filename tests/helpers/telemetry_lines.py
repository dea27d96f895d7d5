"""Sampler lines as ``ddp_tui.telemetry`` writes them (the contract in docs/architecture.md),
built by hand for the summary tests: a host sample and a GPU sample, any field overridable."""

from __future__ import annotations

from typing import Any

T0 = 1_700_000_000.0


def host(t: float, rss: float, *, node: int = 0, on: str = "n1", **kw: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "t": T0 + t,
        "kind": "host",
        "host": on,
        "node": node,
        "ranks": "0-1",
        "job": "7",
        "restart": 0,
        "rss_mib": rss,
        "procs": 3,
        "load1": 1.5,
        "mem_total_mib": 64000.0,
        "cpus": 8,
    }
    line.update(kw)
    return line


def gpu(
    t: float,
    used: float,
    *,
    index: int = 0,
    util: float | None = 90.0,
    node: int = 0,
    on: str = "n1",
    **kw: Any,
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "t": T0 + t,
        "kind": "gpu",
        "host": on,
        "node": node,
        "ranks": str(index),
        "job": "7",
        "restart": 0,
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "NVIDIA A100",
        "mem_used_mib": used,
        "mem_total_mib": 81920.0,
        "util_pct": util,
        "power_w": 200.0,
    }
    line.update(kw)
    return line
