"""Slurm as a :class:`~ddp_tui.remote.backends.scheduler.Scheduler`: :class:`SlurmScheduler`.

It only composes the builders of :mod:`ddp_tui.remote.backends.slurm.commands` and the parsers
of :mod:`ddp_tui.remote.backends.slurm.parsers` over an
:class:`~ddp_tui.remote.backends.executor.Executor`, local or over SSH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_tui.remote.backends.executor import CommandResult, CommandTimeout, Executor, ExecutorError
from ddp_tui.remote.backends.job_ids import array_index
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


class SlurmScheduler(Scheduler):
    """Slurm over an executor: at most one squeue and one sacct per poll."""

    name = "slurm"

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

    def estimated_start(self, job_id: str) -> str:
        res = self._check(start_argv(job_id), "squeue --start")
        return parse_start(res.stdout)

    def node_argv(
        self, job_id: str, host: str, argv: Sequence[str], *, pty: bool = False
    ) -> list[str]:
        """``srun --jobid --overlap`` onto ``host``. An array task (``1234_5``) is resolved
        to its own job id first (one ``scontrol show job``): srun names jobs only that way.
        The profile's Slurm environment (``env``) is put in front, since the caller may
        run the command itself (a shell)."""
        if array_index(job_id) is not None:
            job_id = self.show_job(job_id).get("JobId", job_id)
        srun = srun_on_node_argv(job_id, host, argv, pty=pty)
        if self.env:
            return ["env", *(f"{k}={v}" for k, v in self.env.items()), *srun]
        return srun

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
