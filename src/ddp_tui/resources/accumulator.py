"""Telemetry lines in, a :class:`ResourceSummary` and plot series out.

Lines are checked against the contract (docs/architecture.md); a malformed one (a wrong
type, NaN, a missing key, a bool for a number) is skipped, never raised on: a sampler
killed mid-way or an old format must not break the Run detail screen.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ddp_tui.jobfiles import json_objects
from ddp_tui.resources.bounded import MeanAcc, MemoryAcc, SeriesAcc
from ddp_tui.resources.summary import (
    IDLE_UTIL_PCT,
    RUNNING_STATES,
    DeviceSummary,
    HostSummary,
    ResourceSummary,
    ResourceView,
    Series,
    empty_reason,
)

#: Distinct sampler notes kept (each sampler start writes a message once; bounded anyway).
MAX_NOTES: Final = 50


# The checks below raise ValueError for a line not as the contract says (not a DdpTuiError:
# it never leaves ResourceAccumulator.add, which skips the line).


def _number(line: Mapping[str, Any], key: str, *, optional: bool = False) -> float | None:
    value = line.get(key)
    if value is None:
        if optional:
            return None
        raise ValueError(key)
    # bool is an int to Python, never a measurement.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(key)
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        raise ValueError(key) from None
    if not math.isfinite(number):
        raise ValueError(key)
    return number


def _required(line: Mapping[str, Any], key: str) -> float:
    number = _number(line, key)
    assert number is not None  # _number raises for a missing required value
    return number


def _memory(line: Mapping[str, Any], key: str, *, optional: bool = False) -> float | None:
    number = _number(line, key, optional=optional)
    if number is not None and number < 0:
        raise ValueError(key)
    return number


def _integer(line: Mapping[str, Any], key: str, *, default: int | None = None) -> int | None:
    value = line.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(key)
    return value


def _text(line: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = line.get(key, default)
    if not isinstance(value, str):
        raise ValueError(key)
    return value


class _Device:
    def __init__(self, host: str, node: int, index: int) -> None:
        self.host, self.node, self.index = host, node, index
        self.name = ""
        self.ranks = ""
        self.total_mib: float | None = None
        self.memory = MemoryAcc()
        self.util = MeanAcc()
        self.power = MeanAcc()
        self.last_t: float | None = None
        self.idle_since: float | None = None
        self.attempt: str | None = None
        self.mem_series = SeriesAcc(peak=True)
        self.util_series = SeriesAcc(peak=False)

    @property
    def label(self) -> str:
        return f"{self.host} gpu{self.index}"

    def add_idle(self, t: float, util: float | None, attempt: str) -> None:
        if attempt != self.attempt:  # a new attempt: the idle run of the last one ended
            self.attempt = attempt
            self.idle_since = None
        if util is None:
            return  # not known: neither idle nor busy
        if util > IDLE_UTIL_PCT:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = t

    def summary(self) -> DeviceSummary:
        idle = 0.0
        if self.idle_since is not None and self.last_t is not None:
            idle = max(0.0, self.last_t - self.idle_since)
        return DeviceSummary(
            host=self.host,
            node=self.node,
            index=self.index,
            name=self.name,
            ranks=self.ranks,
            total_mib=self.total_mib,
            memory=self.memory.stats(),
            util_avg=self.util.mean,
            power_avg=self.power.mean,
            power_peak=self.power.peak,
            idle_sec=idle,
        )


class _Host:
    def __init__(self, host: str, node: int) -> None:
        self.host, self.node = host, node
        self.ranks = ""
        self.memory = MemoryAcc()
        self.cpu = MeanAcc()
        self.load = MeanAcc()
        self.mem_total_mib: float | None = None
        self.cpus: int | None = None
        self.mem_series = SeriesAcc(peak=True)

    def summary(self) -> HostSummary:
        return HostSummary(
            host=self.host,
            node=self.node,
            ranks=self.ranks,
            memory=self.memory.stats(),
            cpu_avg=self.cpu.mean,
            load_peak=self.load.peak,
            mem_total_mib=self.mem_total_mib,
            cpus=self.cpus,
        )


class ResourceAccumulator:
    """Bounded, incremental: feed lines in any order of files.

    Devices are told apart by (node, host, index) and nodes by (node, host): a requeued
    attempt on another host is another machine's memory, not more of the same.
    """

    def __init__(self) -> None:
        self._devices: dict[tuple[int, str, int], _Device] = {}
        self._hosts: dict[tuple[int, str], _Host] = {}
        self._notes: dict[str, None] = {}  # ordered set
        self._sources: dict[str, None] = {}
        self._attempts: dict[str, float] = {}  # attempt -> its first t
        self._util = MeanAcc()
        self._samples = 0
        self._first_t: float | None = None
        self._last_t: float | None = None

    def add(self, line: Mapping[str, Any]) -> None:
        """Take one line; a malformed one is skipped, never raised on."""
        # ValueError: a line not as the contract says (raised by the checks below);
        # TypeError/AttributeError: not a mapping at all.
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            self._add(line)

    def add_all(self, lines: Iterable[Mapping[str, Any]]) -> None:
        for line in lines:
            self.add(line)

    def _add(self, line: Mapping[str, Any]) -> None:
        t = _required(line, "t")
        kind = _text(line, "kind")
        host = _text(line, "host")
        node = _integer(line, "node")
        if node is None:
            raise ValueError("node")
        ranks = _text(line, "ranks", "")
        job = _text(line, "job", "")
        restart = _integer(line, "restart", default=0) or 0
        attempt = f"{job}.{restart}" if restart else job
        if kind == "host":
            self._add_host(line, t, host, node, ranks)
        elif kind == "gpu":
            self._add_gpu(line, t, host, node, ranks, attempt)
        elif kind == "start":
            source = _text(line, "gpu_source")
            self._sources.setdefault(f"{host}: {source}")
        elif kind == "note":
            message = _text(line, "message")
            if len(self._notes) < MAX_NOTES:
                self._notes.setdefault(f"{host}: {message}")
        else:
            raise ValueError("kind")
        if job and (attempt not in self._attempts or t < self._attempts[attempt]):
            self._attempts[attempt] = t

    def _sampled(self, t: float) -> None:
        self._samples += 1
        self._first_t = t if self._first_t is None else min(self._first_t, t)
        self._last_t = t if self._last_t is None else max(self._last_t, t)

    def _add_host(
        self, line: Mapping[str, Any], t: float, host: str, node: int, ranks: str
    ) -> None:
        rss = _memory(line, "rss_mib")
        assert rss is not None
        cpu = _number(line, "cpu_pct", optional=True)
        load = _number(line, "load1", optional=True)
        total = _memory(line, "mem_total_mib", optional=True)
        cpus = _integer(line, "cpus")
        _integer(line, "procs")  # checked, not summarised
        h = self._hosts.get((node, host))
        if h is None:
            h = self._hosts[(node, host)] = _Host(host, node)
        h.ranks = ranks or h.ranks
        h.memory.add(rss)
        h.cpu.add(cpu)
        h.load.add(load)
        h.mem_total_mib = total if total is not None else h.mem_total_mib
        h.cpus = cpus if cpus is not None else h.cpus
        h.mem_series.add(t, rss)
        self._sampled(t)

    def _add_gpu(
        self, line: Mapping[str, Any], t: float, host: str, node: int, ranks: str, attempt: str
    ) -> None:
        index = _integer(line, "index")
        if index is None:
            raise ValueError("index")
        used = _memory(line, "mem_used_mib")
        assert used is not None
        total = _memory(line, "mem_total_mib", optional=True)
        util = _number(line, "util_pct", optional=True)
        power = _number(line, "power_w", optional=True)
        name = _text(line, "name", "")
        _text(line, "uuid", "")  # checked, not summarised
        d = self._devices.get((node, host, index))
        if d is None:
            d = self._devices[(node, host, index)] = _Device(host, node, index)
        d.name = name or d.name
        d.ranks = ranks or d.ranks
        d.total_mib = total if total is not None else d.total_mib
        d.memory.add(used)
        d.util.add(util)
        d.power.add(power)
        self._util.add(util)
        d.last_t = t if d.last_t is None else max(d.last_t, t)
        d.add_idle(t, util, attempt)
        d.mem_series.add(t, used)
        if util is not None:
            d.util_series.add(t, util)
        self._sampled(t)

    def _sorted_devices(self) -> list[_Device]:
        return [self._devices[k] for k in sorted(self._devices, key=lambda k: (k[0], k[2], k[1]))]

    def _sorted_hosts(self) -> list[_Host]:
        return [self._hosts[k] for k in sorted(self._hosts)]

    def summary(self) -> ResourceSummary:
        devices = tuple(d.summary() for d in self._sorted_devices())
        hosts = tuple(h.summary() for h in self._sorted_hosts())
        gpu_peaks = [d.memory.peak for d in devices if d.memory.peak is not None]
        gpu_modes = [d.memory.mode for d in devices if d.memory.mode is not None]
        host_peaks = [h.memory.peak for h in hosts if h.memory.peak is not None]
        return ResourceSummary(
            devices=devices,
            hosts=hosts,
            notes=tuple(self._notes),
            gpu_sources=tuple(self._sources),
            samples=self._samples,
            first_t=self._first_t,
            last_t=self._last_t,
            attempts=tuple(sorted(self._attempts, key=lambda a: (self._attempts[a], a))),
            gpu_mem_peak_mib=max(gpu_peaks) if gpu_peaks else None,
            gpu_mem_mode_mib=max(gpu_modes) if gpu_modes else None,
            host_mem_peak_mib=max(host_peaks) if host_peaks else None,
            gpu_util_avg=self._util.mean,
        )

    def _origin(self) -> float:
        return self._first_t if self._first_t is not None else 0.0

    def gpu_memory_series(self) -> list[Series]:
        """One per device, labelled "<host> gpu<index>": memory used, MiB."""
        return [d.mem_series.series(d.label, self._origin()) for d in self._sorted_devices()]

    def gpu_util_series(self) -> list[Series]:
        """One per device: utilisation, % (samples without a value are left out)."""
        return [d.util_series.series(d.label, self._origin()) for d in self._sorted_devices()]

    def host_memory_series(self) -> list[Series]:
        """One per node, labelled by its host: the job's RSS, MiB."""
        return [h.mem_series.series(h.host, self._origin()) for h in self._sorted_hosts()]

    def view(self, *, telemetry_sec: int, state: str) -> ResourceView:
        """The Resources tab's view of these lines, for a run in ``state`` (a JobState value)."""
        summary = self.summary()
        return ResourceView(
            summary=summary,
            gpu_memory=tuple(self.gpu_memory_series()),
            gpu_util=tuple(self.gpu_util_series()),
            host_memory=tuple(self.host_memory_series()),
            empty_reason=empty_reason(telemetry_sec=telemetry_sec, state=state, summary=summary),
            running=state in RUNNING_STATES,
            interval_sec=telemetry_sec,
        )


def summarize_samples(lines: Iterable[Mapping[str, Any]]) -> ResourceSummary:
    """The summary of every line of a run's telemetry files (any order of files)."""
    acc = ResourceAccumulator()
    acc.add_all(lines)
    return acc.summary()


def parse_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of ``text``, one a line; blank, broken and non-object lines skipped."""
    return json_objects(text.split("\n"))
