"""The observation pass: what the runs and the scheduler say now, read in one batch, with no
write anywhere.

One :class:`~ddp_tui.remote.backends.executor.Batch` (one SSH round trip) carries the listing
of the run directories, at most one squeue and one sacct call, the new bytes of the files the
table shows, the followed run's new output and, where a diagnosis is being read, the runs
root's free space. What it learns goes into the in-memory read model only (the attempts'
states, the table's readers); the reactions that write (:mod:`ddp_tui.remote.runs.reactions`)
come after it, in their own stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ddp_tui.remote.backends.executor import (
    Batch,
    CommandResult,
    ExecutorError,
    ReadResult,
)
from ddp_tui.remote.backends.scheduler import (
    AccountingUnavailable,
    JobStatus,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.observe.followers import FollowPass
from ddp_tui.remote.observe.observed import ObservedRuns
from ddp_tui.remote.store.runs import RunInfo, RunStoreError
from ddp_tui.remote.store.space import free_of, free_space_command


@dataclass
class Observation:
    """What one pass saw. ``failed``: the batch itself failed, and nothing new is known."""

    infos: list[RunInfo] = field(default_factory=list)
    error: str | None = None
    failed: bool = False
    polled: bool = False  # the scheduler was asked (a complete answer, or an error)
    scheduler_calls: int = 0
    follow_reads: Sequence[ReadResult] = ()


class Observer:
    """Reads the runs root and asks the scheduler, as one batch per pass."""

    def __init__(self, observed: ObservedRuns) -> None:
        self.observed = observed
        #: "ok", "reconnecting" or "controller unreachable": the header's connection state.
        self.connection = "ok"

    def observe(
        self,
        known: Sequence[RunInfo],
        follow: FollowPass | None,
        *,
        poll: bool = True,
        max_new: int | None = None,
        answered: Mapping[str, JobStatus] | None = None,
    ) -> Observation:
        """One pass over the runs ``known`` from the last pass (the ones polled), the new
        run directories (at most ``max_new``) and the followed run's new bytes.

        ``answered``: what the scheduler said of every job of the user a moment ago (the
        all-jobs listing's one squeue and one sacct). The jobs it names are not asked again;
        only one it does not name (accounting lags a job that ended within seconds) is
        polled as usual."""
        states = self.observed.states
        polled = [
            job_id for info in known if (job_id := latest_job_id(info)) and not states.end_of(info)
        ]
        known_now: dict[str, JobStatus] = {}
        if answered is not None and poll:
            known_now = {j: answered[j] for j in polled if j in answered}
            polled = [j for j in polled if j not in known_now]
        table = self.observed.table.requests(known)
        listing_reads = self.observed.store.listing_reads()
        asks = poll and (answered is None or bool(polled))
        poll_cmds = self.observed.scheduler.poll_commands(polled) if asks else []
        space_cmds = self._space_commands()
        batch = Batch(
            commands=[self.observed.store.listing_command(), *poll_cmds, *space_cmds],
            reads=[*listing_reads, *(r.request() for r in table)],
        )
        if follow is not None:
            batch.reads += follow.requests()
        try:
            result = self.observed.executor.run_batch(batch)
            infos = self.observed.store.apply_listing(
                result.commands[0], result.reads[: len(listing_reads)], max_new=max_new
            )
        except (ExecutorError, RunStoreError) as exc:
            self.connection = "reconnecting" if isinstance(exc, ExecutorError) else "ok"
            return Observation(error=str(exc), failed=True)
        if not asks:
            self.connection = "ok"  # the listing answered; no scheduler was asked now
        n = len(listing_reads) + len(table)
        for reader, res in zip(table, result.reads[len(listing_reads) : n], strict=True):
            reader.read_new(res)
        if space_cmds:
            self._note_space(result.commands[-1])
        seen = Observation(
            infos=infos, polled=poll, scheduler_calls=len(poll_cmds), follow_reads=result.reads[n:]
        )
        if known_now:
            self.observed.states.observe_complete_poll(list(known_now), known_now)
        if asks:
            seen.error = self._apply_poll(polled, result.commands[1 : 1 + len(poll_cmds)])
        seen.error = self._read_just_ended(infos) or seen.error
        return seen

    def _apply_poll(self, polled: list[str], answers: Sequence[CommandResult]) -> str | None:
        """The poll's answers into the attempts' states; the error to show, if any."""
        try:
            statuses = self.observed.scheduler.parse_poll(polled, answers)
        except SchedulerUnavailable as exc:
            self.connection = "controller unreachable"
            return exc.message
        except AccountingUnavailable as exc:
            self.observed.states.update(exc.partial)  # squeue still answered
            self.connection = "ok"
            return exc.message
        except SchedulerError as exc:
            return exc.message
        self.connection = "ok"
        # A complete answer: what it did not mention, the scheduler does not know.
        self.observed.states.observe_complete_poll(polled, statuses)
        return None

    def _read_just_ended(self, infos: Sequence[RunInfo]) -> str | None:
        """One more read of the table files of runs whose end this pass just learned.

        The poll may answer after this pass's reads (the local scheduler reads its state
        last), so those reads can predate the job's last rows: without this, a row would show
        COMPLETED with the final epoch missing until the next refresh. One extra batch, only
        in a pass where jobs end.
        """
        ended = self.observed.table.just_ended(infos)
        readers = self.observed.table.requests(ended)
        if not readers:
            return None
        space_cmds = self._space_commands()
        try:
            result = self.observed.executor.run_batch(
                Batch(commands=space_cmds, reads=[r.request() for r in readers])
            )
        except ExecutorError as exc:
            self.observed.table.unread_end(ended)  # read them at the next refresh instead
            return str(exc)
        for reader, res in zip(readers, result.reads, strict=True):
            reader.read_new(res)
        if space_cmds:
            self._note_space(result.commands[-1])
        return None

    def _space_commands(self) -> list[Sequence[str]]:
        """The runs root's free-space command, where a diagnosis is being read: a full disk
        keeps a job's own last words out of its logs (rules_disk.disk_full_by_space)."""
        return (
            [free_space_command(self.observed.store.root)] if self.observed.table.diagnosing else []
        )

    def _note_space(self, answer: CommandResult) -> None:
        self.observed.table.runs_root_free = free_of(answer)
        self.observed.table.runs_root = self.observed.store.root
