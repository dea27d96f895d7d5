"""The run-directory files a job writes, shared by the trainer and a user script's wrapper.

``run.json`` (written whole and atomically, counting attempts), ``metrics.csv``'s columns and
cell format, ``requeue.request``, the trainer's per-rank ``heartbeats/rank-N.json``, and where
the resource sampler (``ddp_tui.telemetry``) writes ``telemetry/node-K.jsonl``.
Standard library only: it is copied into every run as
``code/ddp_tui/jobfiles.py`` and imported there by ``ddp_tui.trainer`` and
``ddp_tui.scriptrun``, so that the two writers of one contract cannot drift apart
(docs/architecture.md, "The run directory").
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
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
)


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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` in one rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
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
    (run_dir / REQUEUE_FILE).write_text(json.dumps(record) + "\n")


def clear_requeue_request(run_dir: Path) -> None:
    """A (re)started attempt removes the previous attempt's request."""
    (run_dir / REQUEUE_FILE).unlink(missing_ok=True)


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
