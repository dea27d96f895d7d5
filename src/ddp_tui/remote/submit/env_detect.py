"""What each cluster offers a job's software environment, found out once a day per partition.

- **pyxis**: ``srun --help`` on the login node (one command): the SPANK plugin adds its
  options to the client, so it is there when the help lists ``--container-image``.
- **apptainer, singularity, podman, enroot, ``module``** (with versions), ``nvidia-smi -L``,
  ``/dev/mqueue`` and the hard limits ``ulimit -Hn``/``-Hu``: a tiny probe job per
  partition on Slurm (``sbatch --export=NONE``, one core, 100 MB, one minute), whose
  script (``sbatch_templates/detect.sh.j2``) prints one ``ddp-tui-detect KEY VALUE`` line
  per fact into ``<runs_root>/.ddp-tui/detect/<job>.out``. The local scheduler runs the
  same script directly, with the minimal environment its jobs get.

The wait for a probe is bounded by the caller (the plan does not wait at all: it reads
the probe's file again after the environment check); a probe still queued is remembered
and its file read by a later call, so that no second probe is sent meanwhile.

What was found is remembered in ``$XDG_STATE_HOME/ddp-tui/environments.json``, keyed
[profile, where, partition], for 24 hours (:mod:`.state_file`: read afresh, written
atomically, a damaged file is "not detected"). A plan whose container runtime (or
``modules`` without a ``module`` command) was detected absent on its partition is refused,
naming what was found and when; one never detected gets only a note. See
docs/architecture.md, "Submit", and the README's "Environments and containers".
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.submit.probe_jobs import (
    Awaited,
    PendingProbe,
    ProbeCache,
    await_answer,
    read_text,
)
from ddp_tui.remote.submit.state_file import state_path
from ddp_tui.spec import ExperimentSpec, FieldError
from ddp_tui.spec.environments import CONTAINER_RUNTIMES

if TYPE_CHECKING:
    from ddp_tui.config import Profile

#: The file of detected environments, in ddp-tui's state directory.
DETECT_FILE = "environments.json"
#: How long what was detected stands: sites install runtimes rarely, and a stale answer
#: only refuses what ``--recheck-environment`` lets through again.
VALID_SEC = 24 * 3600.0
#: The probe's queue wait the CLI's ``envs`` accepts (the plan's is the caller's).
DETECT_WAIT_SEC = 120.0
#: Starts every line of the probe's answer.
PROBE_MARK = "ddp-tui-detect"
#: The programs the probe looks for, in the order the facts list them.
TOOLS = ("apptainer", "singularity", "podman", "enroot")
#: The container runtimes a spec can name, in the order the facts list them.
RUNTIMES = tuple(r for r in CONTAINER_RUNTIMES if r)
#: Where the probe's script and answers go, under the runs root (not a run: dot names
#: are never listed as runs).
DETECT_SUBDIR = ".ddp-tui/detect"

_VERSION_RE = re.compile(r"\d+(?:\.\d+)+(?:[-+~][0-9A-Za-z.+~-]+)?")


def version_of(line: str) -> str:
    """The version in a tool's ``--version`` line (``podman version 4.3.1`` → ``4.3.1``;
    ``Modules Release 5.2.0 (2022-11-08)`` → ``5.2.0``), else the line itself."""
    match = _VERSION_RE.search(line)
    return match.group(0) if match else line.strip()


def parse_probe(text: str) -> dict[str, list[str]] | None:
    """The probe's ``ddp-tui-detect KEY VALUE`` lines as KEY → values in order (a key such
    as ``gpu`` comes once per GPU); None unless its ``end`` line is there (a file still
    being written, or cut short). Other lines (a site's login banner) are ignored."""
    facts: dict[str, list[str]] = {}
    for line in text.splitlines():
        mark, _, rest = line.partition(" ")
        if mark != PROBE_MARK:
            continue
        key, _, value = rest.partition(" ")
        facts.setdefault(key, []).append(value.strip())
    return facts if "end" in facts else None


@dataclass(frozen=True)
class Tool:
    """One program the probe looked for: its path ("" when absent) and version."""

    name: str
    path: str = ""
    version: str = ""

    @property
    def found(self) -> bool:
        return bool(self.path)

    def text(self) -> str:
        return f"{self.name} {self.version}".strip() if self.found else f"{self.name} absent"


@dataclass(frozen=True)
class EnvironmentFacts:
    """What one partition offers, as detected at ``checked_at`` on ``host``."""

    partition: str
    host: str
    checked_at: float
    #: Whether ``srun --help`` lists pyxis's ``--container-image`` (None: not asked; the
    #: local scheduler has no srun).
    pyxis: bool | None
    tools: tuple[Tool, ...]
    #: ``function`` (the batch shell has it), the init file that defines it, or "" (none).
    module: str = ""
    module_version: str = ""
    gpus: tuple[str, ...] = ()
    mqueue: bool = True
    nofile: str = ""  # ``ulimit -Hn``: a number or "unlimited"
    nproc: str = ""  # ``ulimit -Hu``

    def tool(self, name: str) -> Tool:
        return next((t for t in self.tools if t.name == name), Tool(name))

    def has(self, runtime: str) -> bool | None:
        """Whether ``runtime`` was found here (None: pyxis where it was not asked)."""
        if runtime == "pyxis":
            return self.pyxis
        return self.tool(runtime).found

    @property
    def found_runtimes(self) -> tuple[str, ...]:
        return tuple(r for r in RUNTIMES if self.has(r))

    def summary(self) -> str:
        """Every fact in a line: ``apptainer absent, podman 4.3.1, ...; no module``."""
        parts = [t.text() for t in self.tools]
        if self.pyxis is not None:
            parts.append("pyxis" if self.pyxis else "no pyxis")
        if self.module:
            parts.append(f"module {self.module_version}".strip())
        else:
            parts.append("no module command")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> EnvironmentFacts:
        """Raises ValueError (or TypeError, KeyError) on a record that is not one."""
        tools = tuple(Tool(str(t["name"]), str(t["path"]), str(t["version"])) for t in doc["tools"])
        pyxis = doc["pyxis"]
        if pyxis is not None and not isinstance(pyxis, bool):
            raise ValueError(f"pyxis: {pyxis!r}")
        return cls(
            partition=str(doc["partition"]),
            host=str(doc["host"]),
            checked_at=float(doc["checked_at"]),
            pyxis=pyxis,
            tools=tools,
            module=str(doc["module"]),
            module_version=str(doc["module_version"]),
            gpus=tuple(str(g) for g in doc["gpus"]),
            mqueue=bool(doc["mqueue"]),
            nofile=str(doc["nofile"]),
            nproc=str(doc["nproc"]),
        )


def facts_from_probe(
    probe: Mapping[str, Sequence[str]], *, partition: str, pyxis: bool | None, checked_at: float
) -> EnvironmentFacts:
    """The facts of a parsed probe answer (:func:`parse_probe`)."""

    def one(key: str) -> str:
        values = probe.get(key) or [""]
        return values[0]

    tools = tuple(
        Tool(name, one(name), version_of(one(f"{name}.version")) if one(name) else "")
        for name in TOOLS
    )
    module = one("module")
    return EnvironmentFacts(
        partition=partition,
        host=one("host"),
        checked_at=checked_at,
        pyxis=pyxis,
        tools=tools,
        module=module,
        module_version=version_of(one("module.version")) if module else "",
        gpus=tuple(g for g in probe.get("gpu", []) if g),
        mqueue=one("mqueue") != "no",
        nofile=one("nofile"),
        nproc=one("nproc"),
    )


def age_text(seconds: float) -> str:
    """``40 s``, ``5 min``, ``3 h``: how long ago something was detected."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


# -- what is remembered ----------------------------------------------------------------------


@dataclass(frozen=True)
class DetectKey:
    """What a detection is valid for: one partition of one cluster, as one profile sees it."""

    profile: str
    where: str  # the facade's location: "local scheduler", "Slurm on this host", "user@host"
    partition: str  # "" on Slurm: the default partition

    def text(self) -> str:
        return json.dumps([self.profile, self.where, self.partition])

    def described(self) -> dict[str, Any]:
        return {"profile": self.profile, "where": self.where, "partition": self.partition}


class DetectCache(ProbeCache[DetectKey]):
    """Detected environments (and probes still queued), by :class:`DetectKey`."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path if path is not None else state_path(DETECT_FILE))

    def get(self, key: DetectKey, *, now: float | None = None) -> EnvironmentFacts | None:
        """What was detected for ``key`` within :data:`VALID_SEC`, else None."""
        doc = self.entry(key).get("facts")
        if not isinstance(doc, dict):
            return None
        try:
            facts = EnvironmentFacts.from_dict(doc)
        except (KeyError, TypeError, ValueError):
            return None  # damaged: not detected
        at = time.time() if now is None else now
        return facts if 0 <= at - facts.checked_at <= VALID_SEC else None

    def put(self, key: DetectKey, facts: EnvironmentFacts) -> None:
        self.put_entry(key, {"facts": facts.to_dict()})


# -- detecting -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Detection:
    """What a detection gave: the facts, or the probe still queued (``pending_job``), or
    why it could not tell (``problem``)."""

    partition: str
    facts: EnvironmentFacts | None = None
    pending_job: str = ""
    problem: str = ""

    def note(self) -> str:
        """In words, when there are no facts: why not."""
        where = _partition_text(self.partition)
        if self.pending_job:
            return (
                f"the environment of {where} is not detected yet: its probe (job "
                f"{self.pending_job}) is still queued; a later plan reads its answer"
            )
        if self.problem:
            return f"the environment of {where} could not be detected: {self.problem}"
        return f"the environment of {where} is not detected"


def _partition_text(partition: str) -> str:
    return f"partition {partition}" if partition else "the default partition"


def render_probe() -> str:
    """The probe's script (it takes no values: every answer comes from the node)."""
    from ddp_tui.sbatch_templates import probes

    return probes.render_detect_probe()


class EnvDetector:
    """Detects, and remembers, what the partitions of one cluster offer."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        *,
        runs_root: str,
        profile: Profile,
        where: str,
        cache: DetectCache | None = None,
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.runs_root = runs_root
        self.profile = profile
        self.where = where
        self.cache = cache if cache is not None else DetectCache()

    def key(self, partition: str) -> DetectKey:
        return DetectKey(self.profile.name, self.where, partition)

    def cached(self, partition: str) -> EnvironmentFacts | None:
        """What is remembered for ``partition`` (no command runs)."""
        return self.cache.get(self.key(partition))

    def forget(self, partition: str) -> None:
        self.cache.forget(self.key(partition))

    def detect(
        self, partition: str, *, recheck: bool = False, wait_sec: float = DETECT_WAIT_SEC
    ) -> Detection:
        """The facts of ``partition``: remembered ones, else a probe's (sent, or the queued
        one's file read), waiting at most ``wait_sec`` for its answer. ``recheck`` forgets
        what is remembered first."""
        key = self.key(partition)
        if recheck:
            self.cache.forget(key)
        elif (facts := self.cache.get(key)) is not None:
            return Detection(partition, facts)
        try:
            if self.scheduler.name != "slurm":
                facts = self._probe_here(partition)
            else:
                return self._probe_job(key, wait_sec)
        except (ExecutorError, SchedulerError, OSError) as exc:
            return Detection(partition, problem=" ".join(str(exc).split()))
        self.cache.put(key, facts)
        return Detection(partition, facts)

    # -- the local scheduler: the probe runs here

    def _probe_here(self, partition: str) -> EnvironmentFacts:
        from ddp_tui.remote.backends.local.directives import exported_environment

        # What a local job started with --export=NONE gets: a `module` function exported
        # by the app's shell would otherwise be found here and be missing in the job.
        kept = exported_environment({"export": "NONE"}, os.environ)
        env = [f"{name}={value}" for name, value in sorted(kept.items())]
        argv = ["env", "-i", *env, "bash", "--noprofile", "--norc", "-c", render_probe()]
        res = self.executor.run(argv, timeout=60.0)
        probe = parse_probe(res.stdout)
        if probe is None:
            raise ExecutorError(
                f"the probe ended (exit {res.returncode}) without an answer: "
                f"{_last_line(res.stderr or res.stdout)}"
            )
        return facts_from_probe(probe, partition=partition, pyxis=None, checked_at=time.time())

    # -- Slurm: a tiny job per partition, and srun's help on the login node

    def _probe_job(self, key: DetectKey, wait_sec: float) -> Detection:
        probe = self.cache.pending(key)
        if probe is None:
            probe = self._submit_probe(key.partition)
            self.cache.put_pending(key, probe)
        awaited = await_answer(
            self.executor,
            self.scheduler,
            probe.job_id,
            probe.out_path,
            complete=lambda text: parse_probe(text) is not None,
            wait_sec=wait_sec,
        )
        return self._answered(key, probe, awaited)

    def _answered(self, key: DetectKey, probe: PendingProbe, awaited: Awaited) -> Detection:
        partition = key.partition
        if awaited.text is not None:
            answer = parse_probe(awaited.text)
            assert answer is not None  # (await_answer returns only complete answers)
            facts = facts_from_probe(
                answer, partition=partition, pyxis=self._pyxis(), checked_at=time.time()
            )
            self.cache.put(key, facts)
            return Detection(partition, facts)
        if awaited.ended:
            self.cache.forget(key)  # the next detection sends a new probe
            err = read_text(self.executor, probe.out_path.removesuffix(".out") + ".err")
            why = _last_line(err or "") or _last_line(awaited.partial) or "no output"
            return Detection(
                partition,
                problem=f"the probe (job {probe.job_id}) ended {awaited.state} without an "
                f"answer: {why}",
            )
        return Detection(partition, pending_job=probe.job_id)

    def _submit_probe(self, partition: str) -> PendingProbe:
        from ddp_tui.remote.backends.slurm.commands import tool_prefix
        from ddp_tui.remote.backends.slurm.parsers import parse_sbatch

        where = f"{self.runs_root.rstrip('/')}/{DETECT_SUBDIR}"
        self.executor.makedirs(where)
        script = f"{where}/probe.sh"
        self.executor.write_atomic(script, render_probe().encode(), mode=0o755)
        argv = [
            *tool_prefix("sbatch"),
            "--parsable",
            "--export=NONE",
            "--job-name=ddp-tui-detect",
            "-N1",
            "-n1",
            "-c1",
            "--mem=100M",
            "--time=00:01:00",
            f"--chdir={where}",
            f"--output={where}/%j.out",
            f"--error={where}/%j.err",
        ]
        if partition:
            argv.append(f"--partition={partition}")
        for option, value in (("account", self.profile.account), ("qos", self.profile.qos)):
            if value:  # a site may refuse a job without them
                argv.append(f"--{option}={value}")
        res = self.executor.run([*argv, "--", script], timeout=60.0)
        if not res.ok:
            raise SchedulerError(
                f"sbatch refused the probe: {_last_line(res.stderr or res.stdout)}",
                argv=argv,
                returncode=res.returncode,
            )
        job_id = parse_sbatch(res.stdout)[0]
        return PendingProbe(job_id, f"{where}/{job_id}.out", time.time())

    def _pyxis(self) -> bool | None:
        """Whether srun lists pyxis's options (None: srun did not answer)."""
        try:
            res = self.executor.run(["srun", "--help"], timeout=30.0)
        except ExecutorError:
            return None
        if not res.ok and not res.stdout:
            return None
        return "--container-image" in res.stdout


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


# -- what the facts mean for a spec ----------------------------------------------------------


@dataclass
class FactsVerdict:
    """The errors (a runtime or ``module`` detected absent) and notes (not detected) of a
    spec against a detection."""

    errors: list[FieldError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def wanted_runtime(spec: ExperimentSpec) -> str:
    """The container runtime the spec's job needs ("" for none)."""
    return spec.container_runtime if spec.environment == "container" else ""


def needs_module_command(spec: ExperimentSpec) -> bool:
    return bool(spec.modules)


def needs_detection(spec: ExperimentSpec) -> bool:
    """Whether the spec's job depends on what detection finds."""
    return bool(wanted_runtime(spec)) or needs_module_command(spec)


def judge(spec: ExperimentSpec, detection: Detection, *, now: float | None = None) -> FactsVerdict:
    """A runtime (or the ``module`` command) the spec needs that was detected absent on its
    partition is an error naming what was found, when, and the fix; an undetected one only
    a note."""
    verdict = FactsVerdict()
    runtime = wanted_runtime(spec)
    facts = detection.facts
    if not (runtime or needs_module_command(spec)):
        return verdict
    if facts is None:
        verdict.notes.append(detection.note())
        return verdict
    at = time.time() if now is None else now
    seen = (
        f"detected {age_text(at - facts.checked_at)} ago on {facts.host or 'a node'}: "
        f"{facts.summary()}"
    )
    where = _partition_text(detection.partition)
    if runtime and facts.has(runtime) is False:
        others = [r for r in facts.found_runtimes if r != runtime]
        fix = f"use container_runtime {' or '.join(others)}, or " if others else ""
        verdict.errors.append(
            FieldError(
                "container_runtime",
                f"{runtime}: not found on {where} ({seen}); {fix}--recheck-environment "
                "if it was installed since",
            )
        )
    if needs_module_command(spec) and not facts.module:
        verdict.errors.append(
            FieldError(
                "modules",
                f"no 'module' command on {where} ({seen}): neither the batch shell nor a known "
                "init file (/etc/profile.d/lmod.sh, /etc/profile.d/modules.sh, ...) defines "
                "it; use env_setup to make it available, or --recheck-environment",
            )
        )
    return verdict
