"""One process's journal: JSON lines appended to ``observe/<attempt>-<host>-<pid>.jsonl``.

The file is made on the first record, so the many processes that observe nothing (a DataLoader
worker, a compile worker, a ``python -c`` the script runs) leave no file. Each record is one
``os.write`` to an ``O_APPEND`` descriptor: a process killed mid-run leaves whole lines. A child
forked after the file was opened shares the descriptor but not the pid, and writes nothing: its
records would be its parent's.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from . import OBSERVE_DIR

#: The first record of every journal: who wrote it.
PROCESS = "process"


def journal_name(attempt: str, host: str, pid: int) -> str:
    return f"{attempt or '0'}-{host}-{pid}.jsonl"


class Journal:
    def __init__(self, run_dir: str | None, attempt: str, env: dict[str, str]) -> None:
        self.run_dir = run_dir
        self.attempt = attempt
        self.env = env
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._fd: int | None = None
        self.broken = run_dir is None

    @classmethod
    def from_environ(cls) -> Journal:
        env = os.environ
        return cls(env.get("DDP_TUI_RUN_DIR"), env.get("DDP_TUI_ATTEMPT", ""), dict(env))

    def _open(self) -> int:
        assert self.run_dir is not None
        folder = Path(self.run_dir) / OBSERVE_DIR
        folder.mkdir(exist_ok=True)
        path = folder / journal_name(self.attempt, self.host, self.pid)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fd = fd
        env = self.env
        self._write(
            fd,
            {
                "kind": PROCESS,
                "pid": self.pid,
                "host": self.host,
                "attempt": self.attempt,
                "env_rank": _int(env.get("RANK")),
                "env_local_rank": _int(env.get("LOCAL_RANK")),
                "env_world_size": _int(env.get("WORLD_SIZE")),
                "argv": sys.argv[:4],
            },
        )
        return fd

    def write(self, kind: str, **fields: Any) -> None:
        """Append one record; silently nothing once the journal cannot be written."""
        if self.broken or os.getpid() != self.pid:
            return
        try:
            fd = self._fd if self._fd is not None else self._open()
            self._write(fd, {"kind": kind, **fields})
        except (OSError, TypeError, ValueError):
            self.broken = True  # a full disk or an odd value: observing stops, the script goes on

    @staticmethod
    def _write(fd: int, record: dict[str, Any]) -> None:
        record.setdefault("t", time.time())
        os.write(fd, (json.dumps(record, default=str) + "\n").encode())


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None
