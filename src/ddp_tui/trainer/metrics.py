"""Per-epoch metrics (metrics.csv), step progress (progress.jsonl) and the samplers behind them:
CPU utilisation from /proc, GPU utilisation from NVML (through torch), and device peaks for MFU.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ddp_tui.jobfiles import METRICS_COLUMNS, RunWriteError, csv_cell, json_objects, writing

COLUMNS = METRICS_COLUMNS

# Dense bf16/fp16 tensor-core peaks (TFLOP/s), matched against torch.cuda.get_device_name().
# Longest names first so that "H100 PCIe" wins over "H100".
_PEAK_TFLOPS = (
    ("GH200", 989.0),
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("H800", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("A40", 150.0),
    ("A30", 165.0),
    ("A10", 125.0),
    ("L4", 121.0),
    ("V100", 125.0),
    ("RTX 4090", 165.0),
    ("RTX 3090", 71.0),
    ("T4", 65.0),
)


def device_peak_flops(device: torch.device, override_tflops: float | None) -> float | None:
    """Peak FLOP/s of one device for MFU, or None when unknown (CPUs, unlisted GPUs)."""
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in _PEAK_TFLOPS:
        if key in name:
            return tflops * 1e12
    return None


class MetricsCsv:
    """``metrics.csv``: one row per epoch, appended and flushed by rank 0. A failed write
    raises :class:`~ddp_tui.jobfiles.RunWriteError`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self, epochs_completed: int) -> None:
        """Start the file, keeping only rows of epochs a checkpoint covers (1..epochs_completed).

        Rows past the checkpoint come from an attempt that was cut short; the epochs are run
        again, so keeping the rows would list an epoch twice.
        """
        kept: list[dict[str, str]] = []
        if epochs_completed > 0 and self.path.exists():
            with self.path.open(newline="") as fh:
                for row in csv.DictReader(fh):
                    try:
                        epoch = int(row.get("epoch") or 0)
                    except ValueError:
                        continue
                    if 1 <= epoch <= epochs_completed:
                        kept.append(row)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        seen: set[str] = set()
        for row in kept:
            if row["epoch"] not in seen:
                seen.add(row["epoch"])
                writer.writerow(row)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with writing(self.path):
                tmp.write_text(buf.getvalue())
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one epoch's row and flush it to disk."""
        line = ",".join(csv_cell(row.get(col)) for col in COLUMNS) + "\n"
        with writing(self.path), self.path.open("a") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


class StepTimesLog:
    """``step_times.jsonl``: rank 0 appends one line per epoch, every rank's step times
    (docs/step-breakdown.md). A failed write raises :class:`~ddp_tui.jobfiles.RunWriteError`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self, epochs_completed: int) -> None:
        """Keep only the lines of epochs a checkpoint covers, as :meth:`MetricsCsv.prepare`."""
        kept: dict[int, str] = {}
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            raise RunWriteError(self.path, exc) from exc
        for record in json_objects(lines):
            epoch = record.get("epoch")
            if isinstance(epoch, int) and 1 <= epoch <= epochs_completed:
                kept.setdefault(epoch, json.dumps(record) + "\n")
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with writing(self.path):
                tmp.write_text("".join(kept[e] for e in sorted(kept)))
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def append(self, epoch: int, ranks: Sequence[Mapping[str, Any]]) -> None:
        """Append one epoch's line and flush it to disk."""
        line = json.dumps({"epoch": epoch, "ranks": list(ranks)}) + "\n"
        with writing(self.path), self.path.open("a") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


class ProgressLog:
    """``progress.jsonl``: rank 0's progress every few steps. A failed write raises
    :class:`~ddp_tui.jobfiles.RunWriteError`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with writing(path):
            self._fh = path.open("a")

    def write(self, epoch: int, step: int, steps_per_epoch: int, loss: float, rate: float) -> None:
        record = {
            "time": time.time(),
            "epoch": epoch,
            "step": step,
            "steps_per_epoch": steps_per_epoch,
            "loss": loss,
            "samples_per_sec": rate,
        }
        with writing(self.path):
            self._fh.write(json.dumps(record) + "\n")
            self._fh.flush()

    def close(self) -> None:
        with writing(self.path):
            self._fh.close()


class CpuUtilisation:
    """Busy share (percent) of the CPUs this process may run on, from ``/proc/stat``."""

    def __init__(self) -> None:
        try:
            self._cpus = {f"cpu{i}" for i in os.sched_getaffinity(0)}
        except (AttributeError, OSError):
            self._cpus = set()
        self._start = self._read()

    def _read(self) -> tuple[int, int] | None:
        try:
            lines = Path("/proc/stat").read_text().splitlines()
        except OSError:
            return None
        busy = total = 0
        for line in lines:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            if self._cpus and name not in self._cpus:
                continue
            values = [int(v) for v in fields]
            idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
            total += sum(values[:8])  # guest time is already counted in user
            busy += sum(values[:8]) - idle
        return busy, total

    def restart(self) -> None:
        self._start = self._read()

    def percent(self) -> float | None:
        """Utilisation since the last :meth:`restart`."""
        end = self._read()
        if end is None or self._start is None or end[1] <= self._start[1]:
            return None
        return 100.0 * (end[0] - self._start[0]) / (end[1] - self._start[1])


class GpuUtilisation:
    """Average GPU utilisation (NVML, via torch) sampled by a background thread every second."""

    def __init__(self, device: torch.device, interval: float = 1.0) -> None:
        self._device = device
        self._interval = interval
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = False
        if device.type == "cuda":
            try:
                torch.cuda.utilization(device)
                self.available = True
            except Exception:  # pynvml missing or NVML unusable: leave the column empty
                self.available = False

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            # A transient NVML failure costs one sample, not the run.
            with contextlib.suppress(Exception):
                self._samples.append(float(torch.cuda.utilization(self._device)))

    def restart(self) -> None:
        self.stop()
        self._samples = []
        if self.available:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="gpu-util", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None

    def average(self) -> float | None:
        return sum(self._samples) / len(self._samples) if self._samples else None
