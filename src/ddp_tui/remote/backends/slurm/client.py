"""Slurm as a :class:`~ddp_tui.remote.backends.scheduler.Scheduler`: :class:`SlurmScheduler`.

It only composes the builders of :mod:`ddp_tui.remote.backends.slurm.commands` and the parsers
of :mod:`ddp_tui.remote.backends.slurm.parsers` over an
:class:`~ddp_tui.remote.backends.executor.Executor`, local or over SSH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_tui.diagnosis.waiting import WaitExplanation
from ddp_tui.remote.backends.executor import (
    Batch,
    CommandResult,
    CommandTimeout,
    Executor,
    ExecutorError,
)
from ddp_tui.remote.backends.job_ids import array_index
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.scheduler import (
    AccountingUnavailable,
    JobStatus,
    PartitionInfo,
    Scheduler,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.backends.slurm.commands import (
    accounting_argv,
    accounting_ids,
    batch_script_argv,
    config_argv,
    jobs_in_dir_argv,
    requeue_argv,
    sacct_argv,
    sacct_chunks,
    sbatch_argv,
    scancel_argv,
    show_job_argv,
    sinfo_argv,
    slurm_ids,
    squeue_argv,
    srun_on_node_argv,
    start_argv,
    version_argv,
)
from ddp_tui.remote.backends.slurm.job_request import parse_job_request
from ddp_tui.remote.backends.slurm.parsers import (
    NodeInfo,
    PollResult,
    error_of,
    parse_cluster_name,
    parse_jobs_in_dir,
    parse_sacct,
    parse_sbatch,
    parse_show_job,
    parse_sinfo,
    parse_squeue,
    parse_start,
    parse_version,
    partitions_from_nodes,
    poll_from_results,
)
from ddp_tui.remote.backends.slurm.usage_query import (
    parse_usage,
    parse_usages,
    usage_argv,
    usage_argvs,
)
from ddp_tui.remote.backends.slurm.user_jobs import (
    default_stdio,
    parse_user_sacct,
    parse_user_squeue,
    sacct_has_stdio,
    show_job_paths,
    user_sacct_argv,
    user_squeue_argv,
)
from ddp_tui.remote.backends.slurm.wait_explainer import explain_wait
from ddp_tui.remote.backends.user_jobs import Since, StdioPaths, UserJob, UserJobsAnswer
from ddp_tui.reports.accounting import JobAccounting


class SlurmScheduler(Scheduler):
    """Slurm over an executor: at most one squeue and one sacct per poll."""

    name = "slurm"
    keeps_accounting = True

    def __init__(
        self,
        executor: Executor,
        *,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        # Slurm clients retry a dead controller for about 9 s before they give up.
        self.executor = executor
        self.timeout = timeout
        self.env = dict(env) if env else None

    def _run(self, argv: Sequence[str], what: str) -> CommandResult:
        try:
            return self.executor.run(argv, timeout=self.timeout, env=self.env)
        except CommandTimeout as exc:
            raise SchedulerUnavailable(
                f"{what} did not answer within {self.timeout:g} s", argv=argv
            ) from exc
        except ExecutorError as exc:
            raise SchedulerUnavailable(f"{what}: {exc}", argv=argv) from exc

    def _check(self, argv: Sequence[str], what: str) -> CommandResult:
        res = self._run(argv, what)
        if not res.ok:
            raise error_of(res, what)
        return res

    # ---- Scheduler

    def submit(self, script_path: str, run_dir: str) -> str:
        res = self._check(sbatch_argv(script_path, run_dir), "sbatch")
        return parse_sbatch(res.stdout)[0]

    def jobs_in_dir(self, run_dir: str) -> list[str]:
        """Jobs submitted from ``run_dir`` (each run has its own): finds a submission whose
        answer was lost with the connection."""
        squeue, sacct = jobs_in_dir_argv()
        texts = [self._check(squeue, "squeue").stdout, self._check(sacct, "sacct").stdout]
        return parse_jobs_in_dir(texts, run_dir)

    def poll_commands(self, job_ids: Sequence[str]) -> list[list[str]]:
        """squeue, and sacct for every id (sacct answers for running jobs too), in chunks
        of :data:`SACCT_CHUNK` ids; array tasks are asked by their array, once
        (:func:`~ddp_tui.remote.backends.slurm.commands.accounting_ids`).

        With no ids, squeue alone: the header's connection state stays true when
        nothing of ours is running.
        """
        ids = accounting_ids(slurm_ids(job_ids))
        return [squeue_argv(), *(sacct_argv(chunk) for chunk in sacct_chunks(ids))]

    def parse_poll(
        self, job_ids: Sequence[str], results: Sequence[CommandResult]
    ) -> dict[str, JobStatus]:
        """States from the answers to :meth:`poll_commands`.

        Raises :class:`AccountingUnavailable`, carrying squeue's partial answer, when
        only sacct failed.
        """
        job_ids = slurm_ids(job_ids)
        if not results:
            raise SchedulerError("no answer to squeue", argv=squeue_argv())
        if not job_ids:
            if not results[0].ok:
                raise error_of(results[0], "squeue")
            return {}
        result = poll_from_results(job_ids, results[0], *results[1:])
        return self._finish(result)

    @staticmethod
    def _finish(result: PollResult) -> dict[str, JobStatus]:
        if result.warning is not None:
            w = result.warning
            raise AccountingUnavailable(
                w.message, result.statuses, argv=w.argv, returncode=w.returncode
            )
        return result.statuses

    def poll_result(self, job_ids: Sequence[str]) -> PollResult:
        """squeue for the user's jobs; one sacct only for the ids that left the queue."""
        job_ids = slurm_ids(job_ids)
        if not job_ids:
            return PollResult({})
        squeue = self._run(squeue_argv(), "squeue")
        if not squeue.ok:
            raise error_of(squeue, "squeue")
        queued = parse_squeue(squeue.stdout, only=set(job_ids))
        gone = accounting_ids(j for j in job_ids if j not in queued)
        saccts = [self._run(sacct_argv(chunk), "sacct") for chunk in sacct_chunks(gone)]
        return poll_from_results(job_ids, squeue, *saccts)

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        return self._finish(self.poll_result(job_ids))

    def cancel(self, job_id: str) -> None:
        self._check(scancel_argv(job_id), "scancel")

    def requeue(self, job_id: str) -> None:
        self._check(requeue_argv(job_id), "scontrol requeue")

    def version(self) -> str:
        return parse_version(self._check(version_argv(), "sinfo").stdout)

    def identity(self) -> str:
        name = parse_cluster_name(self._check(config_argv(), "scontrol show config").stdout)
        if name is None:
            raise SchedulerError("scontrol show config names no ClusterName")
        return f"slurm:{name}"

    def nodes(self) -> list[NodeInfo]:
        """Every node in every partition the user can see."""
        return parse_sinfo(self._check(sinfo_argv(), "sinfo").stdout)

    def partitions(self) -> list[PartitionInfo]:
        return partitions_from_nodes(self.nodes())

    def accounting(self, job_id: str) -> str:
        """sacct's table for the job, its steps and requeued attempts (for ``sacct.txt``)."""
        return self._check(accounting_argv(job_id), "sacct").stdout

    def batch_script(self, job_id: str) -> str:
        """``scontrol write batch_script``: kept by the controller until the job is purged
        (MinJobAge after it ends); a job started with srun or salloc has none."""
        res = self._check(batch_script_argv(job_id), "scontrol write batch_script")
        if not res.stdout and res.stderr.strip():
            # It exits 0 for an unknown job and for one with no script (srun, salloc),
            # saying so only on stderr ("Job script not specified").
            raise SchedulerError(res.stderr.strip(), argv=res.argv)
        return res.stdout

    def job_request(self, job_id: str) -> JobRequest:
        """One ``scontrol show job`` (:mod:`.job_request`): the controller's record, kept
        until MinJobAge after the job's end (300 s by default)."""
        try:
            record = self.show_job(job_id)
        except SchedulerUnavailable:
            raise
        except SchedulerError as exc:
            raise SchedulerError(
                f"Slurm does not know job {job_id} ({exc.message}): the controller forgets a "
                "job a few minutes after it ends (MinJobAge), and its batch script with it",
                argv=exc.argv,
            ) from None
        if record.get("ArrayJobId", "").strip() == job_id:  # scontrol shows every task
            raise SchedulerError(
                f"job {job_id} is a job array: name one of its tasks ({job_id}_<index>)"
            )
        return parse_job_request(record, job_id)

    def job_usage(self, job_id: str) -> JobAccounting | None:
        """One sacct: the job's last attempt with every step (:mod:`.usage_query`)."""
        return parse_usage(self._check(usage_argv(job_id), "sacct").stdout, job_id)

    def job_usages(self, job_ids: Sequence[str]) -> dict[str, JobAccounting]:
        """One sacct per 200 jobs (usually one in all): each job's last attempt with every
        step (:func:`~.usage_query.parse_usages`)."""
        ids = slurm_ids(job_ids)
        out: dict[str, JobAccounting] = {}
        for argv in usage_argvs(ids):
            out.update(parse_usages(self._check(argv, "sacct").stdout, ids))
        return out

    def user_jobs_commands(self, since: Since, *, version: str = "") -> list[list[str]]:
        """One squeue for every queued job of the user and one sacct for the window,
        whatever the number of jobs (:mod:`~ddp_tui.remote.backends.slurm.user_jobs`)."""
        return [user_squeue_argv(), user_sacct_argv(since, stdio=sacct_has_stdio(version))]

    def parse_user_jobs(self, since: Since, results: Sequence[CommandResult]) -> UserJobsAnswer:
        if not results:
            raise SchedulerError("no answer to squeue", argv=user_squeue_argv())
        squeue, *rest = results
        if not squeue.ok:
            raise error_of(squeue, "squeue")
        queued = tuple(parse_user_squeue(squeue.stdout))
        if not rest:
            return UserJobsAnswer(queued)
        sacct = rest[0]
        if not sacct.ok:
            return UserJobsAnswer(queued, warning=error_of(sacct, "sacct").message)
        # The fields asked are in the argv: StdOut/StdErr only where this sacct has them.
        fmt = next((a for a in sacct.argv if a.startswith("--format=")), None)
        fields = fmt.removeprefix("--format=").split(",") if fmt is not None else None
        return UserJobsAnswer(queued, tuple(parse_user_sacct(sacct.stdout, fields)))

    def job_stdio(self, job_id: str, listed: UserJob | None = None) -> StdioPaths:
        """``scontrol show job``'s StdOut and StdErr: the controller works the patterns out
        while it knows the job (queued, or ended within MinJobAge, 300 s by default). Past
        that, for a batch job, the name slurmstepd gives when sbatch had no ``-o``: this
        Slurm's accounting may keep no path (before 24.05)."""
        try:
            out, err = show_job_paths(self.show_job(job_id))
        except SchedulerError:
            out = err = None
        if out is not None or err is not None:
            return StdioPaths(out, err or out, f"scontrol show job {job_id}")
        guess = default_stdio(listed) if listed is not None else None
        if guess is not None:
            return StdioPaths(
                guess,
                guess,
                "Slurm's default name (the controller no longer knows the job, and this "
                "Slurm's accounting keeps no -o/-e path)",
            )
        return StdioPaths(
            None,
            None,
            f"no path known for job {job_id}: the controller no longer knows it, and this "
            "Slurm's accounting keeps no -o/-e path",
        )

    def estimated_start(self, job_id: str) -> str:
        res = self._check(start_argv(job_id), "squeue --start")
        return parse_start(res.stdout)

    def why_waiting(self, job_id: str) -> WaitExplanation:
        """Why the job waits: its reason's category and the queries that category needs
        (:mod:`.wait_explainer`), in two round trips; a query that fails is named, not
        raised. On demand only: ``squeue --start`` runs a backfill simulation."""
        return explain_wait(job_id, self._batch)

    def _batch(self, argvs: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Several commands in one round trip (over SSH), each as :meth:`_run` runs it."""
        batch = Batch(commands=[self._with_env(argv) for argv in argvs])
        try:
            return self.executor.run_batch(batch, timeout=self.timeout).commands
        except CommandTimeout as exc:
            raise SchedulerUnavailable(f"Slurm did not answer within {self.timeout:g} s") from exc
        except ExecutorError as exc:
            raise SchedulerUnavailable(str(exc)) from exc

    def _with_env(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with the profile's Slurm environment (``env``) put in front, for a
        command that is not run through :meth:`_run`."""
        if self.env:
            return ["env", *(f"{k}={v}" for k, v in self.env.items()), *argv]
        return list(argv)

    def node_argv(
        self, job_id: str, host: str, argv: Sequence[str], *, pty: bool = False
    ) -> list[str]:
        """``srun --jobid --overlap`` onto ``host``. An array task (``1234_5``) is resolved
        to its own job id first (one ``scontrol show job``): srun names jobs only that way.
        The profile's Slurm environment (``env``) is put in front, since the caller may
        run the command itself (a shell)."""
        if array_index(job_id) is not None:
            job_id = self.show_job(job_id).get("JobId", job_id)
        return self._with_env(srun_on_node_argv(job_id, host, argv, pty=pty))

    # ---- details

    def show_job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (``JobState``, ``NodeList``, ``Reason``...)."""
        res = self._check(show_job_argv(job_id), "scontrol show job")
        jobs = parse_show_job(res.stdout)
        if not jobs:
            raise SchedulerError(f"scontrol printed no job {job_id}", argv=res.argv)
        return jobs[0]

    def steps(self, job_id: str) -> dict[str, JobStatus]:
        """The job and its steps (``12``, ``12.batch``, ``12.0``...) for a detail view."""
        res = self._check(sacct_argv([job_id], steps=True), "sacct")
        return parse_sacct(res.stdout)
