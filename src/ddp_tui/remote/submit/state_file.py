"""The small JSON files in which a submit remembers what it found out about a cluster (the
Python check's interpreters, the environments detected per partition, the environment
checks that passed), in ddp-tui's state directory on this machine.

Each is one JSON object, read afresh on every call (the app and the CLI share it), and
written atomically (a reader in another process sees the old file or the new one). A file
that is missing, unreadable or damaged reads as empty: what is not remembered is simply
found out again, so none of this ever raises.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def state_path(name: str) -> Path:
    """``$XDG_STATE_HOME/ddp-tui/NAME``, beside the local scheduler's state."""
    from ddp_tui.remote.backends.local.store import default_state_dir

    return default_state_dir().parent / name


class StateFile:
    """One remembered-answers file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # a file that cannot be written only costs time
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(data, fh, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
