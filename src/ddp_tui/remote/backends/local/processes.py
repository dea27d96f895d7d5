"""Processes of the local scheduler: liveness from ``/proc``, group signals, and the
command line that starts a supervisor.

A pid counts as alive only with the same start time as recorded, so a pid that the
kernel reused after a reboot or a ``kill -9`` is never mistaken for a job.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import NamedTuple

#: The directory that holds the ``ddp_tui`` package (``src/`` in a checkout,
#: ``site-packages`` when installed).
_IMPORT_ROOT = str(Path(__file__).resolve().parents[4])


class ProcInfo(NamedTuple):
    """The fields of ``/proc/<pid>/stat`` the local scheduler decides by."""

    pid: int
    state: str  # R, S, D, Z (zombie), X, ...
    ppid: int
    pgid: int
    start: int  # clock ticks since boot: with the pid it names one process

    @property
    def live(self) -> bool:
        # A zombie has ended; only its parent's wait is missing.
        return self.state not in ("Z", "X", "x")


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity, which a container or ``taskset`` may
    make fewer than the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # a platform without affinity
        return os.cpu_count() or 1


def proc_info(pid: int | str) -> ProcInfo | None:
    """``pid``'s state, parent, process group and start time from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields resume after the last ")".
    rest = data[data.rfind(")") + 2 :].split()
    try:
        return ProcInfo(int(pid), rest[0], int(rest[1]), int(rest[2]), int(rest[19]))
    except (IndexError, ValueError):
        return None


def all_processes() -> list[ProcInfo]:
    """Every process /proc lists now (empty without /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [p for p in (proc_info(n) for n in names if n.isdigit()) if p is not None]


def _has_proc() -> bool:
    return os.path.isdir("/proc/self")


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), to tell a reused pid apart."""
    st = proc_info(pid)
    return st.start if st else None


def pid_alive(pid: int | None, start: int | None) -> bool:
    """Whether ``pid`` runs and is the same process that started at ``start``."""
    if not pid:
        return False
    if _has_proc():
        st = proc_info(pid)
        if st is None or not st.live:
            return False
        return start is None or st.start == start
    try:  # no /proc (macOS): existence only
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    if _has_proc():
        # kill(0) would also count zombies that a non-reaping init keeps around.
        return any(p.pgid == pgid and p.live for p in all_processes())
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def python_module_command(
    python: str, module: str, args: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """argv and environment that run ``python -m module args`` with this very ddp_tui.

    ``python`` need not have ddp_tui installed, so the directory this package was
    imported from goes first on ``PYTHONPATH``; the child calls
    :func:`restore_python_path` so that whatever it starts sees the app's environment.
    """
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    # An unset and an empty PYTHONPATH stay distinguishable: see restore_python_path.
    env["PYTHONPATH"] = _IMPORT_ROOT if old is None else _IMPORT_ROOT + os.pathsep + old
    return [python, "-m", module, *args], env


def restore_python_path(environ: MutableMapping[str, str] = os.environ) -> None:
    """Undo what :func:`python_module_command` added to ``PYTHONPATH`` (in the child)."""
    value = environ.get("PYTHONPATH")
    if value == _IMPORT_ROOT:
        del environ["PYTHONPATH"]
    elif value is not None and value.startswith(_IMPORT_ROOT + os.pathsep):
        environ["PYTHONPATH"] = value[len(_IMPORT_ROOT) + len(os.pathsep) :]
