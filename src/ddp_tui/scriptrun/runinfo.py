"""``run.json``, ``ranks.jsonl`` and ``requeue.request``: the run's record of who ran where."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ddp_tui.jobfiles import (
    REQUEUE_FILE,
    RUN_JSON,
    clear_requeue_request,
    utc_now,
    write_requeue_request,
    writing,
)

RANKS_FILE = "ranks.jsonl"

__all__ = ["REQUEUE_FILE", "RUN_JSON", "clear_requeue_request", "utc_now", "write_requeue_request"]


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
    path = run_dir / RANKS_FILE
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
