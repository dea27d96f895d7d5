"""Notification events, each claimed exactly once by one of however many ddp-tui processes.

Two app instances, ``ddp-tui watch`` and a CLI command may all refresh the same runs root.
Each sees a run's end, so each would notify it. The claim makes one of them the sender:

- **Tied to the durable end record.** A run end is an end line in the run's ``jobs.jsonl``
  (:mod:`ddp_tui.remote.store.history`). Any process that sees one, recorded within
  :data:`WINDOW_SEC`, whose claim does not exist yet, claims it: the process that appended
  the line (at once), or any later refresher. So a recorder killed between its append and
  its claim loses nothing, and old history never floods anyone (an end recorded longer ago
  is never sent).
- **The claim is a directory made with ``mkdir(2)``**, like the submit lock
  (:mod:`ddp_tui.remote.store.run_lock`): atomic on local filesystems and on NFS, the same
  through SSH, nothing to run on the cluster. Exactly one ``mkdir`` succeeds; its maker
  sends. ``<run_dir>/notified/<job_id>.end`` for an end, ``.../<job_id>.stalled`` for a
  stall, ``<runs_root>/.notified/<group hash>-<jobs hash>`` for a finished group (the
  listing skips names that are not run ids, as it skips ``.arrays``).
- A group (of two runs or more) finishes when the latest attempt of each of its runs has
  an end record. Its key
  is the group *and* the set of those attempts' job ids, so a retry that ends again is a
  new event.

The claims of one refresh are one command through the executor. A claimed event whose
delivery then fails is not sent again: at most once per process crash, exactly once
otherwise. See docs/notifications.md.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.events import GROUP_FINISHED, RUN_END, RUN_STALLED, NotifyEvent
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.runs.reactions import Seen
from ddp_tui.remote.store.runs import RunInfo, RunStore

#: Ends recorded longer ago than this are history, never sent (a first start over years of
#: runs, a laptop back from a week away).
WINDOW_SEC = 3600.0
#: Where a run's claims live, in its run directory.
RUN_CLAIMS = "notified"
#: Where groups' claims live, in the runs root (not a run id: the listing skips it).
GROUP_CLAIMS = ".notified"
#: Refreshes an end waits for its diagnosis (the logs' tails are read at the refresh after
#: the end is learned) before it is sent without one.
DIAGNOSIS_WAIT = 2
#: Events kept for :meth:`Notifier.take` when nobody takes them (the app reads snapshots).
_KEPT = 256

# One round trip for every claim of a refresh: "+" claimed here, "=" claimed before (by
# anyone), "!" could not be made (the message follows). mkdir -p makes the claims' folder;
# the last mkdir is the atomic decision. The claim holds who made it, for a person to read.
_CLAIM = (
    'by=$1; shift; for d; do mkdir -p -- "${d%/*}" 2>/dev/null; '
    'if out=$(LC_ALL=C mkdir -- "$d" 2>&1); then printf %s "$by" > "$d/by"; echo "+$d"; '
    'else case $out in *"File exists"*) echo "=$d";; '
    '*) echo "!$d $(echo "$out" | head -n 1)";; esac; fi; done'
)


@dataclass
class _Pending:
    """An end seen but not claimed yet: it waits a refresh or two for its diagnosis."""

    event: NotifyEvent
    waited: int = 0


class Notifier:
    """Finds this refresh's events and claims them; keeps what this process claimed."""

    def __init__(
        self,
        executor: Executor,
        runs_root: str,
        *,
        window_sec: float = WINDOW_SEC,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.executor = executor
        self.runs_root = runs_root.rstrip("/")
        self.window_sec = window_sec
        self.clock = clock
        #: False: find and claim nothing (a CLI command with no notify_command to run).
        self.enabled = True
        self._decided: set[str] = set()  # claims this process made, or found made
        # Ends found older than the window: they stay old, so a refresh
        # over years of history skips them without parsing a time again.
        self._past: set[tuple[str, str]] = set()
        # Per group, its members' (run id, attempts, ends) when it was last judged with no
        # event to send: a group can only finish when one of these changes (or this process
        # just recorded a member's end), so a quiet refresh judges no group again.
        self._judged: dict[str, tuple[tuple[str, int, int], ...]] = {}
        self._pending: dict[str, _Pending] = {}  # claim -> an end waiting for its diagnosis
        self._taken: deque[NotifyEvent] = deque(maxlen=_KEPT)
        self._by = f"{socket.gethostname()}:{os.getpid()}"

    # -- the facade's side ------------------------------------------------------------

    def after_refresh(
        self,
        infos: Sequence[RunInfo],
        views: Sequence[RunView],
        recorded: Mapping[str, Mapping[str, Any]],
        *,
        scope: Callable[[], str | None],
        complete: bool = True,
    ) -> tuple[tuple[NotifyEvent, ...], str | None]:
        """Claim the events this refresh shows; returns those this process won, and an
        error to show (or None).

        ``recorded`` holds the end lines this process just appended (job id -> line), which
        the listing shows only from the next refresh. ``scope`` gives the scheduler's
        identity (a LOST verdict binds only its own scheduler's readers). ``complete`` is
        False while the listing has not read every run yet: no group is judged then.
        """
        if not self.enabled:
            return (), None
        by_run = {v.run_id: v for v in views}
        ready: list[NotifyEvent] = []
        for info in infos:
            view = by_run.get(info.run_id)
            ready += self._run_ends(info, view, recorded, scope)
            if view is not None and view.stall is not None:
                ready += self._stall(info, view)
        if complete:
            ready += self._groups(infos, by_run, recorded, scope)
        return self._claim(ready)

    def flush(self) -> tuple[tuple[NotifyEvent, ...], str | None]:
        """Claim the ends still waiting for a diagnosis now (a CLI process about to exit)."""
        if not self.enabled or not self._pending:
            return (), None
        ready = [p.event for p in self._pending.values()]
        self._pending.clear()
        return self._claim(ready)

    def take(self) -> list[NotifyEvent]:
        """Every event this process claimed since the last take (the CLI delivers these)."""
        out = list(self._taken)
        self._taken.clear()
        return out

    # -- finding events ---------------------------------------------------------------

    def _recent(self, rec: Mapping[str, Any]) -> bool:
        at = _epoch(rec.get("recorded_at"))
        return at is not None and self.clock() - at <= self.window_sec

    def _run_ends(
        self,
        info: RunInfo,
        view: RunView | None,
        recorded: Mapping[str, Mapping[str, Any]],
        scope: Callable[[], str | None],
    ) -> list[NotifyEvent]:
        latest = latest_job_id(info)
        ends = info.ends
        if latest is not None and latest not in ends and latest in recorded:
            ends = {**ends, latest: recorded[latest]}
        out: list[NotifyEvent] = []
        for job_id, rec in ends.items():
            past = (info.run_id, job_id)
            if past in self._past:
                continue
            if not self._recent(rec):
                self._past.add(past)
                continue
            claim = f"{info.ref.path}/{RUN_CLAIMS}/{_safe(job_id)}.end"
            if claim in self._decided or not _binds(rec, scope):
                continue
            is_latest = job_id == latest and view is not None
            diagnosis = (
                view.diagnosis.short
                if is_latest and view is not None and view.diagnosis is not None
                else _stored_short(rec)
            )
            event = _end_event(info, view, job_id, rec, diagnosis, claim)
            if diagnosis or not is_latest or info.kind != "train":
                self._pending.pop(claim, None)
                out.append(event)
                continue
            # The diagnosis comes a refresh after the end: wait for it, a little.
            pending = self._pending.setdefault(claim, _Pending(event))
            pending.event = event
            pending.waited += 1
            if pending.waited > DIAGNOSIS_WAIT:
                del self._pending[claim]
                out.append(event)
        return out

    def _stall(self, info: RunInfo, view: RunView) -> list[NotifyEvent]:
        job_id = view.job_id
        stall = view.stall
        if job_id is None or stall is None:
            return []
        claim = f"{info.ref.path}/{RUN_CLAIMS}/{_safe(job_id)}.stalled"
        if claim in self._decided:
            return []
        return [
            NotifyEvent(
                kind=RUN_STALLED,
                claim=claim,
                name=view.name,
                state=view.state.value,
                time=_iso(self.clock()),
                run_id=view.run_id,
                job_id=job_id,
                diagnosis=f"stalled {stall.quiet_label}",
                group=view.group,
                elapsed_sec=view.elapsed_sec,
                run_dir=view.run_dir,
                summary=stall.summary,
            )
        ]

    def _groups(
        self,
        infos: Sequence[RunInfo],
        views: Mapping[str, RunView],
        recorded: Mapping[str, Mapping[str, Any]],
        scope: Callable[[], str | None],
    ) -> list[NotifyEvent]:
        members: dict[str, list[RunInfo]] = {}
        for info in infos:
            if info.group is not None:
                members.setdefault(info.group, []).append(info)
        out: list[NotifyEvent] = []
        for group, runs in members.items():
            if len(runs) < 2:
                continue  # every run has a group key; a group of one is its run's end
            seen = tuple((i.run_id, len(i.jobs), len(i.ends)) for i in runs)
            if self._judged.get(group) == seen and not (
                recorded and any(latest_job_id(i) in recorded for i in runs)
            ):
                continue
            event = self._group_if_finished(group, runs, views, recorded, scope)
            if event is None:
                self._judged[group] = seen
            else:  # judged again until its claim is decided (a failed claim is retried)
                self._judged.pop(group, None)
                out.append(event)
        return out

    def _group_if_finished(
        self,
        group: str,
        runs: Sequence[RunInfo],
        views: Mapping[str, RunView],
        recorded: Mapping[str, Mapping[str, Any]],
        scope: Callable[[], str | None],
    ) -> NotifyEvent | None:
        """The group's finished event, or None: a member still runs, or its finish was
        claimed already or is too old to send."""
        ends: list[tuple[RunInfo, str, Mapping[str, Any]]] = []
        for info in runs:
            job_id = latest_job_id(info)
            rec = None if job_id is None else info.ends.get(job_id) or recorded.get(job_id)
            if job_id is None or rec is None or not _binds(rec, scope):
                return None  # a member still runs (or was never submitted): not finished
            ends.append((info, job_id, rec))
        return self._group_event(group, ends, views)

    def _group_event(
        self,
        group: str,
        ends: Sequence[tuple[RunInfo, str, Mapping[str, Any]]],
        views: Mapping[str, RunView],
    ) -> NotifyEvent | None:
        jobs = sorted(job_id for _, job_id, _ in ends)
        claim = f"{self.runs_root}/{GROUP_CLAIMS}/{_digest(group)}-{_digest(' '.join(jobs))}"
        if claim in self._decided:
            return None
        # The newest end decides whether the group's finish is recent.
        newest = _newest(ends)
        if not self._recent(newest):
            return None
        states = [str(rec.get("state") or "UNKNOWN") for _, _, rec in ends]
        tally: dict[str, int] = {}
        for s in states:
            tally[s] = tally.get(s, 0) + 1
        elapsed = [
            float(e) for _, _, rec in ends if isinstance(e := rec.get("elapsed_sec"), int | float)
        ]
        worst = next((s for s in states if s != JobState.COMPLETED.value), states[0])
        n = len(ends)
        return NotifyEvent(
            kind=GROUP_FINISHED,
            claim=claim,
            name=group,
            state=worst,
            time=str(newest.get("recorded_at") or _iso(self.clock())),
            group=group,
            elapsed_sec=max(elapsed) if elapsed else None,
            summary=f"{n} run{'s' if n != 1 else ''}: "
            + ", ".join(f"{k} {v}" for v, k in sorted(tally.items())),
            runs=tuple(info.run_id for info, _, _ in ends),
        )

    # -- claiming ---------------------------------------------------------------------

    def _claim(self, events: Sequence[NotifyEvent]) -> tuple[tuple[NotifyEvent, ...], str | None]:
        """mkdir each event's claim in one command; the events whose mkdir succeeded here."""
        events = [e for e in events if e.claim not in self._decided]
        if not events:
            return (), None
        paths = [e.claim for e in events]
        try:
            res = self.executor.run(["sh", "-c", _CLAIM, "sh", self._by, *paths], timeout=60)
        except ExecutorError as exc:
            # Undecided: the next refresh tries again (the ends stay recent for an hour).
            return (), f"could not claim notifications: {exc}"
        won: set[str] = set()
        problems: list[str] = []
        for line in res.stdout.splitlines():
            mark, rest = line[:1], line[1:]
            if mark == "+":
                won.add(rest)
                self._decided.add(rest)
            elif mark == "=":
                self._decided.add(rest)
            elif mark == "!":
                path, _, why = rest.partition(" ")
                self._decided.add(path)  # a read-only runs root: say so once, not each time
                problems.append(f"{path}: {why}")
        claimed = tuple(e for e in events if e.claim in won)
        self._taken.extend(claimed)
        error = None
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            error = f"could not claim a notification, so none is sent: {problems[0]}{more}"
        elif not res.ok and not won:
            error = f"could not claim notifications: {res.stderr.strip() or res.returncode}"
        return claimed, error


def _end_event(
    info: RunInfo,
    view: RunView | None,
    job_id: str,
    rec: Mapping[str, Any],
    diagnosis: str,
    claim: str,
) -> NotifyEvent:
    exit_code = rec.get("exit_code")
    elapsed = rec.get("elapsed_sec")
    return NotifyEvent(
        kind=RUN_END,
        claim=claim,
        name=view.name if view is not None else str(info.spec.get("name") or info.run_id),
        state=str(rec.get("state") or "UNKNOWN"),
        time=str(rec.get("recorded_at") or ""),
        run_id=info.run_id,
        job_id=job_id,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        diagnosis=diagnosis,
        group=info.group,
        elapsed_sec=float(elapsed) if isinstance(elapsed, int | float) else None,
        run_dir=info.ref.path,
    )


def _newest(ends: Sequence[tuple[RunInfo, str, Mapping[str, Any]]]) -> Mapping[str, Any]:
    """The end record recorded last of a group's."""
    return max(ends, key=lambda e: _epoch(e[2].get("recorded_at")) or 0.0)[2]


def _binds(rec: Mapping[str, Any], scope: Callable[[], str | None]) -> bool:
    """Whether the end binds this reader: a LOST verdict only binds its own scheduler's."""
    if rec.get("state") != JobState.LOST.value:
        return True
    own = scope()
    return own is not None and rec.get("scope") == own


def _stored_short(rec: Mapping[str, Any]) -> str:
    doc = rec.get("diagnosis")
    short = doc.get("short") if isinstance(doc, Mapping) else None
    return short if isinstance(short, str) else ""


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.timestamp()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def _safe(job_id: str) -> str:
    """A job id as a file name (an array task's ``123_4`` already is one)."""
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in job_id)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class NotifyEvents:
    """Reaction 5: claim the events this refresh shows (the ends just recorded count, though
    the listing shows their lines only from the next refresh); the claimed ones go into the
    snapshot, for the app or the CLI to deliver."""

    def __init__(self, notifier: Notifier, states: AttemptStates, store: RunStore) -> None:
        self.notifier = notifier
        self.states = states
        self.store = store

    def __call__(self, seen: Seen) -> str | None:
        seen.events, error = self.notifier.after_refresh(
            seen.infos,
            seen.views,
            self.states.just_recorded,
            scope=self.states.identity,
            complete=not self.store.unread,
        )
        return error
