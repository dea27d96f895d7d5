"""The job's processes on this node, found in ``/proc``, and their memory and CPU time.

A process belongs to the job when its environment (``/proc/<pid>/environ``, as it was at exec,
inherited by forked children such as data-loader workers) has ``DDP_TUI_RUN_DIR=<run dir>``,
the same ``SLURMD_NODENAME`` as the sampler's when it has one (the test cluster runs several
nodes in one pid namespace), and not ``DDP_TUI_SAMPLER=1`` (the sampler itself). The environ is
read once per new pid; each sample reads only the members' ``stat`` files (a few ms). Caches are
pruned to live pids, so memory stays bounded however long the job runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class Membership:
    """What a process's environment says: whether it is the job's, and its ``RANK``."""

    member: bool
    rank: int | None = None


@dataclass(frozen=True)
class Stat:
    """The fields of ``/proc/<pid>/stat`` a sample needs (clock ticks and pages)."""

    cpu_ticks: int  # utime + stime
    start_ticks: int  # starttime, since boot: with the pid it names one process
    rss_pages: int


@dataclass(frozen=True)
class HostSample:
    """One sample of the job's processes; ``cpu_pct`` is None on the first."""

    procs: int
    rss_mib: float
    cpu_pct: float | None
    ranks: tuple[int, ...]


def parse_stat(text: str) -> Stat:
    """Parse ``/proc/<pid>/stat``. The command name (field 2) may hold spaces and parentheses,
    so the fields are counted from its last ``)``. Raises ValueError on a malformed line."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): field n is rest[n - 3].
    return Stat(int(rest[11]) + int(rest[12]), int(rest[19]), int(rest[21]))


def parse_environ(data: bytes, marker: str, nodename: str | None) -> Membership:
    """Whether a process with this ``environ`` (NUL-separated) is the job's, and its rank."""
    env: dict[bytes, bytes] = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in _KEYS:
            env[key] = value
    run_dir = env.get(b"DDP_TUI_RUN_DIR")
    if run_dir is None or _norm(run_dir.decode("utf-8", "replace")) != _norm(marker):
        return Membership(False)
    if env.get(b"DDP_TUI_SAMPLER") == b"1":
        return Membership(False)
    if nodename is not None and env.get(b"SLURMD_NODENAME", b"").decode() != nodename:
        return Membership(False)
    rank = env.get(b"RANK", b"").strip()
    return Membership(True, int(rank) if rank.isdigit() else None)


_KEYS = frozenset((b"DDP_TUI_RUN_DIR", b"DDP_TUI_SAMPLER", b"SLURMD_NODENAME", b"RANK"))


def _norm(path: str) -> str:
    # "/runs/x/" and "/runs/x" are one run directory.
    return os.path.normpath(path) if path else path


class ProcScanner:
    """Finds the job's processes and measures them, one :meth:`sample` per tick.

    ``proc_root`` is a parameter so that a test can point it at a fake tree; ``monotonic`` is the
    clock of the CPU share's wall time. Raises OSError only when ``proc_root`` itself cannot be
    listed; a process that exits mid-read is skipped.
    """

    def __init__(
        self,
        marker: str,
        *,
        nodename: str | None = None,
        proc_root: str = "/proc",
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.marker = marker
        self.nodename = nodename
        self.proc_root = proc_root
        self.monotonic = monotonic
        self._uid = os.getuid()
        self._own_pid = os.getpid()
        self._hz = float(os.sysconf("SC_CLK_TCK"))
        self._page_mib = os.sysconf("SC_PAGE_SIZE") / MIB
        # pid -> (start_ticks when its environ was read or None before its first stat, answer)
        self._known: dict[int, tuple[int | None, Membership]] = {}
        # (pid, start_ticks) -> cpu_ticks at the last sample, for the members only
        self._ticks: dict[tuple[int, int], int] = {}
        self._last: float | None = None  # monotonic time of the last sample
        self._last_boot: float | None = None  # seconds since boot at the last sample

    def sample(self) -> HostSample:
        now, boot = self.monotonic(), _since_boot()
        procs, rss_pages, delta = 0, 0, 0
        ranks: set[int] = set()
        ticks: dict[tuple[int, int], int] = {}
        live: set[int] = set()
        for pid, entry in self._pids():
            live.add(pid)
            membership = self._membership(pid, entry)
            if not membership.member:
                continue
            stat = self._stat(pid)
            if stat is None:
                continue
            if self._known[pid][0] not in (None, stat.start_ticks):
                # The pid was reused by another process: read its environ afresh.
                del self._known[pid]
                membership = self._membership(pid, entry)
                if not membership.member:
                    continue
            self._known[pid] = (stat.start_ticks, membership)
            key = (pid, stat.start_ticks)
            ticks[key] = stat.cpu_ticks
            delta += self._cpu_delta(key, stat)
            procs += 1
            rss_pages += stat.rss_pages
            if membership.rank is not None:
                ranks.add(membership.rank)
        self._known = {pid: v for pid, v in self._known.items() if pid in live}
        cpu_pct = None
        if self._last is not None and now > self._last:
            cpu_pct = round(100.0 * delta / self._hz / (now - self._last), 1)
        self._ticks, self._last, self._last_boot = ticks, now, boot
        return HostSample(procs, round(rss_pages * self._page_mib, 1), cpu_pct, tuple(ranks))

    def _pids(self) -> Iterator[tuple[int, os.DirEntry[str]]]:
        with os.scandir(self.proc_root) as entries:
            for entry in entries:
                if entry.name.isdigit():
                    yield int(entry.name), entry

    def _membership(self, pid: int, entry: os.DirEntry[str]) -> Membership:
        known = self._known.get(pid)
        if known is not None:
            return known[1]
        answer = Membership(False)
        if pid != self._own_pid:
            try:
                if entry.stat().st_uid == self._uid:
                    with open(os.path.join(entry.path, "environ"), "rb") as f:
                        answer = parse_environ(f.read(), self.marker, self.nodename)
            except (OSError, ValueError):
                pass  # gone, or not ours to read: not the job's
        self._known[pid] = (None, answer)
        return answer

    def _stat(self, pid: int) -> Stat | None:
        try:
            with open(os.path.join(self.proc_root, str(pid), "stat")) as f:
                return parse_stat(f.read())
        except (OSError, ValueError, IndexError):
            return None  # exited between the listing and the read

    def _cpu_delta(self, key: tuple[int, int], stat: Stat) -> int:
        """CPU ticks since the last sample. Keyed by (pid, start) so a reused pid or an exited
        process never gives a negative figure; a process started since the last sample counts
        from its start, one seen for the first time otherwise counts from now."""
        before = self._ticks.get(key)
        if before is not None:
            return max(0, stat.cpu_ticks - before)
        if self._last_boot is not None and stat.start_ticks / self._hz >= self._last_boot:
            return stat.cpu_ticks
        return 0


def _since_boot() -> float:
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):  # not Linux
        return 0.0
