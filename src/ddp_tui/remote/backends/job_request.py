"""What one job of the user asked for and was given, as its scheduler says while it knows the
job: :class:`JobRequest`. A pure value.

It is what a run made of a job ddp-tui did not submit needs (``ddp-tui adopt``,
:mod:`ddp_tui.remote.runs.adoption`): where the job ran from, where its ``.out`` and ``.err``
are, whether it has a batch script at all, its size for the run's spec, and the sbatch
options that ask for the same resources again. The Slurm backend makes it of one
``scontrol show job`` (:mod:`ddp_tui.remote.backends.slurm.job_request`), the local scheduler
of its job file.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddp_tui.remote.backends.states import JobState


@dataclass(frozen=True)
class JobRequest:
    """One job (or one array task) as its scheduler records it."""

    #: ``1234``, or an array task's ``1234_5``.
    job_id: str
    name: str
    state: JobState
    #: Whether the job has a batch script: false for an interactive job (srun, salloc).
    batch: bool
    #: Where the job ran from ("" where not known).
    work_dir: str
    #: Its ``.out`` and ``.err``; None where not known (yet).
    stdout: str | None
    stderr: str | None
    user: str = ""
    #: The partition (several joined by commas while it may start in any).
    partition: str = ""
    #: Nodes: the job's own count once it runs, the least it asked for before.
    nodes: int = 1
    #: GPUs of the whole job; None where the scheduler does not say.
    gpus: int | None = None
    cpus_per_task: int | None = None
    #: Memory per node in sbatch's form (``100M``); "" where none was asked for.
    mem_per_node: str = ""
    #: None: no limit, or none known.
    time_limit_sec: int | None = None
    account: str = ""
    qos: str = ""
    constraint: str = ""
    #: The sbatch options that ask for what the job was given, in the scheduler's own words
    #: (``("gres", "gpu:1")``; a flag's value is ""); none where the scheduler has no such
    #: options (the local scheduler runs every job on this machine).
    options: tuple[tuple[str, str], ...] = ()
    #: Where this comes from, in words ("scontrol show job 1234").
    source: str = ""
