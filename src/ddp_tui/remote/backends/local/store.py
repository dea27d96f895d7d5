"""The local scheduler's state directory: one JSON file per job, under one lock.

Layout of ``<state>``: ``jobs/<id>.json`` (a :class:`LocalJob` each), ``next_id``,
``settings.json`` (what supervisors need when they advance the queue with the app
closed), ``logs/<id>.supervisor.log`` and ``lock``. Every change happens under one
``flock`` on ``lock``, so the app, the CLI and the supervisors never race; files are
replaced atomically, so a reader without the lock still sees a whole version.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.states import JobState

DEFAULT_MAX_RUNNING = 1
DEFAULT_CANCEL_GRACE_SEC = 10.0

#: What a supervisor is asked to do with a running job (``LocalJob.action``).
ACTION_CANCEL = "cancel"
ACTION_REQUEUE = "requeue"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/ddp-tui/local`` (``~/.local/state/ddp-tui/local``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "ddp-tui" / "local"


_LOGS = "logs"


def supervisor_log_path(state_dir: str | Path, job_id: str) -> Path:
    """Where the supervisor of ``job_id`` writes what goes wrong with it."""
    return Path(state_dir) / _LOGS / f"{job_id}.supervisor.log"


@dataclass
class LocalJob:
    """One job's state file."""

    job_id: str
    run_dir: str
    script: str
    name: str
    out_path: str
    err_path: str
    state: str = JobState.PENDING.value
    reason: str = ""
    submitted_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    supervisor_pid: int | None = None
    supervisor_start: int | None = None
    job_pid: int | None = None  # also the job's process group id
    job_start: int | None = None
    exit_code: int | None = None
    kill_signal: int | None = None
    action: str = ""  # ACTION_CANCEL | ACTION_REQUEUE while the supervisor stops the job
    grace_sec: float = DEFAULT_CANCEL_GRACE_SEC
    restart_count: int = 0
    #: This start's token, in ``DDP_TUI_LOCAL_JOB`` of every process of the job
    #: (:mod:`~ddp_tui.remote.backends.local.reaping`).
    marker: str = ""
    #: The token of an ended start whose processes could not all be ended yet: whoever
    #: advances the queue next tries again.
    leftover: str = ""
    #: A task of a job array (``#SBATCH --array``): its job id is ``<master>_<index>``, and
    #: at most ``array_limit`` tasks of one master run at once (the ``%K`` of the directive;
    #: 0: no limit but the scheduler's own).
    array_master: str = ""
    array_index: int | None = None
    array_count: int = 0
    array_limit: int = 0

    @property
    def job_state(self) -> JobState:
        try:
            return JobState(self.state)
        except ValueError:
            return JobState.UNKNOWN

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LocalJob:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


class StateDirUnusable(SchedulerError):
    """The state directory cannot be created or written: names it and the key that moves it."""

    def __init__(self, state_dir: Path, error: OSError) -> None:
        where = error.filename or state_dir
        super().__init__(
            f"the local scheduler's state directory {state_dir} cannot be used"
            f" ({where}: {error.strerror or error}); set local_state_dir in the profile"
            " (or XDG_STATE_HOME) to a writable directory"
        )


def read_grace(job_file: Path, default: float) -> float:
    """The cancel grace recorded in a job file, read without the lock.

    For a supervisor's signal handler, which may run while its own main thread holds
    the lock; the atomic replace makes the unlocked read safe.
    """
    try:
        return float(json.loads(job_file.read_text())["grace_sec"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


class JobStore:
    """The files of one state directory. Callers hold :meth:`locked` around changes."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.jobs_dir = state_dir / "jobs"
        self._cache: dict[str, tuple[tuple[int, int, int], LocalJob]] = {}
        try:
            for d in (state_dir, self.jobs_dir, state_dir / _LOGS):
                d.mkdir(mode=0o700, parents=True, exist_ok=True)
                # Existing but read-only (a read-only HOME, a full mount's remount) fails
                # here, not halfway through recording a job.
                if not os.access(d, os.W_OK | os.X_OK):
                    raise PermissionError(13, "not writable", str(d))
            os.close(os.open(state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600))
        except OSError as e:
            raise StateDirUnusable(state_dir, e) from None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        # One open file description per acquisition: threads of one process exclude
        # each other too. Never nest.
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read_settings(self) -> dict[str, Any]:
        try:
            doc = json.loads((self.state_dir / "settings.json").read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def write_settings(self, settings: dict[str, Any]) -> None:
        _write_json(self.state_dir / "settings.json", settings)

    def job_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def next_id(self) -> str:
        path = self.state_dir / "next_id"
        try:
            nxt = int(path.read_text().strip())
        except (OSError, ValueError):
            nxt = 1
        # Never reuse an id, even if next_id was lost.
        nxt = max([nxt, *(_id_order(i)[0] + 1 for i in self.job_ids())])
        path.write_text(f"{nxt + 1}\n")
        return str(nxt)

    def job_ids(self) -> list[str]:
        """Every job's id in submission order; an array's tasks (``7_0``, ``7_1``, ...) in
        index order after their master's number."""
        ids = [n[:-5] for n in os.listdir(self.jobs_dir) if n.endswith(".json")]
        return sorted((i for i in ids if _JOB_ID_RE.fullmatch(i)), key=_id_order)

    def load(self, job_id: str) -> LocalJob | None:
        if not _JOB_ID_RE.fullmatch(job_id):
            return None
        path = self.job_path(job_id)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._cache.get(job_id)
        if cached is not None and cached[0] == key:
            return replace(cached[1])  # callers change and save their copy
        try:
            doc = json.loads(path.read_text())
            job = LocalJob.from_dict(doc)
        except (OSError, ValueError, TypeError):
            return None
        self._cache[job_id] = (key, job)
        return replace(job)

    def save(self, job: LocalJob) -> None:
        _write_json(self.job_path(job.job_id), asdict(job))
        self._cache.pop(job.job_id, None)

    def all_jobs(self) -> list[LocalJob]:
        return [j for j in (self.load(i) for i in self.job_ids()) if j is not None]


#: A job id: a number, or an array task's ``<master>_<index>``.
_JOB_ID_RE = re.compile(r"\d+(?:_\d+)?")


def _id_order(job_id: str) -> tuple[int, int]:
    master, _, index = job_id.partition("_")
    return int(master), int(index) if index else -1


def _write_json(path: Path, doc: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
