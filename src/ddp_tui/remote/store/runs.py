"""Run directories: create them atomically, list them cheaply, read what they hold.

Everything goes through an :class:`Executor`, so the same code serves the login node
and a laptop over SSH. The layout is the contract in docs/architecture.md ("The run directory").
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ddp_tui
from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import (
    Batch,
    CommandResult,
    Executor,
    ExecutorError,
    FileRead,
    ReadResult,
    walk_files,
)
from ddp_tui.remote.store.journal import JOBS_FILE, Journal, fold, parse_lines
from ddp_tui.remote.store.run_damage import (
    RUN_DIRECTORY,
    Damage,
    check_run_json,
    check_usage_json,
    load_object,
    read_problem,
    spec_json_of,
    usage_json_of,
)
from ddp_tui.remote.store.snapshot import SnapshotManifest
from ddp_tui.remote.store.space import MARGIN_BYTES, require_room
from ddp_tui.remote.store.tail import IncrementalFile, MetricsRow, parse_metrics_csv
from ddp_tui.spec.vocabulary import MAX_NODES

SPEC_FILE = "spec.json"
SCRIPT_FILE = "job.sbatch"
#: An adopted run's job's own batch script, as the scheduler kept it; its ``job.sbatch`` runs
#: it again (:mod:`ddp_tui.remote.runs.adoption`).
ORIGINAL_SCRIPT_FILE = "original.sbatch"
RUN_JSON = "run.json"
METRICS_FILE = "metrics.csv"
PROGRESS_FILE = "progress.jsonl"
PREFLIGHT_FILE = "preflight.json"
SACCT_FILE = "sacct.txt"
#: What the latest ended attempt used (:mod:`ddp_tui.remote.runs.reactions.usage`).
USAGE_FILE = "usage.json"


def attempt_logs(job_id: str) -> tuple[str, str]:
    """The ``.out`` and ``.err`` of one attempt, as named in the run directory."""
    return f"slurm-{job_id}.out", f"slurm-{job_id}.err"


CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_FILE = f"{CHECKPOINTS_DIR}/latest.pt"
CODE_DIR = "code"
#: The user's project, snapshotted at submit (see :mod:`ddp_tui.remote.store.snapshot`).
PROJECT_DIR = "project"
SNAPSHOT_FILE = "snapshot.json"
#: One line per rank and attempt, written by the script wrapper (ddp_tui.scriptrun).
RANKS_FILE = "ranks.jsonl"
#: The reporting helper, also copied to the top of ``code/`` so a user's script does
#: ``from ddp_tui_report import report_epoch`` (``PYTHONPATH`` starts with ``code``).
REPORT_MODULE = "ddp_tui_report.py"

#: "<UTC yyyymmdd-HHMMSS>-<name>-<4 hex>"
RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_.-]+-[0-9a-f]{4}$")
#: ``.<run id>.tmp``: a run directory being made (see :meth:`RunStore.create_run`).
_HALF_MADE_RE = re.compile(r"^\.\d{8}-\d{6}-[A-Za-z0-9_.-]+-[0-9a-f]{4}\.tmp$")
#: A half-made run directory untouched this long belongs to a create that died.
HALF_MADE_SEC = 6 * 3600.0
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_MAX = 64


class RunStoreError(DdpTuiError):
    """A run directory could not be created or read."""

    title = "Run directory"


class RunExists(RunStoreError):
    """The run directory of an allocated run id exists already (its plan was submitted)."""


def sanitize_name(name: str) -> str:
    """``name`` reduced to ``[A-Za-z0-9_.-]`` (anything else becomes ``_``), never empty."""
    clean = _NAME_BAD.sub("_", name).strip("._-")[:_NAME_MAX].strip("._-")
    return clean or "run"


def new_run_id(name: str, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{sanitize_name(name)}-{secrets.token_hex(2)}"


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _join(*parts: str) -> str:
    # Paths are for the target machine (POSIX); never os.path on a Windows laptop.
    return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts))


@dataclass(frozen=True)
class RunRef:
    """Where one run lives."""

    run_id: str
    path: str

    def file(self, name: str) -> str:
        return _join(self.path, name)


@dataclass(frozen=True)
class RunInfo:
    """A run as ``list_runs`` sees it: its ``spec.json``, its submission attempts, and the
    recorded end of each attempt whose end is known (see :mod:`ddp_tui.remote.store.history`)."""

    ref: RunRef
    spec_json: Mapping[str, Any]
    jobs: tuple[Mapping[str, Any], ...]
    ends: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Whether ``jobs.jsonl`` holds a submit's intent that no attempt line answers yet: a
    #: submitter died, or is still at it (:mod:`ddp_tui.remote.store.run_jobs`).
    unanswered_intent: bool = False
    #: What is wrong with the run directory as listed (its spec.json, its jobs.jsonl, its
    #: usage.json, the directory itself): a damaged run is still listed, and shows as DAMAGED.
    damage: tuple[Damage, ...] = ()
    #: ``usage.json``'s record without its wrong fields: what an ended attempt (its
    #: ``job_id``) used of what it held; None where there is none (yet).
    usage: Mapping[str, Any] | None = None

    @property
    def run_id(self) -> str:
        return self.ref.run_id

    @property
    def spec(self) -> Mapping[str, Any]:
        spec = self.spec_json.get("spec")
        return spec if isinstance(spec, Mapping) else {}

    @property
    def group(self) -> str | None:
        group = self.spec_json.get("group")
        return group if isinstance(group, str) else None

    @property
    def sweep(self) -> str | None:
        """The sweep the run was submitted in (None: submitted alone, or made before runs
        said so)."""
        sweep = self.spec_json.get("sweep")
        return sweep if isinstance(sweep, str) and sweep else None

    @property
    def created_at(self) -> str:
        return str(self.spec_json.get("created_at", ""))

    @property
    def kind(self) -> str:
        """``"train"``, ``"preflight"``, or ``"adopted"`` (a job ddp-tui did not submit,
        brought in: :mod:`ddp_tui.remote.runs.adoption`). Runs made before spec.json said so
        are told apart by the name :meth:`Cluster.preflight` gives them (and no comparison
        group)."""
        kind = self.spec_json.get("kind")
        if isinstance(kind, str):
            return kind
        named = str(self.spec.get("name", "")).endswith("-preflight")
        return "preflight" if named and self.group is None else "train"

    @property
    def latest_job(self) -> Mapping[str, Any] | None:
        return self.jobs[-1] if self.jobs else None


@dataclass(frozen=True)
class Upload:
    """What :meth:`RunStore.create_run` sent: ``code/`` and ``project/`` together."""

    code_files: int
    project_files: int
    #: Bytes sent (over SSH: the tar stream, headers included).
    bytes: int
    seconds: float


@dataclass
class _Cached:
    spec_json: dict[str, Any]
    jobs_reader: IncrementalFile
    jobs: list[dict[str, Any]]
    generation: int
    info: RunInfo | None = None  # rebuilt only when jobs change
    #: What is wrong with the directory or its spec.json (read again at every listing,
    #: so that a run put right joins the table as it is).
    damage: tuple[Damage, ...] = ()
    #: What is wrong with jobs.jsonl: the file itself, then its lines, by line number.
    jobs_problem: str | None = None
    line_problems: list[Damage] = field(default_factory=list)
    lines_read: int = 0
    #: usage.json as last read or written, and what is wrong with it.
    usage: dict[str, Any] | None = None
    usage_damage: tuple[Damage, ...] = ()
    #: The job whose usage record a listing reads usage.json again for, until it is there
    #: (:meth:`RunStore.await_usage`); None: the file is read once, with the run.
    usage_awaited: str | None = None


def package_dir() -> Path:
    """The installed ``ddp_tui`` package, whose trainer each run snapshots."""
    return Path(ddp_tui.__file__).resolve().parent


class RunStore:
    """The run directories under ``root`` on the executor's machine."""

    def __init__(self, executor: Executor, root: str, *, code_source: Path | None = None) -> None:
        self.executor = executor
        self.root = root.rstrip("/") or "/"
        #: The ``ddp_tui`` package directory to snapshot (its __init__.py and trainer/).
        self.code_source = code_source or package_dir()
        self._cache: dict[str, _Cached] = {}
        #: What the last successful :meth:`create_run` uploaded (for "uploaded in 0.4 s").
        self.last_upload: Upload | None = None
        #: Run directories listed but not read yet (see ``max_new`` of :meth:`apply_listing`).
        self.unread = 0
        #: The runs whose usage.json the last :meth:`listing_reads` reads, in its order.
        self._usage_reads: list[str] = []

    # -- paths --------------------------------------------------------------

    def ref(self, run_id: str) -> RunRef:
        if not RUN_ID_RE.match(run_id):
            raise RunStoreError(f"not a run id: {run_id!r}")
        return RunRef(run_id, _join(self.root, run_id))

    # -- create -------------------------------------------------------------

    def create_run(
        self,
        spec_dict: Mapping[str, Any],
        name: str,
        script_text: str | Callable[[str], str],
        group: str | None = None,
        *,
        kind: str = "train",
        run_id: str | None = None,
        snapshot: SnapshotManifest | None = None,
        sweep: str | None = None,
        extra: Mapping[str, Any] | None = None,
        fill: Callable[[str], None] | None = None,
        code: bool = True,
    ) -> RunRef:
        """Create a complete run directory, or nothing at all.

        Everything is built under ``.<run_id>.tmp`` next to the final name and renamed
        into place; on any failure the temporary directory is removed and the error
        re-raised. ``script_text`` may be a function of the final run directory.

        ``run_id`` is one allocated earlier (a submit plan's, whose script already names
        its directory); :class:`RunExists` is raised, and nothing touched, when that
        directory exists. Without it a free id is allocated here.

        ``snapshot``'s files go to ``project/`` and its record to ``snapshot.json``; they
        travel with ``code/`` in one upload (one round trip over SSH), described after
        by :attr:`last_upload`.

        ``extra``: more top-level fields of ``spec.json`` (an adopted run's ``adopted``
        record). ``fill(tmp)`` writes more of the run into the temporary directory before
        it is renamed into place, so that it is part of the all-or-nothing (an adopted
        run's original script, first attempt line and log links). ``code=False``: no
        ``code/`` (a run whose script is not ddp-tui's runs none of it).
        """
        try:
            self.executor.makedirs(self.root)
        except OSError as exc:  # a local root that cannot be made (SFTP's are ExecutorErrors)
            raise RunStoreError(
                f"cannot create the runs root {self.root}: {exc.strerror or exc}"
            ) from exc
        if run_id is not None:
            final = self.ref(run_id).path
            if self.executor.stat(final) is not None:
                raise RunExists(f"the run directory {final} exists already")
        else:
            run_id, final = self._free_run_id(name)
        code_files = self.code_files() if code else []
        code_bytes = sum(_size(p) for p, _ in code_files)
        needed = code_bytes + (snapshot.total_bytes if snapshot else 0) + MARGIN_BYTES
        require_room(self.executor, self.root, needed, what="a new run")
        self._sweep_half_made()
        tmp = _join(self.root, f".{run_id}.tmp")
        try:
            self.executor.makedirs(tmp)
            script = script_text(final) if callable(script_text) else script_text
            doc = {
                "spec": dict(spec_dict),
                "ddp_tui_version": ddp_tui.__version__,
                "created_at": _utc_now(),
                "group": group,
                "sweep": sweep,
                "kind": kind,
                "run_id": run_id,
                **(extra or {}),
            }
            self.executor.write_atomic(
                _join(tmp, SPEC_FILE), (json.dumps(doc, indent=2) + "\n").encode()
            )
            self.executor.write_atomic(_join(tmp, SCRIPT_FILE), script.encode(), mode=0o755)
            self.executor.write_atomic(_join(tmp, JOBS_FILE), b"")
            upload = self._upload(tmp, code_files, snapshot)
            if snapshot is not None:
                if not snapshot.files:  # the job still starts in project/
                    self.executor.makedirs(_join(tmp, PROJECT_DIR))
                record = snapshot.to_json(upload_sec=upload.seconds)
                self.executor.write_atomic(
                    _join(tmp, SNAPSHOT_FILE), (json.dumps(record, indent=2) + "\n").encode()
                )
            if fill is not None:
                fill(tmp)
            self.executor.rename(tmp, final)
        except BaseException as exc:
            self.executor.remove_tree(tmp)
            if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
                # A read-only or full runs root: say where and why, not a traceback.
                raise RunStoreError(
                    f"cannot write a new run under {self.root}: {exc.strerror or exc}; "
                    "nothing was submitted"
                ) from exc
            raise
        self.last_upload = upload
        return RunRef(run_id, final)

    def _sweep_half_made(self, now: float | None = None) -> list[str]:
        """Remove the temporary directories of creates that died (a ``kill -9`` mid-upload
        leaves one, invisible to the listing but holding disk); returns their names. Only
        those untouched for :data:`HALF_MADE_SEC`: a live create of another instance may be
        uploading a large project into its own."""
        now = time.time() if now is None else now
        try:
            names = [n for n in self.executor.listdir(self.root) if _HALF_MADE_RE.match(n)]
        except (OSError, ExecutorError):
            return []
        gone = []
        for name in names:
            st = self.executor.stat(_join(self.root, name))
            if st is not None and now - st.mtime > HALF_MADE_SEC:
                self.executor.remove_tree(_join(self.root, name))
                gone.append(name)
        return gone

    def _free_run_id(self, name: str) -> tuple[str, str]:
        for _ in range(10):
            run_id = new_run_id(name)
            final = _join(self.root, run_id)
            if self.executor.stat(final) is None:
                return run_id, final
        # pragma: no cover - 10 collisions of 16 random bits in one second
        raise RunStoreError(f"could not find a free run id for {name!r}")

    def code_files(self) -> list[tuple[str, str]]:
        """The job-side code every run gets, as (local path, arcname under ``code/``):
        ``ddp_tui/__init__.py``, ``ddp_tui/trainer/``, and where they exist ``ddp_tui/jobfiles.py``,
        the resource sampler ``ddp_tui/telemetry/`` and ``ddp_tui/scriptrun/`` with its
        reporting helper again as ``ddp_tui_report.py``.
        Not the rest of the package: the jobs need neither the app nor its dependencies."""
        src = self.code_source
        init = src / "__init__.py"
        trainer = src / "trainer"
        if not init.is_file() or not trainer.is_dir():
            raise RunStoreError(f"the ddp_tui trainer package is missing under {src}")
        jobfiles = src / "jobfiles.py"  # what the trainer and the script runner both write
        files = [(str(init), "ddp_tui/__init__.py")]
        if jobfiles.is_file():
            files.append((str(jobfiles), "ddp_tui/jobfiles.py"))
        files += [(p, f"ddp_tui/trainer/{arc}") for p, arc in walk_files(trainer)]
        telemetry = src / "telemetry"
        if telemetry.is_dir():
            files += [(p, f"ddp_tui/telemetry/{arc}") for p, arc in walk_files(telemetry)]
        scriptrun = src / "scriptrun"
        if scriptrun.is_dir():
            files += [(p, f"ddp_tui/scriptrun/{arc}") for p, arc in walk_files(scriptrun)]
            report = scriptrun / "report.py"
            if report.is_file():
                files.append((str(report), REPORT_MODULE))
        return files

    def _upload(
        self, run_dir: str, code_files: Sequence[tuple[str, str]], snapshot: SnapshotManifest | None
    ) -> Upload:
        code = [(p, f"{CODE_DIR}/{arc}") for p, arc in code_files]
        project = [(p, f"{PROJECT_DIR}/{arc}") for p, arc in (snapshot.files if snapshot else ())]
        start = time.monotonic()
        if not code and not project:  # nothing to send: not even a round trip
            return Upload(0, 0, 0, 0.0)
        try:
            sent = self.executor.upload_files(code + project, run_dir)
        except FileNotFoundError as exc:
            # A project file went away after its listing: say which, not a traceback.
            raise RunStoreError(
                f"{exc.filename or exc} went away while it was being copied into the run; "
                "submit again"
            ) from exc
        return Upload(len(code), len(project), sent, time.monotonic() - start)

    # -- jobs.jsonl ---------------------------------------------------------

    def journal(self, run: RunRef) -> Journal:
        """The run's ``jobs.jsonl``: every line of it is written there
        (:mod:`ddp_tui.remote.store.journal`)."""
        return Journal(self.executor, run.path)

    def append_job(self, run: RunRef, record: Mapping[str, Any]) -> None:
        """Add one record (a submission attempt, or an attempt's end) to ``jobs.jsonl``
        (:meth:`Journal.append`: one whole line, never glued to a torn one)."""
        self.journal(run).append(record)

    # -- list ---------------------------------------------------------------

    def list_runs(self) -> list[RunInfo]:
        """Every run under ``root``, oldest first.

        One batch (a listing and the new bytes of each known ``jobs.jsonl``, usually
        none), plus one more only when new runs appeared.
        """
        batch = Batch(commands=[self.listing_command()], reads=self.listing_reads())
        res = self.executor.run_batch(batch)
        return self.apply_listing(res.commands[0], res.reads)

    def listing_command(self) -> list[str]:
        """The command that lists the run directories (batched by the facade's refresh)."""
        return ["ls", "-1", "--", self.root]

    def listing_reads(self) -> list[FileRead]:
        """The reads that bring every known run's ``jobs.jsonl`` up to date, then the
        ``usage.json`` of each run awaiting its record (:meth:`await_usage`; a stat where it
        is not there yet) or whose record is damaged (put right, it counts again)."""
        self._usage_reads = [
            n for n, c in self._cache.items() if c.usage_awaited is not None or c.usage_damage
        ]
        return [c.jobs_reader.request() for c in self._cache.values()] + [
            FileRead(_join(self.root, n, USAGE_FILE)) for n in self._usage_reads
        ]

    def apply_listing(
        self, listing: CommandResult, reads: Sequence[ReadResult], *, max_new: int | None = None
    ) -> list[RunInfo]:
        """Runs from the answers to :meth:`listing_command` and :meth:`listing_reads`.

        ``max_new`` reads at most that many new run directories, newest first, and leaves
        the rest (counted in :attr:`unread`) to later calls: with years of history, the
        newest runs are on screen long before the oldest have been read.
        """
        if not listing.ok:
            if self.executor.stat(self.root) is None:
                self._cache.clear()
                return []  # no run yet: the root is made by the first submit
            raise RunStoreError(f"cannot list {self.root}: {listing.stderr.strip()}")
        names = sorted(n for n in listing.stdout.split("\n") if RUN_ID_RE.match(n))
        usage_names, self._usage_reads = self._usage_reads, []
        if usage_names and len(reads) >= len(usage_names):
            tail = len(reads) - len(usage_names)
            for n, res in zip(usage_names, reads[tail:], strict=True):
                if n in self._cache:
                    self._feed_usage(self._cache[n], res)
            reads = reads[:tail]
        again = [
            n
            for n, res in zip(list(self._cache), reads, strict=False)
            if self._feed_jobs(self._cache[n], res)
        ]
        present = set(names)
        for gone in set(self._cache) - present:
            del self._cache[gone]
        damaged = [n for n in names if n in self._cache and self._cache[n].damage]
        again = [n for n in again if n in present and n not in damaged]
        new = [n for n in names if n not in self._cache]
        if max_new is not None and len(new) > max_new:
            new = new[len(new) - max_new :]  # names sort by creation time: newest last
        self.unread = sum(1 for n in names if n not in self._cache) - len(new)
        new += damaged  # always listed, whatever the budget: never a silent disappearance
        if new:
            # spec.json, jobs.jsonl and usage.json of each new run, and a stat of its
            # directory, in one batch.
            k = len(new)
            readers = [IncrementalFile(_join(self.root, n, JOBS_FILE)) for n in new]
            batch = Batch(reads=[FileRead(_join(self.root, n, SPEC_FILE)) for n in new])
            batch.reads += [r.request() for r in readers]
            batch.reads += [FileRead(_join(self.root, n), 0, 0) for n in new]
            batch.reads += [FileRead(_join(self.root, n, USAGE_FILE)) for n in new]
            answers = self.executor.run_batch(batch).reads
            for i, (n, reader) in enumerate(zip(new, readers, strict=True)):
                doc, damage = _listed_spec(answers[i], answers[2 * k + i])
                self._cache[n] = cached = _Cached(doc, reader, [], reader.generation)
                cached.damage = damage
                if not any(d.file == RUN_DIRECTORY for d in damage):
                    self._feed_usage(cached, answers[3 * k + i])
                if self._feed_jobs(cached, answers[k + i]):
                    again.append(n)
        if again:
            # New runs' jobs.jsonl, and restarted readers: one more batch.
            retry = Batch(reads=[self._cache[n].jobs_reader.request() for n in again])
            for n, res in zip(again, self.executor.run_batch(retry).reads, strict=True):
                self._feed_jobs(self._cache[n], res)
        return [self._info(n, c) for n in names if (c := self._cache.get(n)) is not None]

    def _info(self, name: str, c: _Cached) -> RunInfo:
        """The run as listed, built again only when something it holds changed."""
        if c.info is None:
            lines = fold(c.jobs)
            c.info = RunInfo(
                RunRef(name, _join(self.root, name)),
                c.spec_json,
                tuple(lines.attempts),
                lines.ends,
                unanswered_intent=bool(lines.pending),
                damage=_run_damage(c),
                usage=c.usage,
            )
        return c.info

    @staticmethod
    def _feed_usage(cached: _Cached, res: ReadResult) -> None:
        doc, problems = usage_json_of(res)
        damage = tuple(Damage(USAGE_FILE, p) for p in problems)
        if doc != cached.usage or damage != cached.usage_damage:
            cached.usage, cached.usage_damage = doc, damage
            cached.info = None
        if doc is not None and str(doc["job_id"]) == cached.usage_awaited:
            cached.usage_awaited = None

    # -- usage.json ---------------------------------------------------------

    def write_usage(self, run: RunRef, record: Mapping[str, Any]) -> RunInfo | None:
        """Write the run's ``usage.json`` (atomically: :meth:`write_text`) and take it as
        read; returns the run as listed with it (None: a run not listed here)."""
        self.write_text(run, USAGE_FILE, json.dumps(record, indent=2) + "\n")
        c = self._cache.get(run.run_id)
        if c is None:
            return None
        c.usage = check_usage_json(record)[0] or None
        c.usage_damage = ()
        c.usage_awaited = None
        c.info = None
        return self._info(run.run_id, c)

    def await_usage(self, run: RunRef, job_id: str) -> None:
        """Read the run's ``usage.json`` again at every listing until it holds ``job_id``'s
        record: another process may write it first (a refresh that finds it there asks the
        scheduler nothing)."""
        c = self._cache.get(run.run_id)
        if c is not None:
            c.usage_awaited = job_id

    @staticmethod
    def _feed_jobs(cached: _Cached, res: ReadResult) -> bool:
        # Where the directory itself is damaged, its jobs.jsonl has nothing more to say.
        lost = any(d.file == RUN_DIRECTORY for d in cached.damage)
        problem = None if lost else read_problem(res, missing_ok=False)
        if problem != cached.jobs_problem:
            cached.jobs_problem = problem
            cached.info = None
        lines = cached.jobs_reader.read_new(res)
        if cached.jobs_reader.generation != cached.generation:
            cached.generation = cached.jobs_reader.generation
            cached.jobs = []
            cached.line_problems = []
            cached.lines_read = 0
            cached.info = None
        new = parse_lines(lines, cached.lines_read, cached.line_problems)
        cached.lines_read += len(lines)
        if new:
            cached.jobs.extend(new)
            cached.info = None
        return cached.jobs_reader.needs_reread

    # -- read ---------------------------------------------------------------

    def read_spec(self, run: RunRef) -> dict[str, Any]:
        """The usable part of ``spec.json`` (``spec``, ``group``, ``created_at``, ...):
        fields of the wrong type or range are left out (see :mod:`run_damage`)."""
        doc, problems = spec_json_of(self._read(run.file(SPEC_FILE)))
        if not doc and problems:
            raise RunStoreError(f"{run.run_id}: {SPEC_FILE} {problems[0]}")
        return doc

    def read_jobs(self, run: RunRef) -> list[dict[str, Any]]:
        """Every record in ``jobs.jsonl`` (attempts and ends); malformed lines, and records
        that mean nothing without their wrong fields, are skipped (:meth:`Journal.read`)."""
        return self.journal(run).read()

    def read_run_json(self, run: RunRef) -> dict[str, Any] | None:
        """The trainer's ``run.json`` without its wrong fields, or None before it exists
        (or where it cannot be read)."""
        doc = self.read_json(run, RUN_JSON)
        return check_run_json(doc)[0] if doc is not None else None

    def read_json(self, run: RunRef, name: str) -> dict[str, Any] | None:
        """A JSON object file of the run (``run.json``, ``preflight.json``), or None before
        it exists, or where it is not one (a directory, unreadable, not JSON)."""
        return load_object(self._read(run.file(name)).data)[0]

    def read_metrics(self, run: RunRef) -> list[MetricsRow]:
        """Every complete row of ``metrics.csv`` (none before it exists, or where it cannot
        be read)."""
        return parse_metrics_csv(self._read(run.file(METRICS_FILE)).data.decode("utf-8", "replace"))

    def file_size(self, run: RunRef, name: str) -> int | None:
        """The size of a file of the run; None where there is no such file (absent, a
        directory in its place, a symlink loop, unreadable): a stat that never raises."""
        res = self.executor.run_batch(Batch(reads=[FileRead(run.file(name), 0, 0)])).reads[0]
        return res.stat.size if res.stat is not None and not res.stat.is_dir else None

    def _read(self, path: str) -> ReadResult:
        """The whole file, as one batch read: a file that cannot be read (a directory, a
        symlink loop, permission denied) comes back empty with its ``error``, not raised."""
        return self.executor.run_batch(Batch(reads=[FileRead(path)])).reads[0]

    def read_script(self, run: RunRef) -> str:
        return self.executor.read_range(run.file(SCRIPT_FILE)).decode("utf-8", "replace")

    def write_text(self, run: RunRef, name: str, text: str) -> str:
        """Write a file of the app's (``sacct.txt``) into the run directory; returns its path."""
        path = run.file(name)
        self.executor.write_atomic(path, text.encode())
        return path


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def spec_nodes(spec: Mapping[str, Any]) -> int:
    """The spec's node count (1 where it says none, or nonsense): how many telemetry files
    a run may have. A count beyond the spec's limit is nonsense too (a tampered spec.json
    must not make a reader open 10**12 files)."""
    nodes = spec.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and 0 < nodes <= MAX_NODES:
        return nodes
    return 1


def _listed_spec(
    spec: ReadResult, directory: ReadResult
) -> tuple[dict[str, Any], tuple[Damage, ...]]:
    """A listed run's spec.json (its usable part) and what is wrong with the run as listed:
    the directory itself, or its spec.json."""
    if directory.error:
        return {}, (Damage(RUN_DIRECTORY, f"cannot be read ({directory.error})"),)
    if directory.stat is not None and not directory.stat.is_dir:
        return {}, (Damage(RUN_DIRECTORY, "is a file, not a directory"),)
    doc, problems = spec_json_of(spec)
    return doc, tuple(Damage(SPEC_FILE, p) for p in problems)


def _run_damage(cached: _Cached) -> tuple[Damage, ...]:
    jobs = () if cached.jobs_problem is None else (Damage(JOBS_FILE, cached.jobs_problem),)
    return (*cached.damage, *jobs, *cached.line_problems, *cached.usage_damage)
