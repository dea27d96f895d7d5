"""Room in the runs root: checked before a submit, so that a full disk refuses it cleanly.

A submit that starts on a full filesystem fails halfway (a traceback, a half-made run
directory) or, worse, queues a job whose run directory cannot take its first checkpoint.
``df`` is asked on the target machine (the login node, over SSH from a laptop), for the
runs root or, before the first submit made it, the nearest directory above it that exists.
"""

from __future__ import annotations

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import CommandResult, Executor, ExecutorError

MIB = 1024 * 1024
#: What a run needs beyond its snapshot and code: logs, metrics, telemetry and at least one
#: checkpoint of a small model. A run that needs more says so when it fails, by its diagnosis.
MARGIN_BYTES = 64 * MIB


class NoRoom(DdpTuiError):
    """The runs root's filesystem is too full for what was asked."""

    title = "Disk space"


# The nearest existing directory at or above $1, then its filesystem's free space in KiB.
_DF = 'p=$1; while [ ! -e "$p" ]; do p=$(dirname -- "$p"); done; df -Pk -- "$p"'


def free_space_command(path: str) -> list[str]:
    """The command whose answer :func:`free_of` reads: to join a batch."""
    return ["sh", "-c", _DF, "sh", path]


def free_bytes(executor: Executor, path: str) -> int | None:
    """Bytes free to an unprivileged writer on ``path``'s filesystem; None if unknown (no
    ``df``, an answer it could not parse): then nothing is refused on a guess."""
    try:
        res = executor.run(free_space_command(path), timeout=30)
    except ExecutorError:
        return None
    return free_of(res)


def free_of(res: CommandResult) -> int | None:
    """The free bytes in :func:`free_space_command`'s answer; None where it has none."""
    lines = res.stdout.strip().splitlines()
    if not res.ok or len(lines) < 2:
        return None
    fields = lines[-1].split()
    try:
        return int(fields[3]) * 1024  # POSIX df -P: Filesystem 1024-blocks Used Available ...
    except (IndexError, ValueError):
        return None


def require_room(executor: Executor, path: str, needed: int, *, what: str) -> None:
    """Refuse (:class:`NoRoom`) when ``path``'s filesystem has less than ``needed``
    bytes free, naming the path, what is free and what ``what`` needs."""
    free = free_bytes(executor, path)
    if free is not None and free < needed:
        raise NoRoom(
            f"{path} has {free / MIB:.1f} MiB free; {what} needs about {needed / MIB:.0f} MiB "
            f"(its files and a {MARGIN_BYTES // MIB} MiB margin for logs, metrics and "
            "checkpoints). Free some space or set runs_root elsewhere; nothing was submitted"
        )
