"""The trainer's input pipeline against the device's own rate (issue 37, docs/input-pipeline.md).

On a GPU: ResNet-50, bf16, channels_last, batch 256, one process. The reference is the trainer
with its batches made on the device (``--data-on-device``: no input pipeline at all; taken from
the throughput step when it ran in this check, else measured here). Against it:

- real data: an ImageFolder of :data:`GPU_IMAGES` 256x256 JPEGs made on the spot, through the
  trainer's pipeline (``--decode auto``: decoded in batches on the GPU); target >= 0.9;
- the host loader on synthetic data (uint8 batches, pinned, prefetched on a side stream);
  target >= 0.95;

and the host memory of each run's processes at its peak (the sum of their RSS, as the
Resources tab sums it, sampled every 0.2 s), with the loader sizes the trainer chose.

Without CUDA the same harness runs a small CNN on the CPU on a few JPEGs at 32x32 (no target),
so that it cannot rot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
from pathlib import Path
from typing import Any

import bench_input
import bench_trainer
from ddp_tui.telemetry.procs import ProcScanner

from .context import Context, OutOfTime
from .report import Step, Target
from .throughput import config

MIN_FOLDER_RATIO = 0.9
MIN_SYNTHETIC_RATIO = 0.95
GPU_IMAGES = 4096  # 15 steps of 256 an epoch (the 90% train split)
CPU_IMAGES = 160
#: The throughput step's label for the trainer on batches made on the device (eager).
DEVICE_LABEL = "trainer"


class PeakRss:
    """The peak of the summed RSS of a run's processes (every process whose environment names
    its run directory, as the telemetry sampler finds a job's), sampled in a thread."""

    def __init__(self, run_dir: Path, every: float = 0.2) -> None:
        self.scanner = ProcScanner(str(run_dir))
        self.every = every
        self.peak_mib = 0.0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            sample = self.scanner.sample()
            if sample.rss_mib > self.peak_mib:
                self.peak_mib, self.peak_procs = sample.rss_mib, sample.procs

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run(
    ctx: Context, step: Step, label: str, cfg: argparse.Namespace, extra: tuple[str, ...]
) -> tuple[float, dict[str, Any]] | None:
    """One trainer run, its steady img/s (the median after the warm-up epoch) and its record
    (run.json's input pipeline, the peak host RSS); None when it failed (the step then fails)."""
    workdir = ctx.work / "input"
    workdir.mkdir(parents=True, exist_ok=True)
    index = len(list(workdir.iterdir()))
    run_dir = workdir / f"trainer-{index}"
    ctx.log(f"{step.name}: {label} ...")
    try:
        with PeakRss(run_dir) as rss:
            rates = bench_trainer.run_trainer(
                cfg, workdir, index, extra, ctx.limit(300), env={"DDP_TUI_RUN_DIR": str(run_dir)}
            )
    except bench_trainer.RunFailed as exc:
        step.fail(f"{label}: {exc}")
        step.evidence[f"{label}: the end of its output"] = exc.tail[-3000:]
        return None
    steady = statistics.median(bench_trainer._steady(rates))
    info = json.loads((run_dir / "run.json").read_text())
    step.details[f"{label} img/s per epoch"] = [round(r) for r in rates]
    step.details[f"{label} host RSS at the peak"] = (
        f"{rss.peak_mib / 1024:.2f} GiB ({rss.peak_procs} processes)"
    )
    pipeline = info.get("input_pipeline") or {}
    step.details[f"{label} input pipeline"] = pipeline.get("why", "")
    ctx.log(f"{step.name}: {label}: {steady:,.0f} samples/s, peak RSS {rss.peak_mib:,.0f} MiB")
    return steady, pipeline


def check(ctx: Context, step: Step) -> None:
    """The step; the device-data rate is the throughput step's where it ran (``ctx.rates``)."""
    cfg = config(ctx.cuda)
    images = GPU_IMAGES if ctx.cuda else CPU_IMAGES
    size = "224" if ctx.cuda else "32"
    common = ("--precision", "bf16", "--channels-last") if ctx.cuda else ()
    folder = bench_input.make_jpeg_folder(ctx.work / "jpegs", images)
    step.details["setup"] = (
        f"{cfg.model}, batch {cfg.batch_size}, 1 process, "
        f"{'bf16 autocast, channels_last' if ctx.cuda else 'fp32'}; an ImageFolder of {images} "
        f"JPEGs of 256x256 at {size}x{size}; the loader sized by the trainer from "
        f"{cfg.workers} workers (given, as the throughput step's)"
    )
    folder_cfg = argparse.Namespace(**{**vars(cfg), "epochs": cfg.epochs + 1})
    folder_args = (
        *common, "--dataset", "imagefolder", "--data-root", str(folder), "--image-size", size,
        "--decode", "auto",
    )  # fmt: skip
    try:
        device = ctx.rates.get(DEVICE_LABEL)
        if device is None:
            got = _run(ctx, step, "data on the device", cfg, (*common, "--data-on-device"))
            device = got[0] if got else None
        synthetic = _run(ctx, step, "host loader, synthetic", cfg, common)
        real = _run(ctx, step, "image folder", folder_cfg, folder_args)
    except OutOfTime as exc:
        step.fail(f"out of time: {exc}")
        return
    unit = "img/s" if ctx.cuda else "samples/s"
    if device is None or synthetic is None or real is None:
        return
    step.details["data on the device median"] = f"{device:,.0f} {unit}"
    step.details["image folder decode"] = real[1].get("decode_reason", "")
    folder_ratio, synthetic_ratio = real[0] / device, synthetic[0] / device
    step.summary = (
        f"image folder {real[0]:,.0f} {unit} ({folder_ratio:.3f}x the device-data rate, "
        f"{real[1].get('decode')} decode), synthetic host loader {synthetic[0]:,.0f} "
        f"({synthetic_ratio:.3f}x), device data {device:,.0f}"
    )
    if not ctx.cuda:
        step.summary += " (CPU: the harness only, no target)"
        return
    step.targets.append(Target("image folder / device data", folder_ratio, MIN_FOLDER_RATIO, "x"))
    step.targets.append(
        Target("host loader, synthetic / device data", synthetic_ratio, MIN_SYNTHETIC_RATIO, "x")
    )
