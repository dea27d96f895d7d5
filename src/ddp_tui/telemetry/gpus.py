"""The node's GPUs: NVML when ``pynvml`` imports, else ``nvidia-smi``, else none.

Each reader's :meth:`read` returns :class:`GpuReading` s, or raises :class:`GpuError` with a
message for a ``note`` line. NVML is initialised once and its handles kept; a field NVML cannot
give (power on some boards, utilisation under MIG) is None. ``nvidia-smi`` runs once per sample
with a timeout, and is given up after :data:`SMI_GIVE_UP` failures in a row. The devices are
then narrowed to the job's by ``CUDA_VISIBLE_DEVICES`` (:func:`visible`).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SMI_QUERY = (
    "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,power.draw",
    "--format=csv,noheader,nounits",
)
SMI_TIMEOUT_SEC = 10.0
#: ``nvidia-smi`` failures in a row after which the sampler stops calling it.
SMI_GIVE_UP = 3
MIB = 1024.0 * 1024.0


class GpuError(Exception):
    """A reader could not read the devices; the message goes into a ``note`` line."""

    def __init__(self, message: str, *, give_up: bool = False) -> None:
        super().__init__(message)
        self.give_up = give_up  # the reader will not be asked again


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    mem_used_mib: float | None
    mem_total_mib: float | None
    util_pct: float | None
    power_w: float | None


def _number(cell: str) -> float | None:
    """A CSV cell as a float; ``[N/A]``, ``[Not Supported]`` and the like are None."""
    try:
        return float(cell.strip())
    except ValueError:
        return None


def parse_smi_csv(text: str) -> list[GpuReading]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``; lines that do not
    have the seven cells or an integer index are skipped."""
    readings = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) != 7 or not row[0].strip().isdigit():
            continue
        used, total, util, power = (_number(c) for c in row[3:])
        readings.append(
            GpuReading(int(row[0]), row[1].strip(), row[2].strip(), used, total, util, power)
        )
    return readings


class SmiReader:
    """``nvidia-smi`` once per sample. ``run`` (a test's fake) takes the argv and the timeout
    and returns stdout, raising OSError or subprocess errors on failure."""

    source = "nvidia-smi"

    def __init__(self, executable: str, run: Callable[[Sequence[str], float], str] | None = None):
        self.argv = (executable, *SMI_QUERY)
        self.run = run or _run
        self.failures = 0

    def read(self) -> list[GpuReading]:
        try:
            readings = parse_smi_csv(self.run(self.argv, SMI_TIMEOUT_SEC))
        except (OSError, subprocess.SubprocessError, UnicodeDecodeError) as exc:
            self.failures += 1
            give_up = self.failures >= SMI_GIVE_UP
            suffix = f" ({self.failures} times in a row; no more GPU samples)" if give_up else ""
            raise GpuError(f"nvidia-smi failed: {_brief(exc)}{suffix}", give_up=give_up) from exc
        self.failures = 0
        return readings


def _run(argv: Sequence[str], timeout: float) -> str:
    done = subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=True,
    )
    return done.stdout.decode("utf-8")


def _brief(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        err = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return f"exit {exc.returncode}" + (f": {err[-1][:200]}" if err else "")
    return str(exc)[:200] or type(exc).__name__


class NvmlReader:
    """NVML through ``pynvml`` (or a test's fake module with the same functions): initialised
    once, the handles, UUIDs and names kept; each field that raises is None."""

    source = "nvml"

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.devices = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = _text(_field(nvml.nvmlDeviceGetUUID, handle)) or ""
            name = _text(_field(nvml.nvmlDeviceGetName, handle)) or ""
            self.devices.append((i, handle, uuid, name))

    def read(self) -> list[GpuReading]:
        nvml, readings = self.nvml, []
        for index, handle, uuid, name in self.devices:
            mem = _field(nvml.nvmlDeviceGetMemoryInfo, handle)
            util = _field(nvml.nvmlDeviceGetUtilizationRates, handle)
            power_mw = _field(nvml.nvmlDeviceGetPowerUsage, handle)
            readings.append(
                GpuReading(
                    index,
                    uuid,
                    name,
                    round(mem.used / MIB, 1) if mem is not None else None,
                    round(mem.total / MIB, 1) if mem is not None else None,
                    float(util.gpu) if util is not None else None,
                    round(power_mw / 1000.0, 1) if power_mw is not None else None,
                )
            )
        return readings

    def close(self) -> None:
        _field(self.nvml.nvmlShutdown)


def _field(get: Callable[..., Any], *args: Any) -> Any:
    # pynvml raises its own NVMLError (an Exception) per call: one field is lost, not the line.
    try:
        return get(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):  # older pynvml returns bytes
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def open_reader(
    nvml: Any = None, smi_path: str | None = None
) -> tuple[NvmlReader | SmiReader | None, str | None]:
    """The best reader this node has, and a note when NVML was there but would not start.
    ``nvml``: a module to use instead of importing ``pynvml``; ``smi_path``: ``nvidia-smi``'s
    path instead of looking it up on PATH."""
    note = None
    if nvml is None:
        nvml = _import_pynvml()
    if nvml is not None:
        try:
            return NvmlReader(nvml), None
        except Exception as exc:
            note = f"NVML would not start: {_brief(exc)}"
    executable = smi_path or shutil.which("nvidia-smi")
    if executable:
        return SmiReader(executable), note
    return None, note


def _import_pynvml() -> Any:
    try:
        import pynvml  # the job's environment may have it; the sampler needs none

        return pynvml
    except Exception:  # not installed, or broken: no NVML
        return None


def visible(readings: Sequence[GpuReading], devices: str | None) -> list[GpuReading]:
    """The devices ``CUDA_VISIBLE_DEVICES`` leaves the job. Unset: all. UUIDs (or their
    prefixes, ``GPU-...``/``MIG-...``) select by UUID; integers select by index only when more
    devices are listed here than there, since under cgroup device limits (Slurm's
    ConstrainDevices) the node shows only the job's devices, renumbered. An empty value or
    ``-1`` hides them all, as it does from CUDA."""
    if devices is None:
        return list(readings)
    tokens = [t.strip() for t in devices.split(",") if t.strip()]
    indexes = {int(t) for t in tokens if t.isdigit()}
    uuids = [t for t in tokens if not t.lstrip("-").isdigit()]
    if indexes and not uuids and len(readings) <= len(indexes):
        return list(readings)
    return [r for r in readings if r.index in indexes or any(r.uuid.startswith(u) for u in uuids)]
