"""One submit transaction: the protocol every submit follows, a single run's or a job array's.

A submit is for one run (a first submit, a retry: :mod:`ddp_tui.remote.submit.submission`)
or for every member of a job array at once (:mod:`ddp_tui.remote.submit.array_submit`).
Either way it runs these steps, here and nowhere else:

1. **lock** every run it is for (:mod:`ddp_tui.remote.store.run_lock`), in the order of
   their paths; all are given back at the end, whatever happened;
2. **reconcile**: read each run's ``jobs.jsonl`` afresh, adopt the jobs the scheduler has
   for the run that it lacks, void its empty intents
   (:mod:`ddp_tui.remote.store.run_jobs`). Skipped for runs this process made a moment ago,
   which no scheduler can know yet;
3. **refuse** when a job of a run is still alive, or when someone else submitted since the
   caller looked (``seen``), naming that job;
4. **room**: a runs root that cannot take another attempt (read-only, full) refuses here;
5. **intent**: one line per run, before the scheduler is asked;
6. **submit**: one submit. A lost answer (the connection dropped, sbatch timed out) is never
   guessed at and never submitted again: the scheduler is asked which jobs came from the
   submit's directory. Where it says none, the intents are voided;
7. **answer**: each run's attempt line, naming its intent's token.

The locks are held from 5 to 7. A refresh's intent reconciler only *tries* a run's lock and
leaves a held run alone, so it can neither void an intent that is about to be answered nor
adopt a job whose attempt line is about to be written: no member is ever voided, doubled or
lost by a concurrent ``ddp-tui ls``. A process killed between 5 and 7 leaves intents (and a
lock that is stale once its process is gone) that the next refresh resolves by asking the
scheduler.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.store.journal import Journal, fold, intent_record, void_record
from ddp_tui.remote.store.run_jobs import adopt_unrecorded, close_void_intents, live_jobs
from ddp_tui.remote.store.run_lock import RunLocks
from ddp_tui.remote.store.runs import RunRef, RunStore, RunStoreError
from ddp_tui.remote.store.space import MARGIN_BYTES, require_room

#: How long a submit whose answer was lost waits for the scheduler to be reachable again.
RECOVER_SUBMIT_SEC = 60.0


class AttemptRefused(SchedulerError):
    """Another attempt of the run won, or is still alive; ``job_id`` names it."""

    def __init__(self, message: str, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class NothingQueued(SchedulerError):
    """A submit whose answer was lost did not reach the scheduler (it said so)."""


@dataclass
class Member:
    """One run of a submit: its ``jobs.jsonl`` as read under its lock, what the reconcile
    adopted, and the intent written for it."""

    ref: RunRef
    journal: Journal
    records: list[dict[str, Any]] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    intent: dict[str, Any] | None = None

    @property
    def known(self) -> list[str]:
        """The run's recorded job ids, oldest first."""
        return fold(self.records).job_ids


class SubmitTransaction(ABC):
    """One submit for the runs ``refs`` (see the module's docstring). A kind of submit says
    what is handed to the scheduler, what its members' lines add, which job each member
    got, and how a lost answer is found again."""

    #: Whether a submit the scheduler refused outright (it answered: no job) voids the
    #: intents at once; otherwise the next refresh voids them, once the scheduler says it
    #: has no job for them.
    void_refused = False

    def __init__(
        self,
        scheduler: Scheduler,
        store: RunStore,
        refs: Sequence[RunRef],
        *,
        fresh: bool,
        recover_sec: float = RECOVER_SUBMIT_SEC,
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.fresh = fresh
        self.recover_sec = recover_sec
        self.members = [Member(ref, store.journal(ref)) for ref in refs]

    # -- what a kind of submit says --------------------------------------------------------

    @abstractmethod
    def submission(self) -> tuple[str, str]:
        """The script to submit and the directory it is submitted from."""

    @abstractmethod
    def recover(self, cause: SchedulerError) -> str:
        """The answer a submit whose answer was lost got (:class:`NothingQueued` where the
        scheduler says it queued nothing)."""

    @abstractmethod
    def job_of(self, answer: str, index: int) -> str:
        """The job the submit's ``answer`` gave member ``index``."""

    @abstractmethod
    def attempt_line(self, job_id: str, retry_of: str | None, n: int, index: int) -> dict[str, Any]:
        """Member ``index``'s attempt line (its intent's token is added to it)."""

    @abstractmethod
    def unrecorded(self, answer: str, failed: Sequence[tuple[Member, str]]) -> RunStoreError:
        """The error that says the members ``failed`` (each with why) could not record
        their job although the submit queued it."""

    def member_fields(self, index: int) -> dict[str, Any]:
        """What member ``index``'s intent line adds (where its job will run from)."""
        return {}

    # -- the protocol ----------------------------------------------------------------------

    def run(self, *, seen: int | None = None) -> list[str]:
        """Submit once for every member and record it; the job ids, in member order.

        ``seen`` is how many attempts the caller saw when it decided to submit (None:
        whatever is there now)."""
        with RunLocks(self.store.executor, [m.ref for m in self.members]).held():
            for m in self.members:
                self._reconcile(m)
            for m in self.members:
                self._refuse_if_taken(m, seen)
            if not self.fresh:  # a new run's room was checked with its files
                for m in self.members:
                    require_room(
                        self.store.executor, m.ref.path, MARGIN_BYTES, what="another attempt"
                    )
            self._write_intents()
            answer = self._submit()
            return self._answer(answer)

    def _reconcile(self, m: Member) -> None:
        """Read the run's lines, adopt its unrecorded jobs and void its empty intents (the
        lock is held). Refused while an unfinished submit may still queue a job."""
        if self.fresh:
            return  # made a moment ago by this process: its jobs.jsonl is empty
        m.records = m.journal.read()
        m.adopted = adopt_unrecorded(self.scheduler, self.store, m.ref, m.records)
        in_flight = close_void_intents(self.scheduler, self.store, m.ref, m.records)
        if in_flight:
            raise SchedulerError(
                f"a submit of {m.ref.run_id} by {in_flight[-1]} did not finish and may still "
                "reach the scheduler; nothing was submitted: try again in a minute or two"
            )

    def _refuse_if_taken(self, m: Member, seen: int | None) -> None:
        """:class:`AttemptRefused` while a job of the run lives, or when the run has
        attempts that the caller did not see when it decided."""
        lines = fold(m.records)
        known = lines.job_ids
        alive = live_jobs(self.scheduler, [j for j in known if j not in lines.ends])
        if alive:
            live = alive[-1]
            raise AttemptRefused(
                f"job {live.job_id} is still {live.state.value}; cancel it (c) before "
                f"retrying {m.ref.run_id}; nothing was submitted",
                live.job_id,
            )
        if seen is not None and len(known) > seen:
            newest = known[-1]
            why = (
                f"job {newest}, queued by a submit that did not finish, was found and recorded"
                if newest in m.adopted
                else f"it was submitted by someone else meanwhile: job {newest} is its newest "
                "attempt"
            )
            raise AttemptRefused(
                f"{m.ref.run_id}: {why}; nothing more was submitted (look, then retry again)",
                newest,
            )

    def _write_intents(self) -> None:
        for index, m in enumerate(self.members):
            known = m.known
            intent = intent_record(len(known) + 1, known[-1] if known else None)
            intent.update(self.member_fields(index))
            record_line(
                m, intent, f"cannot record a submit of {m.ref.run_id}; nothing was submitted"
            )
            m.intent = intent

    def _submit(self) -> str:
        script, work_dir = self.submission()
        try:
            return self.scheduler.submit(script, work_dir)
        except SchedulerError as exc:
            if isinstance(exc.__cause__, ExecutorError):  # the answer was lost
                try:
                    return self.recover(exc)
                except NothingQueued:  # the scheduler said so: the intents came to nothing
                    self._void()
                    raise
            if self.void_refused:  # the scheduler answered: it refused, nothing was queued
                self._void()
            raise

    def _void(self) -> None:
        for m in self.members:
            if m.intent is None:
                continue
            # One not written is voided by a refresh, once the scheduler says it has no job.
            with contextlib.suppress(OSError, ExecutorError):
                m.journal.append(void_record(str(m.intent["token"])))

    def _answer(self, answer: str) -> list[str]:
        jobs: list[str] = []
        failed: list[tuple[Member, str]] = []
        for index, m in enumerate(self.members):
            job_id = self.job_of(answer, index)
            known = m.known
            line = self.attempt_line(job_id, known[-1] if known else None, len(known) + 1, index)
            line["intent"] = m.intent["token"] if m.intent else None
            try:
                m.journal.append(line)
            except (OSError, ExecutorError) as exc:
                # The next refresh adopts it from the scheduler once the run is writable.
                failed.append((m, _why(exc)))
            jobs.append(job_id)
        if failed:
            raise self.unrecorded(answer, failed)
        return jobs


def record_line(m: Member, record: dict[str, Any], failure: str) -> None:
    """Append ``record`` to the member's jobs.jsonl, or raise ``failure`` with where and
    why."""
    try:
        m.journal.append(record)
    except (OSError, ExecutorError) as exc:
        raise RunStoreError(f"{failure} ({m.journal.path}: {_why(exc)})") from exc


def _why(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def jobs_from_dir(
    scheduler: Scheduler,
    work_dir: str,
    recorded: Sequence[str],
    cause: SchedulerError,
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> list[str]:
    """The jobs submitted from ``work_dir`` that ``recorded`` lacks, asking the scheduler
    until it answers or ``recover_sec`` has passed (then :class:`SchedulerError`: nothing is
    known, and nothing may be recorded)."""
    deadline = time.monotonic() + recover_sec
    delay = 1.0
    while True:
        try:
            return [j for j in scheduler.jobs_in_dir(work_dir) if j not in recorded]
        except (SchedulerError, ExecutorError) as exc:
            if time.monotonic() + delay > deadline:
                raise SchedulerError(
                    f"the connection was lost while submitting from {work_dir} and could "
                    f"not be checked since ({exc}); nothing was recorded. Check `squeue` "
                    "before retrying."
                ) from cause
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
