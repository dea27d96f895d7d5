"""The environment check: a one-node job that imports torch inside the spec's environment.

The Python check (:mod:`.prequeue`) runs the job's python on the login node, which answers
for ``python`` as given and for a venv or conda env seen from there. It cannot answer for a
module list (loaded on the node, after ``module purge``), for a container (the interpreter
is inside the image, and the runtime may be on the compute nodes only), or for a venv or
conda env on Slurm, whose job starts from a clean environment (``--export=NONE``) on another
machine. So, for those, the plan sends one small job (``sbatch_templates/env_check.sbatch.j2``:
one node, one task, five minutes, the spec's partition, account, QOS, constraint and one
GPU of its type with device cuda) that activates the environment as the job will and prints
one JSON line: the Python, torch and its CUDA, whether CUDA is available and how many GPUs
(their names), NCCL's version, whether gloo and NCCL are built in, the venv or conda prefix,
the modules loaded, and whether torchvision is there.

A check that passed is remembered in ``$XDG_STATE_HOME/ddp-tui/env-checks.json``, keyed by
everything that makes the environment (profile, where, environment, python, env_setup,
modules, container runtime, image and mounts, partition, GPU type, device); failures never
are. A plan waits for the answer at most the profile's ``env_check_wait_sec``: a check
still queued then is a warning, not a refusal (the job is remembered, and a later plan reads
its answer). The Python check's overrides apply: the profile's ``check_python = false``
(``--skip-python-check``), and Compose's skip box (remembered for the same python).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.submit.env_detect import Detection, EnvDetector, judge, needs_detection
from ddp_tui.remote.submit.prequeue import CHECK_FAILED, PythonCheckCache, PythonKey
from ddp_tui.remote.submit.probe_jobs import (
    Awaited,
    PendingProbe,
    ProbeCache,
    await_answer,
    read_text,
)
from ddp_tui.remote.submit.state_file import state_path
from ddp_tui.spec import ExperimentSpec, FieldError
from ddp_tui.spec.gpu_types import normalise, split_gpu_type

if TYPE_CHECKING:
    from ddp_tui.config import Profile

#: The file of environment checks that passed, in ddp-tui's state directory.
CHECK_FILE = "env-checks.json"
#: Where each check's job script and logs go, under the runs root (never listed as runs).
CHECK_SUBDIR = ".ddp-tui/env-checks"
#: Starts the job's JSON line; the job's last line is ``<MARK>-exit STATUS``.
MARK = "ddp-tui-envcheck"
EXIT_MARK = f"{MARK}-exit"
#: The ends of a check job that are its environment's doing (the activation exited non-zero,
#: ran out of memory, or the script ended without its last line); any other end (cancelled,
#: preempted, a node lost, a time limit) says nothing of the environment.
FAILED_STATES = frozenset({"FAILED", "COMPLETED", "OUT_OF_MEMORY"})
#: The environments the login node cannot answer for, whatever the scheduler.
ON_THE_NODE = ("modules", "container")
#: The environments a Slurm job activates from a clean environment on a compute node.
ACTIVATED = ("venv", "conda")
#: The fields of a spec whose own errors make checking its environment pointless.
ENVIRONMENT_FIELDS = frozenset(
    {"environment", "python", "env_setup", "modules", "container_runtime", "container_image",
     "container_mounts", "partition", "gpu_type", "device", "account", "qos", "constraint"}
)  # fmt: skip

#: What the job's python runs: everything the check reports, as one JSON line after the
#: mark. torch is imported (the job will import it), torchvision only found.
CHECK_CODE = """\
import importlib.util, json, os, socket, sys
out = {"python": sys.version.split()[0], "executable": sys.executable,
       "host": socket.gethostname(),
       "virtual_env": os.environ.get("VIRTUAL_ENV", ""),
       "conda_prefix": os.environ.get("CONDA_PREFIX", ""),
       "modules": [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m],
       "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
       "torchvision": importlib.util.find_spec("torchvision") is not None}
try:
    with open("/proc/1/comm") as fh:
        out["pid1"] = fh.read().strip()
except OSError:
    out["pid1"] = ""
try:
    import torch
except BaseException as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
    print(MARK, json.dumps(out), flush=True)
    sys.exit(3)
import torch.distributed as dist
cuda = torch.cuda.is_available()
count = torch.cuda.device_count() if cuda else 0
nccl = None
if cuda:
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        nccl = "unknown (%s)" % exc
out.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=cuda,
           device_count=count, nccl=nccl,
           gloo=dist.is_available() and dist.is_gloo_available(),
           nccl_available=dist.is_available() and dist.is_nccl_available(),
           gpus=[torch.cuda.get_device_name(i) for i in range(count)])
print(MARK, json.dumps(out), flush=True)
""".replace("MARK", repr(MARK))


def needs_env_check(spec: ExperimentSpec, scheduler: str) -> bool:
    """Whether a plan of ``spec`` sends the environment check (see the module's doc)."""
    return spec.environment in ON_THE_NODE or (
        scheduler == "slurm" and spec.environment in ACTIVATED
    )


def evidence_field(spec: ExperimentSpec) -> str:
    """The field a failed check names: what the user changes to fix it."""
    if spec.environment == "container":
        return "container_image"
    if spec.environment == "modules":
        return "modules"
    return "python"


# -- what is remembered ----------------------------------------------------------------------


@dataclass(frozen=True)
class EnvCheckKey:
    """What a check is valid for: the same environment, in the same place, on the same kind
    of node."""

    values: tuple[Any, ...]

    @classmethod
    def of(cls, profile_name: str, where: str, spec: ExperimentSpec) -> EnvCheckKey:
        s = spec
        return cls(
            (profile_name, where, s.environment, s.python, list(s.env_setup), list(s.modules),
             s.container_runtime, s.container_image, list(s.container_mounts), s.partition,
             s.gpu_type, s.device)
        )  # fmt: skip

    def text(self) -> str:
        return json.dumps(list(self.values))

    def described(self) -> dict[str, Any]:
        return {"key": list(self.values)}


@dataclass(frozen=True)
class EnvRecord:
    """A check that passed: the job's report, and when."""

    report: dict[str, Any]
    checked_at: float


class EnvCheckCache(ProbeCache[EnvCheckKey]):
    """Checks that passed (and checks still queued), by :class:`EnvCheckKey`."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path if path is not None else state_path(CHECK_FILE))

    def get(self, key: EnvCheckKey) -> EnvRecord | None:
        entry = self.entry(key)
        report, at = entry.get("report"), entry.get("checked_at")
        if not isinstance(report, dict) or not isinstance(at, int | float):
            return None
        return EnvRecord(report, float(at))

    def put(self, key: EnvCheckKey, report: dict[str, Any]) -> None:
        self.put_entry(key, {"report": report, "checked_at": time.time()})


# -- reading the job's answer ----------------------------------------------------------------


@dataclass(frozen=True)
class EnvAnswer:
    """The job's answer: its report (None when the python printed none), the python's exit
    status, and its last words on stderr (the evidence of a failure)."""

    report: dict[str, Any] | None
    status: int
    stderr: str = ""


def answered(text: str) -> bool:
    """Whether the job's output holds its last line."""
    return any(line.startswith(EXIT_MARK) for line in text.splitlines())


def parse_answer(out: str, err: str = "") -> EnvAnswer | None:
    """The answer in the job's output ``out`` (and its stderr ``err``); None before the
    job's last line."""
    status: int | None = None
    report: dict[str, Any] | None = None
    for line in out.splitlines():
        head, _, rest = line.partition(" ")
        if head == EXIT_MARK:
            status = int(rest) if rest.strip().isdigit() else 1
        elif head == MARK:
            try:
                doc = json.loads(rest)
            except ValueError:
                continue
            report = doc if isinstance(doc, dict) else None
    if status is None:
        return None
    return EnvAnswer(report, status, _last_line(err))


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


@dataclass
class Verdict:
    """Errors that refuse the plan, and warnings that do not."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _inside(spec: ExperimentSpec) -> str:
    """Where the python ran, in words: ``inside IMAGE (podman)``, ``with modules a b``."""
    s = spec
    if s.environment == "container":
        return f" inside {s.container_image} ({s.container_runtime})"
    if s.environment == "modules":
        return f" with modules {' '.join(s.modules)}"
    if s.environment in ACTIVATED:
        return f" in its {s.environment}"
    return ""


def _failed(spec: ExperimentSpec, what: str) -> FieldError:
    return FieldError(
        evidence_field(spec),
        f"{what}. {CHECK_FAILED} (the environment check ran it); fix it, or skip this check "
        "if you know better (--skip-python-check, the profile's check_python = false, or "
        "Compose's skip box)",
    )


def judge_answer(spec: ExperimentSpec, answer: EnvAnswer, job_id: str) -> Verdict:
    """What the answer means for ``spec``: a python that cannot import torch (or lacks
    what the spec needs: CUDA, the backend, torchvision) is refused with the job's own
    words; a mismatch that may be right (no GPU seen) is a warning."""
    verdict = Verdict()
    report = answer.report or {}
    host = report.get("host") or "the node"
    where = f"{spec.python}{_inside(spec)} on {host} (environment check, job {job_id})"
    if answer.report is None or "error" in report or answer.status != 0:
        why = report.get("error") or answer.stderr or f"exit {answer.status}"
        if answer.status == 127 and not answer.report:
            verdict.errors.append(_failed(spec, f"{where}: not found: {why}"))
        else:
            verdict.errors.append(_failed(spec, f"{where} cannot import torch: {why}"))
        return verdict
    torch = f"torch {report.get('torch', '?')}"
    if spec.device == "cuda" and not report.get("torch_cuda"):
        verdict.errors.append(_failed(spec, f"{torch} in {where} has no CUDA"))
    elif spec.device == "cuda" and not report.get("device_count"):
        verdict.warnings.append(
            f"device cuda, but the environment check saw no GPU with {torch} in {where}"
            + (" (no --nv?)" if spec.container_runtime in ("apptainer", "singularity") else "")
        )
    if spec.backend == "nccl" and report.get("nccl_available") is False:
        verdict.errors.append(_failed(spec, f"{torch} in {where} is built without NCCL"))
    if spec.backend == "gloo" and report.get("gloo") is False:
        verdict.errors.append(_failed(spec, f"{torch} in {where} is built without gloo"))
    if spec.entry != "script" and report.get("torchvision") is False:
        verdict.errors.append(_failed(spec, f"{where} cannot import torchvision"))
    gpus = [str(g) for g in report.get("gpus") or []]
    if spec.gpu_type and gpus and not any(_same_kind(spec.gpu_type, g) for g in gpus):
        verdict.warnings.append(
            f"gpu_type {spec.gpu_type}, but the environment check saw {', '.join(gpus)}"
        )
    return verdict


def _same_kind(asked: str, name: str) -> bool:
    """Whether a GPU named ``name`` (``NVIDIA H100 80GB HBM3``) is of the kind ``gpu_type``
    asks for (``h100``, ``feature:gpu_a100``): its model by the GPU types' table, else the
    type's first word."""
    raw = next(part for part in split_gpu_type(asked) if part)
    kind = normalise(raw, "gres")
    model = kind.model if kind is not None and kind.known else raw.replace("_", " ").split()[0]
    return model.lower() in name.lower()


# -- the check -------------------------------------------------------------------------------


@dataclass
class EnvOutcome:
    """What the environment checks of one plan found: errors, warnings, and the report
    (None where no check answered)."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None


class EnvPreflight:
    """Sends, waits for, judges and remembers the environment check of one cluster."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        *,
        runs_root: str,
        profile: Profile,
        where: str,
        cache: EnvCheckCache | None = None,
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.runs_root = runs_root
        self.profile = profile
        self.where = where
        self.cache = cache if cache is not None else EnvCheckCache()

    def key(self, spec: ExperimentSpec) -> EnvCheckKey:
        return EnvCheckKey.of(self.profile.name, self.where, spec)

    def overridden(self, spec: ExperimentSpec) -> bool:
        """The Python check's overrides: the profile's, or Compose's remembered skip box."""
        if not self.profile.check_python:
            return True
        record = PythonCheckCache().get(PythonKey.of(self.profile.name, self.where, spec))
        return record is not None and record.overridden

    def forget(self, spec: ExperimentSpec) -> None:
        self.cache.forget(self.key(spec))

    def check(
        self,
        spec: ExperimentSpec,
        *,
        wait_sec: float | None = None,
        recheck: bool = False,
        send: bool = True,
    ) -> EnvOutcome:
        """The check of ``spec``'s environment: remembered, else the answer of the job an
        earlier plan sent (read once: that plan waited already), else a new job's, waited
        for at most ``wait_sec`` (default: the profile's). ``send`` False sends none."""
        wait = self.profile.env_check_wait_sec if wait_sec is None else wait_sec
        key = self.key(spec)
        if recheck:
            self.cache.forget(key)
        elif (record := self.cache.get(key)) is not None:
            verdict = judge_answer(spec, EnvAnswer(record.report, 0), "remembered")
            return EnvOutcome(verdict.errors, verdict.warnings, record.report)
        job = self.cache.pending(key)
        if job is not None:
            wait = 0.0
        elif not send:
            return EnvOutcome()
        else:
            try:
                job = self._submit(spec)
            except (SchedulerError, ExecutorError, OSError) as exc:
                return EnvOutcome(
                    warnings=[
                        "the environment check could not be sent, so the environment is "
                        f"unchecked: {' '.join(str(exc).split())}"
                    ]
                )
            self.cache.put_pending(key, job)
        awaited = await_answer(
            self.executor,
            self.scheduler,
            job.job_id,
            job.out_path,
            complete=answered,
            wait_sec=wait,
            # The local scheduler starts it only once the jobs before it end (hours, maybe).
            stop_when_queued=self.scheduler.name == "local",
        )
        return self._outcome(spec, key, job, awaited, wait)

    def _outcome(
        self,
        spec: ExperimentSpec,
        key: EnvCheckKey,
        job: PendingProbe,
        awaited: Awaited,
        waited: float,
    ) -> EnvOutcome:
        err = read_text(self.executor, _err_path(job.out_path)) or ""
        answer = parse_answer(awaited.text, err) if awaited.text is not None else None
        if answer is not None:
            verdict = judge_answer(spec, answer, job.job_id)
            if verdict.errors:
                self.cache.forget(key)  # failures are never remembered
            else:
                assert answer.report is not None  # (no errors: the python reported)
                self.cache.put(key, answer.report)
            return EnvOutcome(verdict.errors, verdict.warnings, answer.report)
        if awaited.ended:
            # The job ended before its python ran: the activation failed (its own message
            # is the last line), or someone else ended it (a scancel, a node lost), which
            # says nothing of the environment.
            self.cache.forget(key)
            why = _last_line(err) or _last_line(awaited.partial) or "no output"
            what = f"the environment check (job {job.job_id}) ended {awaited.state} before "
            what += f"{spec.python}{_inside(spec)} ran: {why}"
            if awaited.state in FAILED_STATES:
                return EnvOutcome([_failed(spec, what)])
            return EnvOutcome(warnings=[f"{what}; the environment is unchecked"])
        return EnvOutcome(
            warnings=[
                f"the environment check (job {job.job_id}) has not answered yet (waited "
                f"{waited:g} s), so this plan is unchecked; a later plan reads its answer "
                "(and remembers it)"
            ]
        )

    def _submit(self, spec: ExperimentSpec) -> PendingProbe:
        from ddp_tui.sbatch_templates.probes import render_env_check

        stamp = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        where = f"{self.runs_root.rstrip('/')}/{CHECK_SUBDIR}/{stamp}"
        script = render_env_check(spec, where, code=CHECK_CODE, exit_mark=EXIT_MARK)
        self.executor.makedirs(where)
        path = f"{where}/job.sbatch"
        self.executor.write_atomic(path, script.encode(), mode=0o755)
        job_id = self.scheduler.submit(path, where)
        return PendingProbe(job_id, f"{where}/slurm-{job_id}.out", time.time())


def _err_path(out_path: str) -> str:
    return out_path.removesuffix(".out") + ".err"


# -- a plan's environment checks: detection, then the check job ------------------------------


def environment_checks(
    detector: EnvDetector,
    preflight: EnvPreflight,
    spec: ExperimentSpec,
    *,
    known: Sequence[FieldError] = (),
    send: bool = True,
) -> EnvOutcome:
    """Everything a plan of ``spec`` learns about its environment before it queues.

    Detection first, without waiting: a runtime (or ``module``) detected absent refuses the
    plan at once, and no check job is sent. Then the check job, waiting its bound; a probe
    sent by this plan is read again after it (it had the check's wait to answer). A spec
    whose own environment fields are wrong sends nothing, and nor does one with ``send``
    False (a dry run); what is remembered still counts.
    """
    outcome = EnvOutcome()
    sending = send and not {e.field for e in known} & ENVIRONMENT_FIELDS
    partition = spec.partition
    detection = None
    if needs_detection(spec):
        if sending:
            detection = detector.detect(partition, wait_sec=0)
        else:
            facts = detector.cached(partition)
            detection = None if facts is None else Detection(partition, facts)
        if detection is not None:
            verdict = judge(spec, detection)
            if verdict.errors:
                outcome.errors += verdict.errors
                return outcome
    wanted = needs_env_check(spec, detector.scheduler.name) and not preflight.overridden(spec)
    if wanted:
        checked = preflight.check(spec, send=sending)
        outcome.errors += checked.errors
        outcome.warnings += checked.warnings
        outcome.report = checked.report
    if detection is not None and detection.facts is None and detection.pending_job:
        detection = detector.detect(partition, wait_sec=0)
    if detection is not None:
        verdict = judge(spec, detection)
        outcome.errors[:0] = verdict.errors
        if outcome.report is None:  # a check that answered says more than "not detected"
            outcome.warnings += verdict.notes
    return outcome
