"""Why one Slurm job waits: the queries of :mod:`ddp_tui.remote.backends.slurm.waiting`, asked
in two round trips and read into a :class:`~ddp_tui.diagnosis.waiting.WaitExplanation`.

1. ``scontrol show job``: its state, reason, account, QOS, partitions, dependency and
   reservation. A job that is not pending stops here.
2. In one batch: ``squeue --start`` (the estimated start, a backfill simulation on the
   controller: this is why the whole explanation is on demand, never in a refresh),
   ``sprio`` and ``sshare`` (priority and fair-share), and what the reason's category needs:
   the limit (``scontrol show assoc_mgr``), the reservation, the partitions, the jobs it
   depends on.

Every query that fails, or answers nothing, makes one :class:`Unavailable` with its reason;
the others stand. Only a failed first query leaves the job's state unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from ddp_tui.diagnosis.pending import WaitCategory, pending_category
from ddp_tui.diagnosis.waiting import (
    Dependency,
    LimitFacts,
    ReservationFacts,
    Unavailable,
    WaitExplanation,
)
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.slurm.commands import show_job_argv, start_argv
from ddp_tui.remote.backends.slurm.parsers import field_text, parse_show_job, parse_start
from ddp_tui.remote.backends.slurm.waiting import (
    assoc_limit,
    assoc_limits_argv,
    limit_ref,
    parse_dependency,
    parse_reservations,
    parse_sprio,
    parse_sshare,
    partition_argv,
    partition_facts,
    qos_limit,
    qos_limits_argv,
    reservation_argv,
    sprio_argv,
    sshare_argv,
    unavailable_reason,
)
from ddp_tui.remote.backends.states import JobState, from_slurm

#: Runs commands in one round trip; raises :class:`SchedulerError` when it cannot.
BatchRunner = Callable[[Sequence[Sequence[str]]], list[CommandResult]]

#: The jobs a dependency's states are asked for, at most (the rest keep their status).
MAX_DEPENDENCIES = 5
#: The partitions of a multi-partition job asked about, at most.
MAX_PARTITIONS = 4

SCHEDULER = "slurm"


def _unknown(job_id: str, part: str, reason: str) -> WaitExplanation:
    return WaitExplanation(
        job_id, JobState.UNKNOWN.value, SCHEDULER, unavailable=(Unavailable(part, reason),)
    )


def _reason(job: dict[str, str]) -> str:
    # scontrol -o writes "ReqNodeNotAvail,_May_be_reserved_for_other_job": squeue's words.
    return field_text(job.get("Reason", "")).replace("_", " ")


def explain_wait(job_id: str, run: BatchRunner) -> WaitExplanation:
    """Why ``job_id`` waits, as far as Slurm tells this user."""
    try:
        (shown,) = run([show_job_argv(job_id)])
    except SchedulerError as exc:
        return _unknown(job_id, "job", exc.message)
    jobs = parse_show_job(shown.stdout) if shown.ok else []
    if not jobs:
        # "slurm_load_jobs error: Invalid job id specified": ended and gone from the
        # controller (its end is sacct's), or never Slurm's.
        reason = unavailable_reason(shown, "scontrol show job") if not shown.ok else "no record"
        return _unknown(job_id, "job", reason)
    job = jobs[0]
    reason = _reason(job)
    state = from_slurm(job.get("JobState", "")).value
    parts = {
        "account": job.get("Account", ""),
        "qos": job.get("QOS", ""),
        "partition": job.get("Partition", ""),
        "dependency": field_text(job.get("Dependency", "")),
        "reservation": field_text(job.get("Reservation", "")),
    }
    if state != JobState.PENDING.value:
        return WaitExplanation.of_reason(job_id, state, reason, scheduler=SCHEDULER, **parts)
    return _Pending(job_id, job, reason, run).explain(parts)


class _Pending:
    """The second round trip for a pending job: what to ask, then what it said."""

    def __init__(self, job_id: str, job: dict[str, str], reason: str, run: BatchRunner) -> None:
        self.job_id = job_id
        self.job = job
        self.reason = reason
        self.run = run
        self.category = pending_category(reason) if reason else WaitCategory.OTHER
        # An array task is asked by its own id (sprio and squeue --start name it so).
        self.own_id = job.get("JobId", job_id)
        user_id = job.get("UserId", "")  # "alice(1234)"
        self.user, _, uid = user_id.partition("(")
        self.uid = uid.rstrip(")")
        self.unavailable: list[Unavailable] = []

    def _queries(self) -> dict[str, list[str]]:
        """Each query by the part it answers; a part that cannot be asked is unavailable."""
        wanted: list[tuple[str, Callable[[], list[str]]]] = [
            ("estimated_start", partial(start_argv, self.own_id)),
            ("priority", partial(sprio_argv, self.own_id)),
            ("fair_share", sshare_argv),
        ]
        job = self.job
        if self.category is WaitCategory.LIMIT:
            ref = limit_ref(self.reason.partition(",")[0])
            if ref is None:
                self.unavailable.append(
                    Unavailable("limit", f"Slurm's reason {self.reason!r} names no one limit")
                )
            elif ref.scope == "qos":
                wanted.append(("limit", partial(qos_limits_argv, job.get("QOS", ""))))
            else:
                account = job.get("Account", "")
                wanted.append(("limit", partial(assoc_limits_argv, self.user, account)))
        if self.category is WaitCategory.RESERVATION:
            # A job in a reservation names it; one kept off reserved nodes (maintenance)
            # does not: then every reservation, the ones that may hold its nodes.
            named = field_text(job.get("Reservation", "")) or None
            wanted.append(("reservation", partial(reservation_argv, named)))
        if self.category is WaitCategory.PARTITION:
            names = [p for p in job.get("Partition", "").split(",") if p]
            for name in names[:MAX_PARTITIONS]:
                wanted.append((f"partition {name}", partial(partition_argv, name)))
        if self.category is WaitCategory.DEPENDENCY:
            for dep in self.dependencies()[:MAX_DEPENDENCIES]:
                if dep.job_id:
                    wanted.append((f"dependency {dep.job_id}", partial(show_job_argv, dep.job_id)))
        queries: dict[str, list[str]] = {}
        for part, argv in wanted:
            try:
                queries[part] = argv()
            except SchedulerError as exc:  # a name scontrol printed that cannot go in an argv
                self.unavailable.append(Unavailable(part, exc.message))
        return queries

    def dependencies(self) -> list[Dependency]:
        return parse_dependency(self.job.get("Dependency", ""))

    def explain(self, parts: dict[str, str]) -> WaitExplanation:
        queries = self._queries()
        try:
            answers = dict(zip(queries, self.run(list(queries.values())), strict=True))
        except SchedulerError as exc:
            self.unavailable += [Unavailable(part, exc.message) for part in queries]
            answers = {}
        found = self._read(answers)
        explanation = WaitExplanation.of_reason(
            self.job_id, JobState.PENDING.value, self.reason, scheduler=SCHEDULER, **parts, **found
        )
        return replace(explanation, unavailable=tuple(self.unavailable))

    def _failed(self, part: str, res: CommandResult, what: str) -> bool:
        if res.ok:
            return False
        self.unavailable.append(Unavailable(part, unavailable_reason(res, what)))
        return True

    def _read(self, answers: dict[str, CommandResult]) -> dict[str, object]:
        found: dict[str, object] = {}
        res = answers.get("estimated_start")
        if res is not None and not self._failed("estimated_start", res, "squeue --start"):
            found["estimated_start"] = parse_start(res.stdout)
        res = answers.get("priority")
        # priority/basic: sprio refuses every job, and nothing weighs fair-share.
        basic = res is not None and not res.ok and "priority/basic" in res.stdout + res.stderr
        if res is not None and not self._failed("priority", res, "sprio"):
            factors = parse_sprio(res.stdout, self.own_id)
            found["priority"] = tuple(factors)
            if not factors:
                said = " ".join(res.stdout.split()) or "nothing"
                self.unavailable.append(Unavailable("priority", f"sprio lists no factors ({said})"))
        res = answers.get("fair_share")
        if res is not None and not self._failed("fair_share", res, "sshare"):
            shares = parse_sshare(res.stdout)
            mine = [s for s in shares if s.account == self.job.get("Account")] or shares
            if basic:
                # sshare answers, but nothing uses its numbers: FairShare 0 would read as
                # "the worst" when it means "not counted".
                said = "; ".join(f"{s.account}: FairShare {s.fair_share}" for s in mine)
                reason = f"not used under priority/basic (sshare says {said or 'nothing'})"
                self.unavailable.append(Unavailable("fair_share", reason))
            else:
                found["fair_share"] = tuple(mine)
        res = answers.get("limit")
        if res is not None and not self._failed("limit", res, "scontrol show assoc_mgr"):
            limit = self._limit(res.stdout)
            if limit is None:
                self.unavailable.append(Unavailable("limit", "scontrol shows no such record"))
            else:
                found["limits"] = (limit,)
        res = answers.get("reservation")
        if res is not None and not self._failed("reservation", res, "scontrol show reservation"):
            found["reservations"] = tuple(self._reservations(res.stdout))
        found["partitions"] = tuple(
            facts
            for part, res in answers.items()
            if part.startswith("partition ")
            and not self._failed(part, res, "scontrol show partition")
            for facts in partition_facts(res.stdout, self.job)
        )
        if self.category is WaitCategory.DEPENDENCY:
            found["dependencies"] = tuple(self._dependency(d, answers) for d in self.dependencies())
        return found

    def _limit(self, text: str) -> LimitFacts | None:
        ref = limit_ref(self.reason.partition(",")[0])
        if ref is None:
            return None
        if ref.scope == "qos":
            return qos_limit(text, ref, uid=self.uid, account=self.job.get("Account", ""))
        return assoc_limit(text, ref, user=self.user)

    def _reservations(self, text: str) -> list[ReservationFacts]:
        found = parse_reservations(text)
        if field_text(self.job.get("Reservation", "")):
            return found
        maintenance = [r for r in found if "MAINT" in r.flags]
        if not found:
            self.unavailable.append(Unavailable("reservation", "scontrol shows no reservation"))
        return maintenance or found

    def _dependency(self, dep: Dependency, answers: dict[str, CommandResult]) -> Dependency:
        res = answers.get(f"dependency {dep.job_id}")
        jobs = parse_show_job(res.stdout) if res is not None and res.ok else []
        if not jobs:
            return dep  # gone from the controller: its status above is what Slurm keeps
        return replace(dep, state=jobs[0].get("JobState", ""), reason=_reason(jobs[0]))
