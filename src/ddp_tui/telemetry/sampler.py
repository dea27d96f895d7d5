"""The sampler's loop and its writer: every ``interval`` seconds one ``host`` line and one
``gpu`` line per device, appended to ``<run>/telemetry/node-<K>.jsonl`` in one ``os.write``
on an ``O_APPEND`` descriptor, so that a reader always sees whole lines and a requeued attempt
appends after the previous one's. Ticks are on a fixed grid (no drift; a late tick skips to the
next one). Nothing raises out of :meth:`Sampler.run`: problems become ``note`` lines, each
distinct message once per start.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddp_tui.jobfiles import TELEMETRY_DIR, format_ranks, telemetry_file

from .gpus import GpuError, GpuReading, NvmlReader, SmiReader, visible
from .lines import Origin, encode, layout_ranks, line
from .procs import MIB, ProcScanner

#: Failed writes in a row after which the sampler ends (a full or vanished file system).
WRITE_GIVE_UP = 5
#: At most this many distinct notes per start (bounded memory, bounded file).
MAX_NOTES = 50
#: The sampler ends when the job's processes, once seen, have been gone for this long.
GONE_AFTER_SEC = 30.0


@dataclass(frozen=True)
class Settings:
    run_dir: str
    interval: float
    origin: Origin
    marker: str  # the DDP_TUI_RUN_DIR value of the job's processes
    ranks_per_node: int | None = None
    nodename: str | None = None  # SLURMD_NODENAME: only processes of this node
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES


class Writer:
    """Appends whole samples to the node's file; opens it lazily, so that a directory that
    appears late (or comes back) is used. :meth:`write` never raises."""

    def __init__(self, run_dir: str, node: int) -> None:
        self.path = os.path.join(run_dir, telemetry_file(node))
        self.dir = os.path.join(run_dir, TELEMETRY_DIR)
        self.fd: int | None = None
        self.failures = 0  # in a row
        self.last_error = ""

    def write(self, data: bytes) -> bool:
        try:
            if self.fd is None:
                os.makedirs(self.dir, exist_ok=True)
                self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            written = os.write(self.fd, data)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
        except OSError as exc:
            self.failures += 1
            self.last_error = str(exc)
            self.close()  # reopen next time: the file may have been moved or its NFS mount reset
            return False
        self.failures = 0
        return True

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class Sampler:
    """One node's sampler. ``proc_root``, ``wall`` (epoch seconds for ``t``) and ``monotonic``
    are parameters so that tests can use a fake ``/proc`` or a real child process."""

    def __init__(
        self,
        settings: Settings,
        gpu: NvmlReader | SmiReader | None,
        *,
        proc_root: str = "/proc",
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.gpu = gpu
        self.wall = wall
        self.monotonic = monotonic
        self.procs = ProcScanner(
            settings.marker,
            nodename=settings.nodename,
            proc_root=proc_root,
            monotonic=monotonic,
        )
        self.proc_root = proc_root
        self.writer = Writer(settings.run_dir, settings.origin.node)
        self.ranks = layout_ranks(settings.origin.node, settings.ranks_per_node)
        self._noted: set[str] = set()
        self._pending: list[str] = []  # notes for the next write
        self._mem_total: float | None = None
        self.seen_members = False
        self.gone_since: float | None = None  # monotonic time the job's processes went

    def note(self, message: str) -> None:
        """Queue a note for the next write, once per distinct message."""
        if message not in self._noted and len(self._noted) < MAX_NOTES:
            self._noted.add(message)
            self._pending.append(message)

    def start_line(self) -> dict[str, Any]:
        source = self.gpu.source if self.gpu is not None else "none"
        return self._line(
            "start",
            self.wall(),
            interval=self.settings.interval,
            gpu_source=source,
            pid=os.getpid(),
        )

    def sample(self) -> list[dict[str, Any]]:
        """One sample's lines (host, gpus, then any new notes); never raises."""
        lines, t = [], self.wall()  # one time for the whole sample
        try:
            host = self.procs.sample()
        except Exception as exc:  # /proc missing or unreadable: still sample the GPUs
            self.note(f"cannot read {self.proc_root}: {exc}")
        else:
            if host.ranks:
                self.ranks = format_ranks(host.ranks)
            self._track_members(host.procs)
            fields: dict[str, Any] = {"rss_mib": host.rss_mib, "procs": host.procs}
            if host.cpu_pct is not None:
                fields["cpu_pct"] = host.cpu_pct
            fields.update(self._host_fields())
            lines.append(self._line("host", t, **fields))
        for gpu in self._gpus():
            lines.append(self._line("gpu", t, **_gpu_fields(gpu)))
        lines.extend(self._line("note", t, message=m) for m in self._pending)
        self._pending = []
        return lines

    def write(self, lines: list[dict[str, Any]]) -> bool:
        return self.writer.write(encode(lines))

    def gone(self) -> bool:
        """Whether the job's processes, once seen, have been gone for GONE_AFTER_SEC."""
        return self.gone_since is not None and self.monotonic() - self.gone_since >= GONE_AFTER_SEC

    def run(self, stop: Callable[[], bool], sleep: Callable[[float], None] = time.sleep) -> str:
        """Sample until ``stop()`` says so, writes keep failing or the job is gone; returns why
        it ended. ``stop`` is asked before each tick; ``sleep`` may raise to end at once."""
        pending = [self.start_line()]
        tick = self.monotonic()
        while not stop():
            pending += self.sample()
            if self.gone():
                self.note("stopped: the job's processes are gone")
                pending += [self._line("note", self.wall(), message=m) for m in self._pending]
                self.write(pending)
                return "gone"
            if self.write(pending):
                pending = []
            elif self.writer.failures >= WRITE_GIVE_UP:
                return f"writes failed {WRITE_GIVE_UP} times: {self.writer.last_error}"
            else:
                # Drop the unwritten sample (bounded memory) but keep the start line, so that
                # the file still says when this attempt started once writes work again.
                pending = [pending[0]] if pending and pending[0]["kind"] == "start" else []
            tick = _next_tick(tick, self.settings.interval, self.monotonic())
            sleep(max(0.0, tick - self.monotonic()))
        return "stopped"

    def close(self) -> None:
        """Close the file and NVML; never raises."""
        self.writer.close()
        if isinstance(self.gpu, NvmlReader):
            self.gpu.close()

    # -- the pieces of a sample ---------------------------------------------

    def _line(self, kind: str, t: float, **fields: Any) -> dict[str, Any]:
        return line(kind, t, self.settings.origin, self.ranks, **fields)

    def _track_members(self, procs: int) -> None:
        if procs:
            self.seen_members, self.gone_since = True, None
        elif self.seen_members and self.gone_since is None:
            self.gone_since = self.monotonic()

    def _host_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        with contextlib.suppress(OSError):
            fields["load1"] = round(os.getloadavg()[0], 2)
        if self._mem_total is None:
            self._mem_total = _mem_total_mib(self.proc_root)
        if self._mem_total is not None:
            fields["mem_total_mib"] = self._mem_total
        fields["cpus"] = _cpus()
        return fields

    def _gpus(self) -> list[GpuReading]:
        if self.gpu is None:
            return []
        try:
            readings = self.gpu.read()
        except GpuError as exc:
            self.note(str(exc))
            if exc.give_up:
                self.gpu = None
            return []
        except Exception as exc:  # a reader's bug must not end the sampler
            self.note(f"{self.gpu.source} failed: {exc}")
            return []
        return visible(readings, self.settings.visible_devices)


def _next_tick(tick: float, interval: float, now: float) -> float:
    """The next tick on the grid ``tick + k * interval`` after ``now`` (a slow sample skips
    ticks instead of running late ones back to back)."""
    tick += interval
    if tick <= now:
        tick += interval * (int((now - tick) / interval) + 1)
    return tick


def _gpu_fields(gpu: GpuReading) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "mem_used_mib": gpu.mem_used_mib,
        "mem_total_mib": gpu.mem_total_mib,
        "util_pct": gpu.util_pct,
        "power_w": gpu.power_w,
    }


def _mem_total_mib(proc_root: str) -> float | None:
    try:
        with open(os.path.join(proc_root, "meminfo")) as f:
            for row in f:
                if row.startswith("MemTotal:"):
                    return round(int(row.split()[1]) * 1024 / MIB, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1
