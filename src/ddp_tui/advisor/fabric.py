"""The all-reduce's cost: the alpha-beta model of a ring, fitted to measured tables.

A ring all-reduce of ``m`` bytes over ``n`` ranks takes ``2(n-1)`` steps, each paying the
latency alpha and moving ``m/n`` bytes at the link bandwidth beta: ``T = 2(n-1)*alpha +
2(n-1)/n * m / beta``. nccl-tests' bus bandwidth (busbw = algbw x 2(n-1)/n) is exactly the
beta this model sees, which is why a preflight's busbw at one size predicts the time at
another. DDP all-reduces the gradients bucket by bucket, so a step pays alpha per bucket.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ddp_tui.advisor.inputs import FabricSample

#: Messages this small are all latency: alpha is read from them.
LATENCY_BYTES = 64 * 2**10
#: beta is read from the table's rows within this factor of the message DDP sends.
WINDOW = 8


@dataclass(frozen=True)
class Link:
    alpha_sec: float  # per ring step
    beta_bytes_per_sec: float  # what one link carries: the bus bandwidth
    kind: str  # "intra-node" or "inter-node"
    source: str  # where it was measured, in words

    @property
    def busbw_gbps(self) -> float:
        return self.beta_bytes_per_sec / 1e9


def ring_factor(world_size: int) -> float:
    """The share of a message each link carries in a ring all-reduce: 2(n-1)/n."""
    return 2 * (world_size - 1) / world_size if world_size > 1 else 0.0


def allreduce_sec(link: Link, world_size: int, nbytes: float, messages: int = 1) -> float:
    """Seconds to all-reduce ``nbytes`` sent as ``messages`` equal messages."""
    if world_size <= 1 or nbytes <= 0:
        return 0.0
    latency = max(1, messages) * 2 * (world_size - 1) * link.alpha_sec
    return latency + ring_factor(world_size) * nbytes / link.beta_bytes_per_sec


def fit_link(sample: FabricSample, kind: str, around_bytes: float) -> Link | None:
    """alpha from the table's smallest messages, beta from the rows near ``around_bytes`` (the
    message DDP sends: bandwidth on real fabrics, and on loopback gloo even more, depends on
    the message's size, so the rows that matter are the ones of that size)."""
    n = sample.world_size
    small = [t for m, t in sample.rows if m <= LATENCY_BYTES]
    alpha = min(small) / (2 * (n - 1)) if small else 0.0
    near = [(m, t) for m, t in sample.rows if around_bytes / WINDOW <= m <= around_bytes * WINDOW]
    if not near:  # a table that stops short of the message: its largest rows
        near = sorted(sample.rows)[-2:]
    betas = [
        ring_factor(n) * m / (t - 2 * (n - 1) * alpha) for m, t in near if t > 2 * (n - 1) * alpha
    ]
    if not betas:
        return None
    return Link(
        alpha,
        statistics.median(betas),
        kind,
        f"preflight {sample.run_id} ({n} ranks on {sample.nodes} node"
        f"{'s' if sample.nodes > 1 else ''})",
    )


def probe_link(run_id: str, world_size: int, probe: tuple[int, float], kind: str) -> Link | None:
    """The trainer's own measure: one message of ``probe[0]`` bytes in ``probe[1]`` seconds.
    One point cannot split alpha from beta; at a bucket's size the bandwidth term rules."""
    nbytes, seconds = probe
    if world_size < 2 or seconds <= 0:
        return None
    return Link(
        0.0, ring_factor(world_size) * nbytes / seconds, kind, f"trainer's probe in {run_id}"
    )
