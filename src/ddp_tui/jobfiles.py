"""The run-directory files a job writes, shared by the trainer and a user script's wrapper.

``run.json`` (written whole and atomically, counting attempts), ``metrics.csv``'s columns and
cell format, ``requeue.request``, the trainer's per-rank ``heartbeats/rank-N.json``, and where
the resource sampler (``ddp_tui.telemetry``) writes ``telemetry/node-K.jsonl``.
Standard library only: it is copied into every run as
``code/ddp_tui/jobfiles.py`` and imported there by ``ddp_tui.trainer`` and
``ddp_tui.scriptrun``, so that the two writers of one contract cannot drift apart
(docs/architecture.md, "The run directory").

A record that cannot be written (a full, read-only or over-quota disk) is fatal for the job:
the writers raise :class:`RunWriteError`, whose :meth:`~RunWriteError.message` is the one line
the job prints (:data:`WRITE_FAILED_PREFIX`, the path, the error, the free space) and the
diagnosis reads back; the process then exits with :data:`EXIT_WRITE_FAILED`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

RUN_JSON: Final = "run.json"
REQUEUE_FILE: Final = "requeue.request"
#: One ``rank-<N>.json`` per rank in here (:class:`Heartbeater`).
HEARTBEAT_DIR: Final = "heartbeats"
#: One ``node-<K>.jsonl`` per node in here (``ddp_tui.telemetry``): a file per node, because
#: appends from several hosts to one file on NFS are not atomic.
TELEMETRY_DIR: Final = "telemetry"
#: The sampler's default interval, seconds (the spec's ``telemetry_sec``).
TELEMETRY_DEFAULT_SEC: Final = 5
#: The exit code that asks for a requeue: the trainer's, and a script's (it reads it from
#: ``DDP_TUI_REQUEUE_EXIT_CODE``).
EXIT_REQUEUE: Final = 3
#: The exit code of a job process that could not write a run-directory record.
EXIT_WRITE_FAILED: Final = 4
#: How the one line about such a failure starts (:meth:`RunWriteError.message`).
WRITE_FAILED_PREFIX: Final = "[ddp-tui] cannot write "

#: ``metrics.csv``'s columns, in order; a writer may add its own after them.
METRICS_COLUMNS: Final = (
    "epoch",
    "train_loss",
    "train_acc",
    "val_loss",
    "val_acc",
    "val_mae",
    "val_rmse",
    "lr",
    "epoch_time_sec",
    "throughput_samples_per_sec",
    "data_load_time_sec",
    "compute_time_sec",
    "gpu_mem_peak_mib",
    "gpu_util_avg",
    "cpu_util_avg",
    "world_size",
    "mfu",
    # The step breakdown (docs/step-breakdown.md): data + compute + comm + other = epoch time.
    "comm_time_sec",
    "other_time_sec",
)
#: Rank 0's per-epoch, per-rank step times (docs/step-breakdown.md), one JSON line per epoch.
STEP_TIMES_FILE: Final = "step_times.jsonl"


def utc_now() -> str:
    """ISO 8601 UTC time, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def csv_cell(value: Any) -> str:
    """One ``metrics.csv`` cell: empty for None, 10 significant digits for a float."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def json_objects(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON objects among a ``.jsonl`` file's ``lines``; blank, broken and non-object
    lines are skipped (a writer killed mid-line must not stop its readers)."""
    out: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def byte_size(count: int) -> str:
    """``0 B``, ``512 B``, ``12.0 KiB``, ``3.4 GiB``: a size in the units ``df -h`` uses."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def free_space(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(bytes free to this user, filesystem size) of the filesystem holding ``path`` (or,
    where it does not exist, its nearest existing parent); None where it cannot be asked."""
    where = Path(path)
    for candidate in (where, *where.parents):
        try:
            st = os.statvfs(candidate)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return None


class RunWriteError(OSError):
    """A run-directory record could not be written: fatal for the job that writes it.

    An ``OSError`` (same ``errno``, ``strerror``, ``filename``), so that code which already
    goes past a failed write (heartbeats, the sampler) keeps doing so; ``free`` is the
    filesystem's (free, size) in bytes, asked when the write failed.
    """

    def __init__(self, path: str | os.PathLike[str], cause: BaseException) -> None:
        errno = getattr(cause, "errno", None)
        strerror = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        super().__init__(errno, strerror, str(path))
        self.path = str(path)
        self.free = free_space(path)

    def message(self) -> str:
        """The one line a job prints: the path, the error, and the free space there."""
        error = f"[Errno {self.errno}] {self.strerror}" if self.errno else str(self.strerror)
        if self.free is None:
            room = "free space unknown"
        else:
            room = f"{byte_size(self.free[0])} free of {byte_size(self.free[1])} on its filesystem"
        return f"{WRITE_FAILED_PREFIX}{self.path}: {error}; {room}"


def os_error_in(exc: BaseException) -> OSError | None:
    """``exc`` if it is an ``OSError``, else the first one it was raised from or during
    (``torch.save`` answers a full disk with a ``RuntimeError`` raised while handling one)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into a :class:`RunWriteError` naming ``path``."""
    try:
        yield
    except RunWriteError:
        raise
    except OSError as exc:
        raise RunWriteError(path, exc) from exc


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` in one rename, so a reader never sees half a file.

    Raises :class:`RunWriteError` when it cannot."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with writing(path):
            tmp.write_text(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, path)
    except BaseException:
        # A full disk must not leave a half-written temporary file behind.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file, or {} when it is missing or not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunRecord:
    """The in-memory ``run.json``; every :meth:`update` rewrites the file."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def start(cls, path: Path, data: dict[str, Any], *, keep: Iterable[str] = ()) -> RunRecord:
        """Write an attempt's start. A later attempt keeps the first start time, counts the
        attempts, and keeps the earlier values of ``keep`` that ``data`` does not set."""
        previous = read_json(path)
        merged = dict(data)
        if previous.get("started_at"):
            merged["started_at"] = previous["started_at"]
            merged["attempts"] = int(previous.get("attempts") or 1) + 1
        else:
            merged.setdefault("started_at", utc_now())
            merged["attempts"] = 1
        for name in keep:
            if merged.get(name) is None:
                merged[name] = previous.get(name)
        merged["attempt_started_at"] = utc_now()
        record = cls(path, merged)
        write_json_atomic(path, merged)
        return record

    def update(self, **changes: Any) -> None:
        self.data.update(changes)
        write_json_atomic(self.path, self.data)


def write_requeue_request(run_dir: Path, reason: str, **where: Any) -> None:
    """Ask the job script to requeue the job (it does so only after its own pre-timeout
    signal): ``reason`` and where the run stopped (``epoch``, ``step``)."""
    record = {"reason": reason, "time": time.time(), **where}
    path = run_dir / REQUEUE_FILE
    with writing(path):
        path.write_text(json.dumps(record) + "\n")


def clear_requeue_request(run_dir: Path) -> None:
    """A (re)started attempt removes the previous attempt's request."""
    path = run_dir / REQUEUE_FILE
    with writing(path):
        path.unlink(missing_ok=True)


def telemetry_file(node: int) -> str:
    """``telemetry/node-<node>.jsonl``, relative to the run directory (K = ``SLURM_NODEID``)."""
    return f"{TELEMETRY_DIR}/node-{node}.jsonl"


def heartbeat_path(run_dir: Path, rank: int) -> Path:
    """``<run>/heartbeats/rank-<rank>.json``."""
    return Path(run_dir) / HEARTBEAT_DIR / f"rank-{rank}.json"


class Heartbeater:
    """One rank's heartbeat: ``heartbeats/rank-<N>.json`` =
    ``{"rank", "host", "pid", "t", "epoch", "step", "phase"}`` (``t``: epoch seconds).

    Called from the training loop itself, never from a thread, so that a rank stuck in a
    collective or a data loader stops beating and can be named as the silent one. Each file
    is replaced by a rename inside ``heartbeats/``, so the directory's mtime is the time of
    the newest beat of any rank: a reader can stat one directory instead of reading every
    rank's file. :meth:`beat` writes at most every ``every_sec`` seconds, except when the
    phase changes or ``force`` is given, and never raises: a full disk must not end training.
    """

    def __init__(self, run_dir: Path, rank: int, host: str, *, every_sec: float = 15.0) -> None:
        self.path = heartbeat_path(run_dir, rank)
        self.rank = rank
        self.host = host
        self.every_sec = every_sec
        # time.monotonic() and phase of the last write (or failed try)
        self._written_at: float | None = None
        self._phase = ""

    def beat(self, epoch: int, step: int, phase: str, *, force: bool = False) -> bool:
        """Record where this rank is; returns whether the file was written."""
        now = time.monotonic()
        if (
            not force
            and phase == self._phase
            and self._written_at is not None
            and now - self._written_at < self.every_sec
        ):
            return False
        record = {
            "rank": self.rank,
            "host": self.host,
            "pid": os.getpid(),
            "t": time.time(),
            "epoch": epoch,
            "step": step,
            "phase": phase,
        }
        # A failed write is throttled too: a full disk is not retried on every step.
        self._written_at, self._phase = now, phase
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, record)
        except (OSError, ValueError):
            # ValueError: a path the OS refuses outright (a NUL byte); training goes on.
            return False
        return True
