"""Waiting, bounded, for the answer of a small job ddp-tui sends to find something out (the
detection probe, the environment check): the job writes its answer to a file, and this
reads the file until the answer is complete, the job ended without one, or the bound.

The bound is the caller's (seconds of queue wait it can afford): a job still queued then is
left to run, and its file is read by a later call. The job's state is asked every few
seconds at most (squeue and sacct on Slurm); the file, which costs one read, more often.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.submit.state_file import StateFile

#: When the scheduler is first asked whether the job still lives (a job that fails at once
#: ends within it), and how often at most later on (the pauses double between).
FIRST_STATE_SEC = 0.5
STATE_EVERY_SEC = 2.0
#: The first pause between reads of the file, and the longest (the pauses grow between).
FIRST_PAUSE_SEC = 0.05
LONGEST_PAUSE_SEC = 0.5


#: A job remembered as queued is given up after this long (it is long gone, or forgotten).
PENDING_MAX_SEC = 24 * 3600.0


@dataclass(frozen=True)
class PendingProbe:
    """A job sent and not answered yet: its id, its answer's file, when it was sent."""

    job_id: str
    out_path: str
    submitted_at: float

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "out_path": self.out_path, "submitted_at": self.submitted_at}

    @classmethod
    def of(cls, doc: object, *, now: float | None = None) -> PendingProbe | None:
        """The job a remembered record names, unless damaged or older than
        :data:`PENDING_MAX_SEC`."""
        if not isinstance(doc, dict):
            return None
        job, out, at = doc.get("job_id"), doc.get("out_path"), doc.get("submitted_at")
        if not (isinstance(job, str) and isinstance(out, str) and isinstance(at, int | float)):
            return None
        elapsed = (time.time() if now is None else now) - at
        return cls(job, out, float(at)) if 0 <= elapsed <= PENDING_MAX_SEC else None


class ProbeKey(Protocol):
    """What a remembered answer is for; ``text()`` is its key in the file."""

    def text(self) -> str: ...

    def described(self) -> dict[str, Any]:
        """What the entry says of its key, for a person reading the file."""
        ...


K = TypeVar("K", bound=ProbeKey)


class ProbeCache(StateFile, Generic[K]):
    """Answers found out by a probe job, and the probe still queued, by key: one entry per
    key, holding the answer's own fields (a subclass's) or ``pending``."""

    def entry(self, key: K) -> dict[str, Any]:
        entry = self.load().get(key.text())
        return entry if isinstance(entry, dict) else {}

    def put_entry(self, key: K, entry: dict[str, Any]) -> None:
        data = self.load()
        data[key.text()] = {**key.described(), **entry}
        self.save(data)

    def pending(self, key: K, *, now: float | None = None) -> PendingProbe | None:
        return PendingProbe.of(self.entry(key).get("pending"), now=now)

    def put_pending(self, key: K, probe: PendingProbe) -> None:
        self.put_entry(key, {"pending": probe.to_dict()})

    def forget(self, key: K) -> None:
        """Drop what is remembered for ``key``: the next ask sends a probe."""
        data = self.load()
        if data.pop(key.text(), None) is not None:
            self.save(data)


@dataclass(frozen=True)
class Awaited:
    """What waiting for a job's answer found: ``text`` the file's whole text once
    ``complete`` said so (None before); ``ended`` when the job ended without a complete
    answer (its ``state``, and what the file held then, in ``partial``)."""

    text: str | None
    ended: bool = False
    state: str = ""
    partial: str = ""

    @property
    def pending(self) -> bool:
        """The job neither answered nor ended within the bound."""
        return self.text is None and not self.ended


def read_text(executor: Executor, path: str) -> str | None:
    """The file's text, or None while it does not exist (or cannot be read)."""
    try:
        return executor.read_range(path).decode("utf-8", "replace")
    except (OSError, ExecutorError):
        return None


def await_answer(
    executor: Executor,
    scheduler: Scheduler,
    job_id: str,
    path: str,
    *,
    complete: Callable[[str], bool],
    wait_sec: float,
    stop_when_queued: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Awaited:
    """Read ``path`` until ``complete(text)``, job ``job_id`` ended, or ``wait_sec``
    passed. The job's state is asked at least once (at the bound), so that a job that
    died is told from one still queued. ``stop_when_queued``: a job found waiting in the
    queue ends the wait at once (the local scheduler's queue waits for a running job to
    end, which may take hours)."""
    deadline = clock() + max(0.0, wait_sec)
    state_pause = FIRST_STATE_SEC
    next_state = clock() + state_pause
    pause = FIRST_PAUSE_SEC
    while True:
        text = read_text(executor, path)
        if text is not None and complete(text):
            return Awaited(text)
        now = clock()
        if now >= next_state or now >= deadline:
            state = _job_state(scheduler, job_id)
            if stop_when_queued and state is JobState.PENDING:
                return Awaited(None)
            if state is not None and state.is_terminal:
                # The job may have written its last line just before it ended.
                text = read_text(executor, path)
                if text is not None and complete(text):
                    return Awaited(text)
                return Awaited(None, ended=True, state=state.value, partial=text or "")
            state_pause = min(state_pause * 2, STATE_EVERY_SEC)
            next_state = now + state_pause
        if now >= deadline:
            return Awaited(None)
        sleep(min(pause, max(0.0, deadline - now)))
        pause = min(pause * 1.5, LONGEST_PAUSE_SEC)


def _job_state(scheduler: Scheduler, job_id: str) -> JobState | None:
    """The job's state (None where the scheduler cannot tell)."""
    try:
        status = scheduler.poll([job_id]).get(job_id)
    except (SchedulerError, ExecutorError):
        return None
    return None if status is None else status.state
