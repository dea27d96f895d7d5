"""Bringing in a job ddp-tui did not submit ("Bring it in", key ``b`` on a job's screen;
``ddp-tui adopt JOBID``): a run directory that records the job, so that it is followed,
diagnosed and retried like one of ddp-tui's own. :class:`AdoptionService`.

The run (``kind: "adopted"`` in ``spec.json``, docs/architecture.md "The run directory") holds:

- ``spec.json``: a spec built from what the scheduler says of the job (its name made a valid
  run name, its nodes, GPUs, partition, time limit, CPUs per task and memory where known;
  entry ``script``, run in place from the job's directory), and the ``adopted`` record: the
  job, where it ran from, its logs, who submitted it, when it was brought in, and what of
  the job's request could not be carried over;
- ``original.sbatch``: the job's batch script exactly as the scheduler kept it;
- ``job.sbatch``: what a retry submits: ``#SBATCH`` lines for what the scheduler gave the job,
  the run directory's logs (``slurm-%j.out``/``.err``), then ``original.sbatch`` under its own
  interpreter from the job's directory (:func:`ddp_tui.sbatch_templates.render_adopted`);
- ``jobs.jsonl``: the job as the run's first attempt, so a refresh polls it and records its
  end, and the listing of every job counts it as a run's;
- ``slurm-<job id>.out`` (and ``.err`` where it is another file): links to where the job
  writes its logs, so the run's readers find the first attempt's logs where every run has them.

All or nothing: the directory is made by :meth:`RunStore.create_run`, these files included.
Not to be confused with a refresh *adopting* the job of a submit that died
(:mod:`ddp_tui.remote.store.run_jobs`): that job was ddp-tui's own all along.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import Executor
from ddp_tui.remote.backends.job_ids import is_job_id
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError, SchedulerUnavailable
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.journal import Journal, attempt_record
from ddp_tui.remote.store.runs import (
    ORIGINAL_SCRIPT_FILE,
    RunInfo,
    RunStore,
    attempt_logs,
    sanitize_name,
)
from ddp_tui.sbatch_templates import directive, render_adopted
from ddp_tui.spec import ExperimentSpec, SpecError, format_time_limit, validate
from ddp_tui.spec.vocabulary import MAX_NODES, MAX_PROCS_PER_NODE, MAX_TIME_MIN

#: The ``kind`` of an adopted run's spec.json.
ADOPTED_KIND = "adopted"
#: The spec fields taken from the scheduler's record: one it refuses is left at its default,
#: and named in the ``adopted`` record's ``left_out``.
_FROM_THE_JOB = (
    "nodes", "gpus_per_node", "partition", "account", "qos", "constraint", "time_limit",
    "cpus_per_task", "mem", "project_dir",
)  # fmt: skip
_HAS_A_LETTER_OR_DIGIT = re.compile(r"[A-Za-z0-9]")


class AdoptionRefused(DdpTuiError):
    """A job that cannot be brought in as a run, and why (in the message)."""

    title = "Bring it in"


def adopted_name(job_name: str, job_id: str) -> str:
    """The run's name for a job named ``job_name``: letters, digits and ``_ . -`` (anything
    else ``_``), starting with a letter or digit, at most 64; ``job-<id>`` where nothing of
    the name is left."""
    if _HAS_A_LETTER_OR_DIGIT.search(job_name):
        return sanitize_name(job_name)
    return f"job-{job_id}"


def script_command(script: str, path: str) -> list[str]:
    """How the scheduler ran the batch script ``script`` (kept at ``path``): under its ``#!``
    interpreter, with the one argument the kernel passes after it (``#!/usr/bin/env python3``:
    ``/usr/bin/env python3 PATH``); bash where it has no ``#!`` line."""
    first = script.split("\n", 1)[0]
    if not first.startswith("#!"):
        return ["bash", path]
    words = re.split(r"[ \t]+", first[2:].strip(), maxsplit=1)
    if not words[0]:
        return ["bash", path]
    return [*words, path]


def adopted_spec(job: JobRequest, name: str) -> tuple[dict[str, Any], list[str]]:
    """The spec of a run made of ``job`` (valid: a field the spec refuses is left at its
    default), and what was left out, each in words."""
    gpus = job.gpus or 0
    nodes = max(1, job.nodes)
    left_out: list[str] = []
    per_node = max(1, gpus // nodes) if gpus else 1
    if gpus and gpus % nodes:
        left_out.append(f"gpus_per_node: {gpus} GPUs over {nodes} nodes, {per_node} per node")
    minutes = math.ceil(job.time_limit_sec / 60) if job.time_limit_sec else MAX_TIME_MIN
    spec: dict[str, Any] = {
        "name": name,
        "entry": "script",
        "script": ORIGINAL_SCRIPT_FILE,
        # It runs where the job ran, whatever is there when it is retried.
        "code_mode": "in-place",
        "project_dir": job.work_dir,
        "nodes": min(nodes, MAX_NODES),
        "gpus_per_node": min(per_node, MAX_PROCS_PER_NODE),
        "device": "cuda" if gpus else "cpu",
        "partition": job.partition,
        "account": job.account,
        "qos": job.qos,
        "constraint": job.constraint,
        # No limit: the longest a spec can say.
        "time_limit": format_time_limit(min(minutes, MAX_TIME_MIN)),
        "mem": job.mem_per_node,
        "epochs": None,
        # ddp-tui's own signal, requeue and sampler are not in the job's script.
        "requeue": False,
        "signal_lead_sec": 0,
        "telemetry_sec": 0,
    }
    if job.cpus_per_task:
        spec["cpus_per_task"] = job.cpus_per_task
    for _ in range(len(_FROM_THE_JOB) + 1):
        errors = _spec_errors(spec)
        if not errors:
            return ExperimentSpec.from_dict(spec).to_dict(), left_out
        for field, message in errors:
            if field not in _FROM_THE_JOB or field not in spec:
                raise AdoptionRefused(f"cannot make a run of job {job.job_id}: {field} {message}")
            left_out.append(f"{field}: {spec.pop(field)!r} {message}")
    raise AdoptionRefused(f"cannot make a valid spec of job {job.job_id}")  # pragma: no cover


def _spec_errors(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    try:
        errors = validate(ExperimentSpec.from_dict(spec))
    except SpecError as exc:
        errors = list(exc.errors)
    return [(e.field, e.message) for e in errors]


def wrapper_directives(job: JobRequest, name: str) -> tuple[list[str], list[str]]:
    """The ``#SBATCH`` options of the run's ``job.sbatch``: its name, and what the scheduler
    gave the job; and the options that cannot go on such a line as they are (named)."""
    lines: list[str] = []
    left_out: list[str] = []
    for option, value in (("job-name", name), *job.options):
        line = directive(option, value)
        if line is None:
            left_out.append(f"--{option}={value}: not writable on an #SBATCH line")
        else:
            lines.append(line)
    return lines, left_out


@dataclass(frozen=True)
class _Brought:
    """What the run directory is made of (see the module docstring)."""

    job: JobRequest
    name: str
    spec: dict[str, Any]
    record: dict[str, Any]
    script: str
    directives: list[str]


class AdoptionService:
    """Makes runs of jobs ddp-tui did not submit. ``views_of`` gives the rows of run ids (the
    runs service's)."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        store: RunStore,
        *,
        views_of: Callable[[Sequence[str]], list[RunView]],
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.store = store
        self._views_of = views_of

    def adopt_job(self, job_id: str) -> RunView:
        """Make a run of job ``job_id`` (one job, or one array task ``1234_5``) of the user's:
        its row. Refused (:class:`AdoptionRefused`, saying why) for an id that is a run's
        attempt already, a job the scheduler does not know (any more), an interactive job,
        a job of ddp-tui's own, or one whose batch script the scheduler no longer has."""
        if not is_job_id(job_id):
            raise AdoptionRefused(
                f"not a job id: {job_id!r} (give one job, 1234, or one array task, 1234_5)"
            )
        runs = self.store.list_runs()
        self._refuse_if_a_run(job_id, runs)
        brought = self._read(job_id, runs)
        ref = self.store.create_run(
            brought.spec,
            brought.name,
            lambda run_dir: render_adopted(
                run_dir,
                job_id=brought.job.job_id,
                directives=brought.directives,
                work_dir=brought.job.work_dir,
                command=script_command(brought.script, f"{run_dir}/{ORIGINAL_SCRIPT_FILE}"),
            ),
            kind=ADOPTED_KIND,
            extra={"adopted": brought.record},
            fill=lambda tmp: self._fill(tmp, brought),
            code=False,
        )
        return self._views_of([ref.run_id])[0]

    def _read(self, job_id: str, runs: Sequence[RunInfo]) -> _Brought:
        """What the scheduler says of the job, and its script; each refusal here."""
        try:
            job = self.scheduler.job_request(job_id)
        except SchedulerUnavailable:
            raise
        except SchedulerError as exc:
            raise AdoptionRefused(f"cannot bring in job {job_id}: {exc}") from None
        if job.job_id != job_id:  # an array task named by its own number
            self._refuse_if_a_run(job.job_id, runs)
        if not job.batch:
            raise AdoptionRefused(
                f"cannot bring in job {job.job_id} ({job.name}): it is interactive (srun or "
                "salloc), so it has no batch script to run again"
            )
        root = self.store.root.rstrip("/")
        if job.work_dir and (job.work_dir.rstrip("/") + "/").startswith(root + "/"):
            raise AdoptionRefused(
                f"job {job.job_id} runs from {job.work_dir}, under the runs root: it is one of "
                "ddp-tui's own (a submit still recording it)"
            )
        if not job.work_dir:
            raise AdoptionRefused(
                f"cannot bring in job {job.job_id}: {job.source} names no directory it ran from"
            )
        try:
            script = self.scheduler.batch_script(job.job_id)
        except SchedulerUnavailable:
            raise
        except SchedulerError as exc:
            raise AdoptionRefused(
                f"cannot bring in job {job.job_id}: the {self.scheduler.name} scheduler keeps "
                f"no batch script of it ({exc})"
            ) from None
        if not script.strip():
            raise AdoptionRefused(
                f"cannot bring in job {job.job_id}: its batch script is empty as the "
                f"{self.scheduler.name} scheduler keeps it"
            )
        name = adopted_name(job.name, job.job_id)
        spec, left_out = adopted_spec(job, name)
        directives, not_written = wrapper_directives(job, name)
        record = {
            "job_id": job.job_id,
            "scheduler": self.scheduler.name,
            "name": job.name,
            "work_dir": job.work_dir,
            "stdout": job.stdout,
            "stderr": job.stderr,
            "submitted_by": job.user or "the user (not ddp-tui)",
            "adopted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": job.source,
            "left_out": [*left_out, *not_written],
        }
        return _Brought(job, name, spec, record, script, directives)

    def _refuse_if_a_run(self, job_id: str, runs: Sequence[RunInfo]) -> None:
        for info in runs:
            if any(str(a.get("job_id")) == job_id for a in info.jobs):
                raise AdoptionRefused(
                    f"job {job_id} is an attempt of run {info.run_id} already: open that run"
                )

    def _fill(self, tmp: str, brought: _Brought) -> None:
        """The adopted run's own files, written into its directory before it is in place."""
        job = brought.job
        self.executor.write_atomic(
            f"{tmp}/{ORIGINAL_SCRIPT_FILE}", brought.script.encode(), mode=0o755
        )
        Journal(self.executor, tmp).append(attempt_record(job.job_id, self.scheduler.name, None, 1))
        out, err = attempt_logs(job.job_id)
        links = {out: job.stdout}
        if job.stderr != job.stdout:
            links[err] = job.stderr
        for link, target in links.items():
            if target:  # where known: a pending job's %N, an interactive job's, are not
                self.executor.symlink(posixpath.join(job.work_dir, target), f"{tmp}/{link}")
