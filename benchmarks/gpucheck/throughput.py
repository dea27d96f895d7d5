"""Trainer throughput against a plain DDP loop, in one run, with the same model, batch, precision
and memory format; and the model's ceiling with no input pipeline at all.

On a GPU: ResNet-50 on synthetic 3x224x224 images, bf16 autocast, channels_last, batch 256, one
process (nccl), eager and (in its own step) under ``torch.compile``. Without CUDA the same
harness runs a small CNN on the CPU, so that it cannot rot; its numbers have no target.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from dataclasses import dataclass

import bench_trainer

from .context import Context, OutOfTime
from .report import Step, Target

MIN_RATIO = 0.97
# NVIDIA's DeepLearningExamples give 2,470 img/s for ResNet-50 on an A100 with mixed precision at
# batch 256; an H100 is expected well above that.
MIN_IMAGES_PER_SEC = 3000.0
_RUN_INDEX = itertools.count()


def config(cuda: bool) -> argparse.Namespace:
    """bench_trainer's workload for this check: one process; on a GPU 40 steps an epoch, on the
    CPU 2 epochs of 2,048 samples."""
    if cuda:
        return bench_trainer.workload(True, nproc=1, max_steps=40)
    return bench_trainer.workload(False, nproc=1, epochs=2, samples=2048)


def flops_per_sample(cfg: argparse.Namespace) -> float | None:
    """Forward + backward FLOPs of one sample, counted the way the trainer counts them for MFU."""
    from ddp_tui.trainer.models import build_model, training_flops_per_sample

    shape = tuple(int(v) for v in cfg.shape.split(","))
    return training_flops_per_sample(build_model(cfg.model, shape, cfg.classes), shape)


@dataclass
class Measured:
    label: str
    rates: list[float]  # samples/s of the measured epochs (the first, warm-up, dropped)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def _measure(
    ctx: Context, step: Step, label: str, side: str, cfg: argparse.Namespace, extra: tuple[str, ...]
) -> Measured | None:
    run = bench_trainer.run_trainer if side == "trainer" else bench_trainer.run_plain
    ctx.log(f"{step.name}: {label} ...")
    workdir = ctx.work / "bench"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        rates = run(cfg, workdir, next(_RUN_INDEX), extra, ctx.limit(300))
    except bench_trainer.RunFailed as exc:
        step.fail(f"{label}: {exc}")
        step.evidence[f"{label}: the end of its output"] = exc.tail[-3000:]
        return None
    measured = Measured(label, bench_trainer._steady(rates))
    step.details[f"{label} img/s per epoch"] = [round(r) for r in rates]
    ctx.log(f"{step.name}: {label}: {measured.median:,.0f} samples/s")
    return measured


def compare(ctx: Context, step: Step, compiled: bool) -> None:
    """The trainer against the plain loop, both on batches made on the device (the target), and
    eagerly also both through their host data loaders (for information: that measures the
    input pipeline, which on a GPU is the slower part)."""
    cfg = config(ctx.cuda)
    flops = flops_per_sample(cfg)
    tag = " (torch.compile)" if compiled else ""
    common = ("--compile",) if compiled else ()
    trainer_extra = common + (("--precision", "bf16", "--channels-last") if ctx.cuda else ())
    on_device = ("--data-on-device",)
    step.details["setup"] = (
        f"{cfg.model} {cfg.shape}, batch {cfg.batch_size}, {cfg.nproc} process ({cfg.backend}), "
        f"{'bf16 autocast, channels_last' if ctx.cuda else 'fp32'}, "
        f"{cfg.epochs} epochs of {cfg.max_steps or 'all'} steps, the first dropped as warm-up; "
        f"data made on the device, and (eager) through {cfg.workers} loader workers"
    )
    if flops:
        step.details["training FLOPs per sample"] = f"{flops / 1e9:.2f} GFLOP"
    runs = [
        (f"trainer{tag}", "trainer", trainer_extra + on_device),
        (f"plain loop{tag}", "plain", common + on_device),
    ]
    if not compiled:
        runs += [
            ("trainer, host loader", "trainer", trainer_extra),
            ("plain loop, host loader", "plain", common),
        ]
    measured: dict[str, Measured] = {}
    try:
        for label, side, extra in runs:
            m = _measure(ctx, step, label, side, cfg, extra)
            if m is not None:
                measured[label] = m
    except OutOfTime as exc:
        step.fail(f"out of time: {exc}")
    unit = "img/s" if ctx.cuda else "samples/s"
    ctx.rates.update({m.label: m.median for m in measured.values()})  # for later steps
    for m in measured.values():
        step.details[f"{m.label} median"] = f"{m.median:,.0f} {unit}"
        if flops and ctx.peak_flops:
            step.details[f"{m.label} MFU"] = f"{100 * flops * m.median / ctx.peak_flops:.1f} %"
    ours, plain = measured.get(f"trainer{tag}"), measured.get(f"plain loop{tag}")
    if ours is None or plain is None:
        return
    ratio = ours.median / plain.median
    step.summary = (
        f"data on the device: trainer{tag} {ours.median:,.0f} {unit}, plain "
        f"{plain.median:,.0f}: {ratio:.3f}x"
    )
    loader, plain_loader = (
        measured.get("trainer, host loader"),
        measured.get("plain loop, host loader"),
    )
    if loader and plain_loader:
        step.details["host loader: trainer / plain loop"] = (
            f"{loader.median / plain_loader.median:.3f}x (no target: the input pipeline)"
        )
        step.summary += f"; host loader: {loader.median:,.0f} against {plain_loader.median:,.0f}"
    if not ctx.cuda:
        step.summary += " (CPU: the harness only, no target)"
        return
    step.targets.append(Target(f"trainer / plain loop{tag}", ratio, MIN_RATIO, "x"))
    step.targets.append(
        Target(f"trainer{tag} ResNet-50 bf16", ours.median, MIN_IMAGES_PER_SEC, unit)
    )
