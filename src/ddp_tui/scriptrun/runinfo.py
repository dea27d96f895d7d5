"""``run.json``, ``ranks.jsonl`` and ``requeue.request``: the run's record of who ran where."""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RUN_JSON = "run.json"
RANKS_FILE = "ranks.jsonl"
REQUEUE_FILE = "requeue.request"


def utc_now() -> str:
    """ISO 8601 UTC time, to the second (the trainer's format)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` in one rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunJson:
    """The in-memory ``run.json``; every :meth:`update` rewrites the file."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def start(cls, path: Path, data: dict[str, Any]) -> RunJson:
        """Write the attempt's start; a later attempt keeps the first start time, counts
        attempts and keeps the epoch offset."""
        previous = read_json(path)
        merged = dict(data)
        if previous.get("started_at"):
            merged["started_at"] = previous["started_at"]
            merged["attempts"] = int(previous.get("attempts") or 1) + 1
        else:
            merged["started_at"] = utc_now()
            merged["attempts"] = 1
        if merged.get("epoch_offset") is None:
            merged["epoch_offset"] = previous.get("epoch_offset")
        merged["attempt_started_at"] = utc_now()
        info = cls(path, merged)
        write_json_atomic(path, merged)
        return info

    def update(self, **changes: Any) -> None:
        self.data.update(changes)
        write_json_atomic(self.path, self.data)


def append_rank_line(run_dir: Path, rank: int, local_rank: int, job_id: str | None) -> None:
    """One line per rank and attempt, in one O_APPEND write (ranks of many nodes share it)."""
    line = json.dumps(
        {
            "rank": rank,
            "local_rank": local_rank,
            "host": socket.gethostname(),
            "job_id": job_id,
            "time": time.time(),
        }
    )
    fd = os.open(run_dir / RANKS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def rank_hosts(run_dir: Path, job_id: str | None) -> list[str]:
    """Hosts by rank for this attempt: the last line of each rank with this job id."""
    hosts: dict[int, str] = {}
    try:
        text = (run_dir / RANKS_FILE).read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("job_id") == job_id:
            rank = entry.get("rank")
            if isinstance(rank, int):
                hosts[rank] = str(entry.get("host"))
    return [hosts[r] for r in sorted(hosts)]


def write_requeue_request(run_dir: Path, reason: str, epoch: int) -> None:
    record = {"reason": reason, "epoch": epoch, "time": time.time()}
    (run_dir / REQUEUE_FILE).write_text(json.dumps(record) + "\n")


def clear_requeue_request(run_dir: Path) -> None:
    (run_dir / REQUEUE_FILE).unlink(missing_ok=True)
