"""Every process of a local job, found and ended, with or without its supervisor.

A job's processes are found three ways, because each alone misses some:

- **The supervisor's descendants.** The supervisor makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent exits (a double fork, a launcher
  killed under its ranks) becomes the supervisor's child instead of init's. While the
  supervisor lives, its descendants are the job, whatever sessions or groups they made:
  torchrun starts every rank with ``start_new_session=True``, so a signal to the job's
  process group alone never reaches a rank.
- **The job's process group**, while its leader is the very process recorded (same pid and
  start time): a group id the kernel reused for something else is never signalled.
- **The job's marker**, ``DDP_TUI_LOCAL_JOB=<token>`` in the environment of everything the
  job starts, read from ``/proc/<pid>/environ``. It finds the job's processes after a
  ``kill -9`` of the supervisor, when they were reparented to init. The token is new for
  every start of a job, so a requeued attempt is told from the one before.

Signals go through a pidfd opened after the start time was checked again, so a pid reused
between the scan and the signal is never hit.

Why not a cgroup: one per job would catch even a process that cleared its environment and
escaped while the supervisor was dead, but it needs a writable, delegated hierarchy. That
is root or a systemd scope over D-Bus on a workstation, and cgroup v1, v2 or a hybrid in
containers (this project's own CI machine has a v1 hybrid). Process groups, the subreaper
and the marker need no privilege and behave the same everywhere on Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

from ddp_tui.remote.backends.local.processes import ProcInfo, all_processes, proc_info

#: The environment variable that marks a job's processes; its value is the job's token.
JOB_MARKER_ENV = "DDP_TUI_LOCAL_JOB"
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_TICK = 0.05
#: How long KILL is repeated on processes that keep appearing before a sweep gives up.
KILL_WITHIN_SEC = 5.0


def new_marker(job_id: str) -> str:
    """A fresh token for one start of job ``job_id``."""
    return f"{job_id}-{secrets.token_hex(8)}"


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux only). False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def reap_children() -> None:
    """Collect every child that has exited (a subreaper inherits other processes' zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@dataclass(frozen=True)
class JobProcesses:
    """How to recognise one job's processes (see the module's docstring)."""

    marker: str = ""
    pgid: int | None = None
    pgid_start: int | None = None
    #: The caller's own pid when it is the job's subreaper (the supervisor).
    root: int | None = None

    def find(self) -> list[ProcInfo]:
        """The job's live processes now, never the caller."""
        procs = all_processes()
        me = os.getpid()
        live = {p.pid: p for p in procs if p.live and p.pid != me}
        found: dict[int, ProcInfo] = {}
        if self.root is not None:
            children: defaultdict[int, list[ProcInfo]] = defaultdict(list)
            for p in live.values():
                children[p.ppid].append(p)
            stack = [self.root]
            while stack:
                for child in children.get(stack.pop(), ()):
                    if child.pid not in found:
                        found[child.pid] = child
                        stack.append(child.pid)
        if self.pgid and self._group_is_the_jobs(procs):
            found.update((p.pid, p) for p in live.values() if p.pgid == self.pgid)
        if self.marker:
            needle = f"{JOB_MARKER_ENV}={self.marker}".encode()
            for p in live.values():
                if p.pid not in found and _has_env(p.pid, needle):
                    found[p.pid] = p
        return list(found.values())

    def _group_is_the_jobs(self, procs: list[ProcInfo]) -> bool:
        # The leader may be a zombie; while it is, its pid (the group id) cannot be reused.
        leader = next((p for p in procs if p.pid == self.pgid), None)
        return leader is not None and leader.start == self.pgid_start


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:  # gone, or another user's
        return False
    return needle in data.split(b"\0")


def signal_process(proc: ProcInfo, sig: int) -> None:
    """Send ``sig`` to ``proc`` if that very process (same start time) still runs."""
    pidfd_open = getattr(os, "pidfd_open", None)
    try:
        fd = pidfd_open(proc.pid) if pidfd_open is not None else None
    except ProcessLookupError:
        return
    except OSError:  # a kernel before 5.3: the short race below remains
        fd = None
    try:
        now = proc_info(proc.pid)
        if now is None or now.start != proc.start:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(proc.pid, sig)
    finally:
        if fd is not None:
            os.close(fd)


def end_job_processes(
    procs: JobProcesses, grace: float, *, reap: bool = False, kill_within: float = KILL_WITHIN_SEC
) -> bool:
    """TERM every process of the job, KILL what is left after ``grace`` seconds (at once
    when ``grace`` <= 0), repeating while processes keep appearing, for at most
    ``kill_within`` seconds more. ``reap``: the caller is the subreaper and collects its
    zombies. Returns True when no process of the job is left."""
    found = procs.find()
    if not found:
        return True
    deadline = time.monotonic() + grace
    termed: set[tuple[int, int]] = set()
    while found and time.monotonic() < deadline:
        for p in found:
            if (p.pid, p.start) not in termed:
                signal_process(p, signal.SIGTERM)
                termed.add((p.pid, p.start))
        time.sleep(_TICK)
        if reap:
            reap_children()
        found = procs.find()
    give_up = time.monotonic() + kill_within
    while found:
        for p in found:
            signal_process(p, signal.SIGKILL)
        time.sleep(_TICK)
        if reap:
            reap_children()
        found = procs.find()
        if time.monotonic() >= give_up:
            break
    return not found


def stop_job_processes(procs: JobProcesses, sig: int) -> None:
    """Send ``sig`` to every process of the job once (a cancel's TERM, the grace's KILL)."""
    for p in procs.find():
        signal_process(p, sig)
