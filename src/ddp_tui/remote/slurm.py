"""Slurm through its command-line tools: argv builders, parsers, and :class:`SlurmScheduler`.

The builders (``*_argv``) and parsers (``parse_*``) are pure functions, so a caller can
send several commands in one SSH round trip and parse the answers locally; the
scheduler only composes them over an :class:`~ddp_tui.remote.executor.Executor`.

Output is always requested in an explicit format: fields are separated by ``\\x1f``
(ASCII unit separator), the free-text job name comes last so it may contain anything,
and every command runs under ``env -u ...`` so that a user's ``SQUEUE_FORMAT``,
``SLURM_TIME_FORMAT``, ``SQUEUE_STATES`` and friends cannot change what is printed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ddp_tui.remote.executor import CommandResult, CommandTimeout, Executor, ExecutorError
from ddp_tui.remote.scheduler import (
    AccountingUnavailable,
    JobStatus,
    PartitionInfo,
    Scheduler,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.states import from_slurm

#: Separates fields in squeue/sacct/sinfo output; Slurm never prints it itself.
SEP = "\x1f"

# Environment variables that change what the tools print or which jobs they touch.
_COMMON_ENV = ("SLURM_CLUSTERS", "SLURM_BITSTR_LEN", "SLURM_DEBUG_FLAGS", "SLURM_TIME_FORMAT")
_TOOL_ENV: dict[str, tuple[str, ...]] = {
    "squeue": (
        "SQUEUE_ACCOUNT", "SQUEUE_ALL", "SQUEUE_ARRAY", "SQUEUE_ARRAY_UNIQUE", "SQUEUE_NAMES",
        "SQUEUE_FEDERATION", "SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_LICENSES",
        "SQUEUE_LOCAL", "SQUEUE_PARTITION", "SQUEUE_PRIORITY", "SQUEUE_QOS", "SQUEUE_SIBLING",
        "SQUEUE_SORT", "SQUEUE_STATES", "SQUEUE_USERS", "SQUEUE_CLUSTERS",
    ),
    "sacct": ("SACCT_FORMAT", "SACCT_FEDERATION", "SACCT_LOCAL"),
    "sinfo": (
        "SINFO_ALL", "SINFO_FEDERATION", "SINFO_FORMAT", "SINFO_LOCAL", "SINFO_PARTITION",
        "SINFO_SORT", "SINFO_CLUSTERS",
    ),
    "scontrol": (
        "SCONTROL_ALL", "SCONTROL_FEDERATION", "SCONTROL_FUTURE", "SCONTROL_LOCAL",
        "SCONTROL_SIBLING", "SLURM_CONF_OUT", "SLURM_TOPO_LEN",
    ),
    # Some of these widen what scancel kills (USER, NAME, STATE...) or make it prompt.
    "scancel": (
        "SCANCEL_ACCOUNT", "SCANCEL_BATCH", "SCANCEL_CTLD", "SCANCEL_FULL", "SCANCEL_HURRY",
        "SCANCEL_INTERACTIVE", "SCANCEL_NAME", "SCANCEL_PARTITION", "SCANCEL_QOS",
        "SCANCEL_STATE", "SCANCEL_USER", "SCANCEL_VERBOSE", "SCANCEL_WCKEY", "SCANCEL_SIGNAL",
        "SCANCEL_NODELIST",
    ),
    "sbatch": (),
}  # fmt: skip

#: States squeue is asked for: everything not final. Final jobs are read from sacct,
#: which also has the exit code.
QUEUED_STATES = (
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING",
    "SIGNALING", "STAGE_OUT", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
)  # fmt: skip

SQUEUE_FIELDS = (
    ("job_id", "%i"),
    ("state", "%T"),
    ("reason", "%r"),
    ("nodes", "%D"),
    ("node_list", "%N"),
    ("elapsed", "%M"),
    ("start", "%S"),
    ("end", "%e"),
    ("partition", "%P"),
    ("name", "%j"),  # last: a name may hold anything, even the separator
)
SACCT_FIELDS = (
    "JobID", "State", "ExitCode", "ElapsedRaw", "NNodes", "NodeList", "Start", "End",
    "Partition", "Reason", "JobName",
)  # fmt: skip
SINFO_FIELDS = (
    ("node", "%N"),
    ("partition", "%P"),
    ("available", "%a"),
    ("state", "%T"),
    ("cpus", "%c"),
    ("memory_mb", "%m"),
    ("gres", "%G"),
    ("time_limit", "%l"),
    ("job_size", "%s"),
)
#: The human-readable accounting summary saved as ``sacct.txt``.
ACCOUNTING_FORMAT = (
    "JobID%-14,JobName%-16,Partition%-10,State%-14,ExitCode%8,Elapsed%11,NNodes%6,"
    "NodeList%-16,Start%19,End%19,AllocTRES%-44,MaxRSS%10"
)

_UNAVAILABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Connection timed out|Zero Bytes were transmitted|Could not establish a configuration"
    r"|Problem talking to the database|slurmdbd.*(?:not responding|down)|"
    r"Unable to establish a connection|Transport endpoint is not connected|"
    r"Slurm backup controller in standby mode|command not found|"
    r"something wrong with opening/reading|unable to status file",
    re.IGNORECASE,
)
_EMPTY = {"", "N/A", "n/a", "Unknown", "None", "None assigned", "(null)"}


@dataclass(frozen=True)
class NodeInfo:
    """One line of ``sinfo --Node``: a node as seen in one partition."""

    name: str
    partition: str
    is_default: bool
    available: str
    state: str
    cpus: int
    memory_mb: int
    gpus: int
    gres: str
    max_time_min: int | None
    max_nodes: int | None


@dataclass(frozen=True)
class PollResult:
    statuses: dict[str, JobStatus]
    #: Set when accounting failed while the queue was read: the statuses are partial.
    warning: SchedulerError | None = None


# --------------------------------------------------------------------------- argv builders


def _env_prefix(tool: str) -> list[str]:
    argv = ["env"]
    for name in (*_COMMON_ENV, *_TOOL_ENV[tool]):
        argv += ["-u", name]
    # Timestamps as ISO 8601 whatever the user's SLURM_TIME_FORMAT says.
    argv.append("SLURM_TIME_FORMAT=standard")
    argv.append(tool)
    return argv


_JOB_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?(?:\.\w+)?")


def _check_job_id(job_id: str) -> str:
    # Ids go into argv, never a shell, but a stray "-" or "," would change the meaning.
    if not _JOB_ID.fullmatch(job_id):
        raise SchedulerError(f"not a Slurm job id: {job_id!r}")
    return job_id


#: Ids per sacct call. A very long ``--jobs=`` list is a known way to break Slurm tools
#: (argument limits, slurmdbd query size); history keeps steady polls far below this.
SACCT_CHUNK = 200


def _chunks(ids: Sequence[str], size: int = SACCT_CHUNK) -> list[Sequence[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _slurm_ids(job_ids: Iterable[str]) -> list[str]:
    """The ids that can be Slurm's, once each (another scheduler's ids are just unknown)."""
    return [j for j in dict.fromkeys(job_ids) if _JOB_ID.fullmatch(j)]


def sbatch_argv(script_path: str, run_dir: str) -> list[str]:
    """Submit ``script_path`` with ``run_dir`` as the job's working directory."""
    return [*_env_prefix("sbatch"), "--parsable", f"--chdir={run_dir}", "--", script_path]


def jobs_in_dir_argv() -> list[list[str]]:
    """squeue and sacct listing the user's recent jobs with their working directories."""
    return [
        [*_env_prefix("squeue"), "--me", "--noheader", f"--format=%i{SEP}%Z"],
        [
            *_env_prefix("sacct"),
            "--allocations",
            "--noheader",
            "--parsable2",
            f"--delimiter={SEP}",
            "--starttime=now-2days",
            "--format=JobID,WorkDir",
        ],
    ]


def parse_jobs_in_dir(texts: Sequence[str], work_dir: str) -> list[str]:
    """Job ids whose working directory is ``work_dir``, oldest first, without repeats."""
    found: list[str] = []
    want = work_dir.rstrip("/")
    for text in texts:
        for line in text.splitlines():
            job_id, _, wd = line.partition(SEP)
            job_id = job_id.strip()
            if job_id and wd.strip().rstrip("/") == want and job_id not in found:
                found.append(job_id)
    return sorted(found, key=lambda j: (len(j), j))


def squeue_argv() -> list[str]:
    """The user's queued and running jobs, one record per line, name last."""
    fmt = SEP.join(code for _, code in SQUEUE_FIELDS)
    return [
        *_env_prefix("squeue"),
        "--me",
        "--noheader",
        f"--states={','.join(QUEUED_STATES)}",
        f"--format={fmt}",
    ]


def sacct_argv(job_ids: Iterable[str], *, steps: bool = False) -> list[str]:
    """One batched accounting query; allocations only unless ``steps``."""
    ids = [_check_job_id(j) for j in job_ids]
    argv = [*_env_prefix("sacct")]
    if not steps:
        argv.append("--allocations")
    return [
        *argv,
        "--parsable2",
        "--noheader",
        f"--delimiter={SEP}",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--jobs={','.join(ids)}",
    ]


def accounting_argv(job_id: str) -> list[str]:
    """sacct's table for one job, its steps and every requeued attempt (``--duplicates``)."""
    return [
        *_env_prefix("sacct"),
        "--duplicates",
        f"--format={ACCOUNTING_FORMAT}",
        f"--jobs={_check_job_id(job_id)}",
    ]


def sinfo_argv() -> list[str]:
    """One line per node and partition."""
    fmt = SEP.join(code for _, code in SINFO_FIELDS)
    return [*_env_prefix("sinfo"), "--noheader", "--Node", f"--format={fmt}"]


def version_argv() -> list[str]:
    return [*_env_prefix("sinfo"), "--version"]


def config_argv() -> list[str]:
    return [*_env_prefix("scontrol"), "show", "config"]


def parse_cluster_name(text: str) -> str | None:
    """``ClusterName`` from ``scontrol show config``."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName" and value.strip():
            return value.strip()
    return None


def scancel_argv(job_id: str) -> list[str]:
    return [*_env_prefix("scancel"), _check_job_id(job_id)]


def requeue_argv(job_id: str) -> list[str]:
    return [*_env_prefix("scontrol"), "requeue", _check_job_id(job_id)]


def show_job_argv(job_id: str) -> list[str]:
    return [*_env_prefix("scontrol"), "--oneliner", "show", "job", _check_job_id(job_id)]


# --------------------------------------------------------------------------- parsers


def _records(text: str, nfields: int) -> list[list[str]]:
    """Split ``text`` into records of ``nfields`` fields, the last one free text.

    A job name may contain newlines: a line with too few separators continues the
    previous record's last field.
    """
    records: list[list[str]] = []
    if text.endswith("\n"):
        text = text[:-1]
    for line in text.split("\n"):
        if line.count(SEP) >= nfields - 1:
            records.append(line.split(SEP, nfields - 1))
        elif records:
            records[-1][-1] += "\n" + line
    return records


def _only_records(text: str, nfields: int, only: Collection[str]) -> str:
    """The lines of ``text`` that belong to records of the ids in ``only``.

    A cheap first pass for a queue of thousands of jobs: one partition per line, and the
    separator count only for the few lines kept.
    """
    kept: list[str] = []
    keeping = False
    for line in text.split("\n"):
        head, sep, _ = line.partition(SEP)
        if sep and line.count(SEP) >= nfields - 1:
            keeping = head.strip() in only
        if keeping:
            kept.append(line)
    return "\n".join(kept)


def _int(text: str, default: int = 0) -> int:
    try:
        return int(text.strip())
    except ValueError:
        return default


def _time(text: str) -> str:
    text = text.strip()
    return "" if text in _EMPTY else text


def parse_duration(text: str) -> int | None:
    """Seconds in a Slurm duration (``D-HH:MM:SS``, ``D-HH``, ``HH:MM:SS``, ``MM:SS``, or
    bare minutes); None for ``UNLIMITED``/``INFINITE``; 0 for anything else."""
    t = text.strip()
    if t.upper() in {"UNLIMITED", "INFINITE"}:
        return None
    days_part, dash, clock = t.rpartition("-") if "-" in t else ("", "", t)
    parts = clock.split(":")
    if (dash and not days_part.isdigit()) or len(parts) > 3 or not all(p.isdigit() for p in parts):
        return 0
    nums = [int(p) for p in parts]
    if dash:  # after a day count the fields are hours[:minutes[:seconds]]
        h, m, s = [*nums, 0, 0][:3]
        return int(days_part) * 86400 + h * 3600 + m * 60 + s
    if len(nums) == 3:
        return nums[0] * 3600 + nums[1] * 60 + nums[2]
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 60


def _limit_minutes(text: str) -> int | None:
    t = text.strip()
    if t.lower() in {"n/a", ""}:
        return None
    secs = parse_duration(t)
    return None if secs is None else secs // 60


def parse_exit_code(text: str) -> int | None:
    """``code:signal`` to one number: the code, or 128+signal when a signal ended it."""
    t = text.strip()
    if not t:
        return None
    code, _, sig = t.partition(":")
    c, s = _int(code, -1), _int(sig, 0)
    if c < 0:
        return None
    return 128 + s if c == 0 and s > 0 else c


def parse_squeue(text: str, only: Collection[str] | None = None) -> dict[str, JobStatus]:
    """Rows of :func:`squeue_argv` by job id; with ``only``, just those ids.

    A user may have thousands of jobs queued; the app follows few of them, so the
    rest are skipped before any field is decoded.
    """
    out: dict[str, JobStatus] = {}
    if only is not None:
        text = _only_records(text, len(SQUEUE_FIELDS), only)
    for rec in _records(text, len(SQUEUE_FIELDS)):
        job_id = rec[0].strip()
        if not job_id or (only is not None and job_id not in only):
            continue
        f = dict(zip((name for name, _ in SQUEUE_FIELDS), rec, strict=True))
        out[job_id] = JobStatus(
            job_id=job_id,
            state=from_slurm(f["state"]),
            raw_state=f["state"].strip(),
            reason=_time(f["reason"]),
            nodes=_int(f["nodes"]),
            node_list=_time(f["node_list"]),
            elapsed_sec=float(parse_duration(f["elapsed"]) or 0),
            exit_code=None,
            start=_time(f["start"]),
            end=_time(f["end"]),
            name=f["name"],
            partition=f["partition"].strip(),
        )
    return out


def parse_sacct(text: str) -> dict[str, JobStatus]:
    """Rows of :func:`sacct_argv` by job id (step ids such as ``12.batch`` included)."""
    out: dict[str, JobStatus] = {}
    for rec in _records(text, len(SACCT_FIELDS)):
        f = dict(zip(SACCT_FIELDS, rec, strict=True))
        job_id = f["JobID"].strip()
        if not job_id:
            continue
        out[job_id] = JobStatus(
            job_id=job_id,
            state=from_slurm(f["State"]),
            raw_state=f["State"].strip(),
            reason=_time(f["Reason"]),
            nodes=_int(f["NNodes"]),
            node_list=_time(f["NodeList"]),
            elapsed_sec=float(_int(f["ElapsedRaw"])),
            exit_code=parse_exit_code(f["ExitCode"]),
            start=_time(f["Start"]),
            end=_time(f["End"]),
            name=f["JobName"],
            partition=f["Partition"].strip(),
        )
    return out


def parse_gpus(gres: str) -> int:
    """GPUs in a GRES string such as ``gpu:2``, ``gpu:a100:4(S:0-1),gpu:v100:2`` or ``(null)``."""
    total = 0
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = parts[-1].split("(")[0]
        total += int(count) if count.isdigit() else (1 if len(parts) == 2 else 0)
    return total


def parse_sinfo(text: str) -> list[NodeInfo]:
    """Rows of :func:`sinfo_argv`."""
    nodes: list[NodeInfo] = []
    for rec in _records(text, len(SINFO_FIELDS)):
        f = dict(zip((name for name, _ in SINFO_FIELDS), rec, strict=True))
        name = f["node"].strip()
        if not name:
            continue
        part = f["partition"].strip()
        size = f["job_size"].strip().rpartition("-")[2]
        nodes.append(
            NodeInfo(
                name=name,
                partition=part.rstrip("*"),
                is_default=part.endswith("*"),
                available=f["available"].strip(),
                state=f["state"].strip(),
                cpus=_int(f["cpus"]),
                memory_mb=_int(f["memory_mb"]),
                gpus=parse_gpus(f["gres"]),
                gres=_time(f["gres"]),
                max_time_min=_limit_minutes(f["time_limit"]),
                max_nodes=int(size) if size.isdigit() else None,
            )
        )
    return nodes


def partitions_from_nodes(nodes: Iterable[NodeInfo]) -> list[PartitionInfo]:
    """One :class:`PartitionInfo` per partition: the default first, then by name.

    (Not sinfo's order: ``--Node`` lists a node's partitions in no fixed order.)
    ``gpus_per_node`` and ``cpus_per_node`` are the largest over the partition's nodes.
    """
    grouped: dict[str, list[NodeInfo]] = {}
    for node in nodes:
        grouped.setdefault(node.partition, []).append(node)
    parts: list[PartitionInfo] = []
    for name, members in grouped.items():
        first = members[0]
        parts.append(
            PartitionInfo(
                name=name,
                nodes=len({m.name for m in members}),
                gpus_per_node=max(m.gpus for m in members),
                cpus_per_node=max(m.cpus for m in members),
                max_time_min=first.max_time_min,
                max_nodes=first.max_nodes,
                is_default=first.is_default,
                states=tuple(sorted({m.state for m in members})),
            )
        )
    return sorted(parts, key=lambda p: (not p.is_default, p.name))


def parse_sbatch(text: str) -> tuple[str, str | None]:
    """``sbatch --parsable`` output (``jobid`` or ``jobid;cluster``) to (id, cluster)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    match = re.fullmatch(r"(\d+)(?:;(\S+))?", lines[-1]) if lines else None
    if match is None:
        raise SchedulerError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return match.group(1), match.group(2)


def parse_version(text: str) -> str:
    """``slurm 23.11.4`` or Debian's ``slurm-wlm 22.05.8`` to ``Slurm 22.05.8``."""
    match = re.search(r"(\d+\.\d+(?:\.\d+)?\S*)", text)
    return f"Slurm {match.group(1)}" if match else text.strip()


_SHOW_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=")


def parse_show_job(text: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show job`` output: one dict per job line.

    A value runs up to the next ``Key=`` (a capitalised word), so values with spaces,
    such as ``Command=python train.py lr=3``, stay whole; a newline in a job name
    continues the line.
    """
    lines: list[str] = []
    for line in text.split("\n"):
        if line.startswith("JobId="):
            lines.append(line)
        elif lines:  # a job name with a newline in it
            lines[-1] += "\n" + line
    jobs: list[dict[str, str]] = []
    for line in lines:
        found = list(_SHOW_KEY.finditer(line))
        job: dict[str, str] = {}
        for i, m in enumerate(found):
            end = found[i + 1].start() if i + 1 < len(found) else len(line)
            job[m.group(1)] = line[m.end() : end].strip()
        jobs.append(job)
    return jobs


def error_of(res: CommandResult, what: str) -> SchedulerError:
    """The typed error for a failed command, carrying the tool's own message."""
    message = (res.stderr.strip() or res.stdout.strip() or f"exit status {res.returncode}")[:2000]
    if res.returncode == 127:  # "env: 'squeue': No such file or directory"
        tool = what.split()[0]
        message = f"{tool}: command not found (is Slurm installed, or a module loaded?)"
        return SchedulerUnavailable(message, argv=res.argv, returncode=res.returncode)
    cls = SchedulerUnavailable if _UNAVAILABLE.search(message) else SchedulerError
    return cls(message, argv=res.argv, returncode=res.returncode)


def merge_poll(
    job_ids: Sequence[str],
    queued: Mapping[str, JobStatus],
    accounted: Mapping[str, JobStatus],
) -> dict[str, JobStatus]:
    """The status of each of ``job_ids``: squeue wins (it is current, sacct lags);
    ids that neither knows are left out."""
    out: dict[str, JobStatus] = {}
    for job_id in job_ids:
        status = queued.get(job_id) or accounted.get(job_id)
        if status is not None:
            out[job_id] = status
    return out


def poll_from_results(
    job_ids: Sequence[str],
    squeue: CommandResult,
    *saccts: CommandResult,
) -> PollResult:
    """Parse the answers of :func:`squeue_argv` and of each :func:`sacct_argv` chunk.

    Raises the squeue error (typically :class:`SchedulerUnavailable`); a failed sacct
    only makes :attr:`PollResult.warning`.
    """
    if not squeue.ok:
        raise error_of(squeue, "squeue")
    queued = parse_squeue(squeue.stdout, only=set(job_ids))
    accounted: dict[str, JobStatus] = {}
    warning: SchedulerError | None = None
    for sacct in saccts:
        if sacct.ok:
            accounted.update(parse_sacct(sacct.stdout))
        elif warning is None:
            warning = error_of(sacct, "sacct")
    return PollResult(merge_poll(job_ids, queued, accounted), warning)


# --------------------------------------------------------------------------- the scheduler


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
        of :data:`SACCT_CHUNK` ids.

        With no ids, squeue alone: the header's connection state stays true when
        nothing of ours is running.
        """
        return [squeue_argv(), *(sacct_argv(chunk) for chunk in _chunks(_slurm_ids(job_ids)))]

    def parse_poll(
        self, job_ids: Sequence[str], results: Sequence[CommandResult]
    ) -> dict[str, JobStatus]:
        """States from the answers to :meth:`poll_commands`.

        Raises :class:`AccountingUnavailable`, carrying squeue's partial answer, when
        only sacct failed.
        """
        job_ids = _slurm_ids(job_ids)
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
        job_ids = _slurm_ids(job_ids)
        if not job_ids:
            return PollResult({})
        squeue = self._run(squeue_argv(), "squeue")
        if not squeue.ok:
            raise error_of(squeue, "squeue")
        queued = parse_squeue(squeue.stdout, only=set(job_ids))
        gone = [j for j in job_ids if j not in queued]
        saccts = [self._run(sacct_argv(chunk), "sacct") for chunk in _chunks(gone)]
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
