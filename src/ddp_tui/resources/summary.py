"""The shapes of a run's resource summary, and what it says in words (table rows, why empty).

Constants and frozen dataclasses only, with the functions that read them: the accumulator
(:mod:`ddp_tui.resources.accumulator`) builds them, the CLI and the Resources tab show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MODE_BIN_MIB: Final = 64
#: A device at or below this utilisation (%) is idle...
IDLE_UTIL_PCT: Final = 5.0
#: ...and flagged when it has been idle this long (s) in a running job.
IDLE_AFTER_SEC: Final = 180.0
#: Points per series; beyond it adjacent pairs merge (memory: their max, utilisation: mean).
MAX_POINTS: Final = 600

RESOURCE_TABLE_HEADER: Final = (
    "what",
    "host",
    "ranks",
    "peak MiB",
    "avg MiB",
    "mode MiB",
    "total MiB",
    "util avg %",
    "power avg W",
    "CPU avg %",
)

# Job states (``ddp_tui.remote.backends.states.JobState`` values; the domain takes them as text).
PENDING_STATES = frozenset({"PENDING", "REQUEUED"})
#: Running now: idle devices are flagged only then.
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING"})
#: Not ended: no samples yet is no surprise (a suspended job, a state not known just now).
_UNENDED_STATES = RUNNING_STATES | {"SUSPENDED", "UNKNOWN"}


@dataclass(frozen=True)
class MemoryStats:
    """Of one device's or one node's memory samples, MiB (None: no samples).

    ``mode`` is the mean of the samples in the most populated 64 MiB bin (ties: the higher
    bin): the level a job sits at for most of its life, which a peak overstates.
    """

    count: int
    peak: float | None
    mean: float | None
    mode: float | None


@dataclass(frozen=True)
class DeviceSummary:
    host: str
    node: int
    index: int
    name: str
    ranks: str
    total_mib: float | None
    memory: MemoryStats
    util_avg: float | None
    power_avg: float | None
    power_peak: float | None
    #: How long util has been <= IDLE_UTIL_PCT up to its last sample (0: not idle).
    idle_sec: float


@dataclass(frozen=True)
class HostSummary:
    host: str
    node: int
    ranks: str
    memory: MemoryStats  # the job's RSS on this node, children included
    cpu_avg: float | None  # % of one core
    load_peak: float | None
    mem_total_mib: float | None
    cpus: int | None


@dataclass(frozen=True)
class Series:
    """For plots: ``x`` in minutes since the run's first sample (all nodes), ``y`` values."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class ResourceSummary:
    devices: tuple[DeviceSummary, ...]  # sorted by (node, index)
    hosts: tuple[HostSummary, ...]  # sorted by node
    notes: tuple[str, ...]  # "n1: cannot read /proc: ..." (host-prefixed, deduped)
    gpu_sources: tuple[str, ...]  # "n1: none", ...
    samples: int  # host and gpu lines taken
    first_t: float | None
    last_t: float | None
    attempts: tuple[str, ...]  # "123", "123.1" (job, or job.restart when restart > 0)
    # For Compare (None when there are no such samples).
    gpu_mem_peak_mib: float | None  # max over devices of their peak
    gpu_mem_mode_mib: float | None  # max over devices of their mode
    host_mem_peak_mib: float | None  # max over nodes of their peak job RSS
    gpu_util_avg: float | None  # mean over every device sample with a util value

    @property
    def empty(self) -> bool:
        """No host and no GPU samples."""
        return self.samples == 0


@dataclass(frozen=True)
class ResourceView:
    """What the Resources tab shows of one run."""

    summary: ResourceSummary
    gpu_memory: tuple[Series, ...]
    gpu_util: tuple[Series, ...]
    host_memory: tuple[Series, ...]
    empty_reason: str | None  # why there is nothing to show (None when there are samples)
    running: bool  # the run is running now (idle flags apply only then)
    interval_sec: int  # the spec's telemetry_sec


def idle_devices(view: ResourceView) -> list[DeviceSummary]:
    """The devices of a running job that have been idle for IDLE_AFTER_SEC or longer."""
    if not view.running:
        return []
    return [d for d in view.summary.devices if d.idle_sec >= IDLE_AFTER_SEC]


def empty_reason(*, telemetry_sec: int, state: str, summary: ResourceSummary | None) -> str | None:
    """Why there are no samples to show, in words (None when there are some).

    ``state`` is a JobState value ("PENDING", "RUNNING", "COMPLETED", ...).
    """
    if summary is not None and not summary.empty:
        return None
    if telemetry_sec <= 0:
        reason = "telemetry is off for this run (telemetry every 0 s)"
    elif state in PENDING_STATES:
        reason = "the job has not started yet: telemetry begins when it runs"
    elif state in _UNENDED_STATES:
        reason = f"no samples yet: the first comes about {telemetry_sec} s after the job starts"
    else:
        reason = (
            "this run wrote no telemetry: it was submitted before telemetry existed, "
            "or its sampler could not start"
        )
    if summary is not None and summary.notes:
        reason += "; the sampler said: " + "; ".join(summary.notes)
    return reason


def _fmt(value: float | int | None, spec: str = ".0f") -> str:
    return "" if value is None else format(value, spec)


def resources_table(summary: ResourceSummary) -> list[tuple[str, ...]]:
    """Rows under :data:`RESOURCE_TABLE_HEADER`: each node's job RSS, then its devices."""
    rows: list[tuple[tuple[int, str, int], tuple[str, ...]]] = []
    for h in summary.hosts:
        m = h.memory
        memory = (_fmt(m.peak), _fmt(m.mean), _fmt(m.mode), _fmt(h.mem_total_mib))
        cells = ("host RSS", h.host, h.ranks, *memory, "", "", _fmt(h.cpu_avg))
        rows.append(((h.node, h.host, -1), cells))
    for d in summary.devices:
        m = d.memory
        memory = (_fmt(m.peak), _fmt(m.mean), _fmt(m.mode), _fmt(d.total_mib))
        what = f"gpu{d.index} {d.name}".strip()
        usage = (_fmt(d.util_avg, ".1f"), _fmt(d.power_avg), "")
        rows.append(((d.node, d.host, d.index), (what, d.host, d.ranks, *memory, *usage)))
    rows.sort(key=lambda r: r[0])
    return [cells for _, cells in rows]


def attempts_text(attempts: tuple[str, ...]) -> str:
    """Which attempts sampled, e.g. ``sampled by job 7`` or ``sampled by jobs 7, 7.1`` (7.1:
    job 7 after its first requeue); "" when none did."""
    if not attempts:
        return ""
    word = "job" if len(attempts) == 1 else "jobs"
    return f"sampled by {word} " + ", ".join(attempts)
