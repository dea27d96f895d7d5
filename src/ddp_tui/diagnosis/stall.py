"""Whether a running job has stalled, and which of its ranks went silent (pure).

The facade hands over the times of a running job's latest activity (its logs' and
``progress.jsonl``'s mtimes, the ``heartbeats/`` directory's mtime) and, where it read
them, the ranks' heartbeats (``heartbeats/rank-N.json``, written by
:class:`ddp_tui.jobfiles.Heartbeater`). A job is stalled when none of these moved for the
profile's ``stall_after_min``; its silent ranks are the ones whose own heartbeat is that old
or missing. See docs/architecture.md, "Diagnosis".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The default quiet time before a running job is called stalled (the profile's
#: ``stall_after_min`` changes it).
STALL_AFTER_SEC = 600.0
#: A rank whose heartbeat says this has finished training: quiet, but not silent.
DONE = "done"
#: How many silent ranks :attr:`Stall.summary` names before it only counts the rest.
NAMED_IN_SUMMARY = 2


def _int(value: object) -> int | None:
    # bool is an int to Python, never to a heartbeat.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Heartbeat:
    """One rank's latest ``heartbeats/rank-N.json``."""

    rank: int
    host: str
    pid: int
    t: float  # epoch seconds, the job node's clock
    epoch: int
    step: int
    phase: str  # "setup", "train", "eval", "checkpoint", "done"

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Heartbeat | None:
        """The heartbeat in ``doc``, or None when it has no usable rank or time (a file
        from something else, or damaged); the other fields fall back to empty values."""
        rank = _int(doc.get("rank"))
        t = doc.get("t")
        if rank is None or rank < 0 or isinstance(t, bool) or not isinstance(t, int | float):
            return None
        if not math.isfinite(t):
            return None
        host, phase = doc.get("host"), doc.get("phase")
        return cls(
            rank=rank,
            host=host if isinstance(host, str) else "",
            pid=_int(doc.get("pid")) or 0,
            t=float(t),
            epoch=_int(doc.get("epoch")) or 0,
            step=_int(doc.get("step")) or 0,
            phase=phase if isinstance(phase, str) else "",
        )


@dataclass(frozen=True)
class SilentRank:
    rank: int
    host: str  # "" when the rank never wrote a heartbeat
    quiet_sec: float | None  # None: never heard from
    epoch: int | None
    step: int | None
    phase: str = ""  # the phase of its last heartbeat; "" when never heard from

    @property
    def description(self) -> str:
        """``rank 1 on n2 silent since epoch 2 step 40``, or ``rank 3 never heard from``."""
        if self.quiet_sec is None:
            return f"rank {self.rank} never heard from"
        where = f"rank {self.rank} on {self.host}" if self.host else f"rank {self.rank}"
        if self.phase == "setup":
            return f"{where} silent since setup"
        since = f"{where} silent since epoch {self.epoch} step {self.step}"
        if self.phase and self.phase != "train":
            since += f" ({self.phase})"
        return since


@dataclass(frozen=True)
class Stall:
    """A running job that has produced nothing for ``quiet_sec``."""

    quiet_sec: float
    last_activity: float  # epoch seconds of the newest output, progress or heartbeat
    silent_ranks: tuple[SilentRank, ...] = ()  # the furthest behind first

    @property
    def quiet_label(self) -> str:
        """``12 min``: how long the job has been quiet, for ``stalled 12 min``."""
        return duration_label(self.quiet_sec)

    @property
    def summary(self) -> str:
        """``no output, progress or heartbeat for 12 min; rank 1 on n2 silent since epoch 2
        step 40`` (the furthest-behind ranks first, the rest counted)."""
        text = f"no output, progress or heartbeat for {self.quiet_label}"
        named = [r.description for r in self.silent_ranks[:NAMED_IN_SUMMARY]]
        if named:
            text += "; " + "; ".join(named)
        rest = len(self.silent_ranks) - len(named)
        if rest:
            text += f"; {rest} more rank{'s' if rest > 1 else ''} silent"
        return text


def duration_label(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2 h 5 min`` (rounded down: a stall is never overstated)."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _latest_by_rank(
    heartbeats: Sequence[Heartbeat], world_size: int | None
) -> dict[int, Heartbeat]:
    latest: dict[int, Heartbeat] = {}
    for beat in heartbeats:
        # A rank at or beyond the world size is a stale file from an earlier, larger attempt.
        if world_size is not None and beat.rank >= world_size:
            continue
        seen = latest.get(beat.rank)
        if seen is None or beat.t > seen.t:
            latest[beat.rank] = beat
    return latest


def silent_ranks(
    *,
    now: float,
    after_sec: float,
    heartbeats: Sequence[Heartbeat],
    world_size: int | None = None,
) -> tuple[SilentRank, ...]:
    """Ranks whose heartbeat is older than ``after_sec`` (or, for ranks below
    ``world_size``, missing), the furthest behind first: never heard from, then by lowest
    epoch, step and oldest beat. A rank whose last beat says "done" is not silent."""
    latest = _latest_by_rank(heartbeats, world_size)
    found: list[SilentRank] = []
    for rank in range(world_size or 0):
        if rank not in latest:
            found.append(SilentRank(rank, "", None, None, None))
    for beat in latest.values():
        quiet = max(0.0, now - beat.t)
        if beat.phase != DONE and quiet > after_sec:
            found.append(SilentRank(beat.rank, beat.host, quiet, beat.epoch, beat.step, beat.phase))

    def behind(r: SilentRank) -> tuple[int, int, int, float, int]:
        if r.quiet_sec is None:
            return (0, 0, 0, 0.0, r.rank)
        return (1, r.epoch or 0, r.step or 0, -r.quiet_sec, r.rank)

    return tuple(sorted(found, key=behind))


def stall_of(
    *,
    now: float,
    activity: Sequence[float | None],
    after_sec: float,
    heartbeats: Sequence[Heartbeat] = (),
    world_size: int | None = None,
) -> Stall | None:
    """The stall of a running job at ``now``, or None when it is not stalled.

    Stalled: the newest of ``activity`` (epoch seconds; None ignored) and of the heartbeats'
    times is more than ``after_sec`` ago. With no time at all nothing can be judged (None).
    ``after_sec <= 0`` turns the rule off (None)."""
    if not after_sec > 0:  # also NaN
        return None
    times = [t for t in activity if t is not None and math.isfinite(t)]
    times += [beat.t for beat in heartbeats]
    if not times:
        return None
    last = max(times)
    quiet = now - last
    if not quiet > after_sec:
        return None
    return Stall(
        quiet_sec=quiet,
        last_activity=last,
        silent_ranks=silent_ranks(
            now=now, after_sec=after_sec, heartbeats=heartbeats, world_size=world_size
        ),
    )
