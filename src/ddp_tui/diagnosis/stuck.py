"""Which ranks are stuck: behind the leader, where each one is, and since when (pure).

Each rank's progress comes from what it last wrote: the trainer's heartbeat
(``heartbeats/rank-N.json``: epoch, step, time) or, for a user's script, its observation
journal's last ``step`` or ``epoch`` record (``observe/<attempt>-<host>-<pid>.jsonl``). The
leader is the rank furthest on (epoch, then step); a rank below it is *behind*. Where each
rank is comes from its stack (:mod:`ddp_tui.diagnosis.stacks`), since when from its last
progress (else from when it registered for stack dumps, i.e. its start).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddp_tui.diagnosis.stacks import ProcessStack
from ddp_tui.diagnosis.stall import Heartbeat, duration_label


@dataclass(frozen=True)
class RankProgress:
    """Where one rank last said it was."""

    rank: int
    host: str = ""
    epoch: int | None = None
    step: int | None = None
    t: float | None = None  # epoch seconds of that record
    phase: str = ""

    @property
    def position(self) -> tuple[int, int] | None:
        return None if self.epoch is None else (self.epoch, self.step or 0)

    @property
    def position_label(self) -> str:
        if self.epoch is None:
            return "no progress yet"
        text = f"epoch {self.epoch} step {self.step or 0}"
        return f"{text} ({self.phase})" if self.phase and self.phase != "train" else text


def progress_from_heartbeats(heartbeats: Iterable[Heartbeat]) -> list[RankProgress]:
    """The trainer's heartbeats as progress (the newest per rank)."""
    latest: dict[int, Heartbeat] = {}
    for b in heartbeats:
        if b.rank not in latest or b.t > latest[b.rank].t:
            latest[b.rank] = b
    return [RankProgress(b.rank, b.host, b.epoch, b.step, b.t, b.phase) for b in latest.values()]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def progress_from_journal(
    records: Iterable[Mapping[str, Any]], rank: int, host: str = ""
) -> RankProgress:
    """A script rank's progress from its journal's records (any part of it, in order): the
    last ``step`` record, or the last ``epoch`` record where that is newer (a finished epoch
    stands at its last step)."""
    best = RankProgress(rank, host)
    for r in records:
        kind, t, epoch = r.get("kind"), _number(r.get("t")), r.get("epoch")
        if t is None or not isinstance(epoch, int) or isinstance(epoch, bool):
            continue
        if kind == "step":
            step = r.get("step")
            step = step if isinstance(step, int) and not isinstance(step, bool) else 0
        elif kind == "epoch":
            steps = r.get("steps")
            step = steps if isinstance(steps, int) and not isinstance(steps, bool) else 0
        else:
            continue
        if best.t is None or t >= best.t:
            best = RankProgress(rank, host, epoch, step, t)
    return best


@dataclass(frozen=True)
class StuckRank:
    """One row of the stuck-ranks table."""

    rank: int
    host: str
    position: str  # "epoch 2 step 40", "no progress yet"
    behind: bool  # below the leader
    where: str  # its stack's summary, "" when no stack was taken
    since: float | None  # its last progress (or start), epoch seconds
    quiet_sec: float | None

    @property
    def summary(self) -> str:
        """``rank 1 on n2: behind at epoch 1 step 3, in slow_step at script.py:12, quiet
        45 s``."""
        head = f"rank {self.rank}" + (f" on {self.host}" if self.host else "")
        parts = [("behind at " if self.behind else "at ") + self.position]
        if self.where:
            parts.append(self.where)
        if self.quiet_sec is not None:
            parts.append(f"quiet {duration_label(self.quiet_sec)}")
        return f"{head}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "position": self.position,
            "behind": self.behind,
            "where": self.where,
            "since": self.since,
            "quiet_sec": self.quiet_sec,
            "summary": self.summary,
        }


def stuck_ranks(
    progress: Sequence[RankProgress],
    stacks: Sequence[ProcessStack] = (),
    *,
    now: float,
    started: Mapping[int, float] | None = None,
    world_size: int | None = None,
) -> list[StuckRank]:
    """The table: every rank known from its progress, its stack or ``world_size``; the ranks
    behind first (the furthest behind first, then the quietest), then the rest by rank.
    ``started``: each rank's start time, the "since" of a rank with no progress yet."""
    by_rank = {p.rank: p for p in progress}
    stack_of = {s.rank: s for s in stacks if s.rank is not None}
    ranks = set(by_rank) | set(stack_of) | set(range(world_size or 0))
    positions = [p.position for p in progress if p.position is not None]
    leader = max(positions) if positions else None
    rows: list[StuckRank] = []
    for rank in sorted(ranks):
        p = by_rank.get(rank, RankProgress(rank))
        s = stack_of.get(rank)
        since = p.t if p.t is not None else (started or {}).get(rank)
        pos = p.position
        behind = leader is not None and (pos is None or pos < leader)
        rows.append(
            StuckRank(
                rank=rank,
                host=p.host or (s.host if s else ""),
                position=p.position_label,
                behind=behind,
                where=s.where if s else "",
                since=since,
                quiet_sec=max(0.0, now - since) if since is not None else None,
            )
        )

    def order(r: StuckRank) -> tuple[int, tuple[int, int], float, int]:
        pos = by_rank[r.rank].position if r.rank in by_rank else None
        return (0 if r.behind else 1, pos or (-1, -1), -(r.quiet_sec or 0.0), r.rank)

    return sorted((r for r in rows if r.behind), key=order) + [r for r in rows if not r.behind]


def stuck_summary(rows: Sequence[StuckRank], *, named: int = 2) -> str:
    """``rank 1 on n2: behind at epoch 1 step 3, in slow_step at script.py:12; 2 more
    behind`` (only the ranks behind; "" when none is)."""
    behind = [r for r in rows if r.behind]
    text = "; ".join(r.summary for r in behind[:named])
    rest = len(behind) - named
    if rest > 0:
        text += f"; {rest} more behind"
    return text
