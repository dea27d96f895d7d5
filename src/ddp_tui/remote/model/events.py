"""What a notification is about: a run that ended, a run that stalled, a group that finished.

A refresh claims each event exactly once across every ddp-tui process
(:mod:`ddp_tui.remote.runs.reactions.notify`) and hands the ones this process claimed to its
caller, which delivers them (``ddp_tui.notify_delivery``: a toast, the bell, a desktop
notification, the profile's ``notify_command``). Pure values; see docs/notifications.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The event kinds, as the JSON object's ``event`` says them.
RUN_END = "run_end"
RUN_STALLED = "run_stalled"
GROUP_FINISHED = "group_finished"
EVENT_KINDS = (RUN_END, RUN_STALLED, GROUP_FINISHED)


@dataclass(frozen=True)
class NotifyEvent:
    """One event, as claimed. :meth:`to_json` is what ``notify_command`` reads on stdin."""

    kind: str  # RUN_END, RUN_STALLED or GROUP_FINISHED
    #: The claim's path: unique per event, the same in every process.
    claim: str
    name: str  # the run's name; a group's key
    state: str  # the job state (a group: its worst member's)
    time: str  # ISO 8601, UTC: when the end was recorded, or the stall/group seen
    run_id: str | None = None  # None for a group
    job_id: str | None = None
    exit_code: int | None = None
    #: The diagnosis's short form (``cuda-oom``-like words, at most 32 characters), or a
    #: stall's ``stalled 12 min``; empty where there is none.
    diagnosis: str = ""
    group: str | None = None
    #: How long the attempt ran (a group: its longest member's), in seconds.
    elapsed_sec: float | None = None
    run_dir: str = ""
    #: One line in words: the stall's summary, or a group's tally of states.
    summary: str = ""
    runs: tuple[str, ...] = ()  # a group's run ids

    def to_json(self) -> dict[str, Any]:
        """The object ``notify_command`` gets on stdin (docs/notifications.md)."""
        return {
            "event": self.kind,
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            "exit_code": self.exit_code,
            "diagnosis": self.diagnosis,
            "group": self.group,
            "elapsed_sec": self.elapsed_sec,
            "job_id": self.job_id,
            "time": self.time,
            "run_dir": self.run_dir,
            "summary": self.summary,
            "runs": list(self.runs),
        }

    @property
    def failed(self) -> bool:
        """Whether the event asks for attention: an end other than COMPLETED, a stall."""
        return self.kind == RUN_STALLED or self.state != "COMPLETED"

    @property
    def title(self) -> str:
        """``ddp-tui: resnet-4n FAILED``: a notification's title."""
        if self.kind == GROUP_FINISHED:
            return f"ddp-tui: group {self.name} finished"
        if self.kind == RUN_STALLED:
            return f"ddp-tui: {self.name} stalled"
        return f"ddp-tui: {self.name} {self.state}"

    @property
    def body(self) -> str:
        """The rest in one line: run id, exit code, elapsed time, diagnosis or summary."""
        parts: list[str] = []
        if self.run_id:
            parts.append(self.run_id)
        if self.kind == GROUP_FINISHED:
            parts.append(self.summary)
        elif self.kind == RUN_STALLED:
            parts.append(self.summary or self.diagnosis)
        else:
            if self.exit_code is not None:
                parts.append(f"exit {self.exit_code}")
            if self.elapsed_sec is not None:
                parts.append(_duration(self.elapsed_sec))
            if self.diagnosis:
                parts.append(self.diagnosis)
        return " · ".join(p for p in parts if p)


def _duration(sec: float) -> str:
    sec = max(0, round(sec))
    h, rest = divmod(sec, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")
