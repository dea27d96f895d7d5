"""``make gpu-check``: everything ddp-tui does on a GPU, in one prepared run of a few minutes.

Steps, in this order (the cheap, decisive ones before ``torch.compile``'s minutes):

1. environment  the carried wheels installed; the device, driver, NCCL and the peak for MFU
2. throughput   the trainer against a plain loop (ResNet-50 bf16 channels_last, batch 256) and
                the model's ceiling with the data on the device; img/s and MFU
   input        the trainer's input pipeline against that ceiling: an ImageFolder of JPEGs made
                on the spot (GPU decode) and the host loader on synthetic data; peak host RSS
3. local job    ``ddp-tui submit --device cuda --backend nccl --gpus-per-node 1``: COMPLETED,
                verify green, NVML rows in Resources, peak memory and MFU in metrics.csv
4. run detail   the real app, headless, on that run: its tabs as SVG, the numbers checked
5. script job   a user's own DDP script (tutorial idiom) through ``--entry script``: NCCL on
                the GPU, its epochs read from its output, verify green
6. oom          a batch too big on purpose: FAILED, and ``why`` says CUDA out of memory
7. preflight    ``ddp-tui preflight`` over NCCL at world size 1, with its bandwidth table
8. flight rec.  a real flight recorder dump (NCCL on the GPU) read by ddp-tui's loader
9. compile      step 2 again with ``--compile`` on both sides

Without CUDA it says "no CUDA device", runs the same harness on the CPU (gloo, a small CNN; the
out-of-memory job only planned, compile skipped) and exits 0 when that works: CI runs it so,
which keeps it from rotting. The report is written as Markdown and JSON after every step.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import detail, environment, flight, input_pipeline, jobs, throughput
from .context import REPO, Context, OutOfTime
from .report import Report, Step

STEPS = (
    "environment",
    "throughput",
    "input_pipeline",
    "local_job",
    "run_detail",
    "script_job",
    "lightning_job",
    "oom",
    "preflight",
    "flight_recorder",
    "compile",
)
TITLES = {
    "environment": "Environment and carried packages",
    "throughput": "Trainer throughput against a plain loop",
    "input_pipeline": "The input pipeline against the device's rate",
    "local_job": "The local-scheduler path with CUDA",
    "run_detail": "Run detail of that job",
    "script_job": "A user's own DDP script on the GPU",
    "lightning_job": "A user's Lightning script (fit, then test) on the GPU",
    "oom": "A real CUDA out-of-memory error",
    "preflight": "Preflight with NCCL at world size 1",
    "flight_recorder": "A real NCCL flight recorder dump, read by ddp-tui",
    "compile": "Trainer throughput under torch.compile",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_check.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--out", type=Path, default=REPO / "gpu-check-report", help="report folder")
    p.add_argument(
        "--wheels",
        type=Path,
        default=REPO / ".gpu-wheels",
        help="wheels to carry (make gpu-wheels)",
    )
    p.add_argument("--budget-sec", type=float, default=510.0, help="stop starting work after this")
    p.add_argument("--only", default="", help=f"comma-separated steps of: {', '.join(STEPS)}")
    p.add_argument("--cpu", action="store_true", help="act as if no CUDA device were visible")
    args = p.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = [s for s in only if s not in STEPS]
    if unknown:
        p.error(f"--only: unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    args.steps = [s for s in STEPS if not only or s in only or s == "environment"]
    return args


def _cuda(forced_off: bool) -> bool:
    if forced_off:
        return False
    import torch

    return bool(torch.cuda.is_available())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    cuda = _cuda(args.cpu)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        ctx = Context(cuda=cuda, work=Path(tmp), out=args.out, deadline=start + args.budget_sec)
        ctx.out.mkdir(parents=True, exist_ok=True)
        report = Report(mode="cuda" if cuda else "cpu")
        if not cuda:
            ctx.log("no CUDA device: checking the CPU-side parts only (gloo, small sizes)")
        run_id: list[str] = []

        def environment_step(step: Step) -> None:
            report.carried = environment.run(ctx, step, args.wheels)
            report.device = environment.describe_device(cuda)
            peak = report.device.get("peak_bf16_tflops")
            ctx.peak_flops = peak * 1e12 if peak else None
            ctx.log(report.device["summary"])

        def local_job_step(step: Step) -> None:
            found = jobs.local_job(ctx, step)
            if found:
                run_id.append(found)

        def run_detail_step(step: Step) -> None:
            if not run_id:
                step.skip("no job to show (the local-job step did not submit one)")
                return
            detail.run(ctx, step, run_id[0], _peak_of(report))
            step.summary = step.summary or f"Logs, Metrics and Resources of {run_id[0]} drawn"

        def compile_step(step: Step) -> None:
            if not cuda:
                step.skip("no CUDA device: torch.compile's GPU run is not tried on the CPU")
                return
            throughput.compare(ctx, step, compiled=True)

        actions: dict[str, Callable[[Step], None]] = {
            "environment": environment_step,
            "throughput": lambda step: throughput.compare(ctx, step, compiled=False),
            "input_pipeline": lambda step: input_pipeline.check(ctx, step),
            "local_job": local_job_step,
            "run_detail": run_detail_step,
            "script_job": lambda step: jobs.script_job(ctx, step),
            "lightning_job": lambda step: jobs.lightning_job(ctx, step),
            "oom": lambda step: jobs.oom(ctx, step),
            "preflight": lambda step: jobs.preflight(ctx, step),
            "flight_recorder": lambda step: flight.run(ctx, step, run_id[0] if run_id else None),
            "compile": compile_step,
        }
        for name in args.steps:
            step = Step(name, TITLES[name])
            report.steps.append(step)
            _run_step(ctx, step, actions[name])
            report.write(ctx.out)
        (ctx.out / "gpu-check.log").write_text("\n".join(ctx.log_lines) + "\n")
    print()
    print(report.to_markdown())
    print(f"report: {ctx.out / 'gpu-check.md'} and gpu-check.json")
    return 0 if report.ok else 1


def _peak_of(report: Report) -> str:
    for step in report.steps:
        if step.name == "local_job":
            return str(step.details.get("peak GPU MiB (metrics.csv)") or "")
    return ""


def _run_step(ctx: Context, step: Step, action: Callable[[Step], None]) -> None:
    """One step, timed; whatever it raises fails it (or skips it, when the budget is spent),
    and the check goes on to the next."""
    began = time.monotonic()
    ctx.log(f"{step.name}: start ({ctx.left():.0f} s of the budget left)")
    try:
        if ctx.left() < 10:
            raise OutOfTime("the time budget is spent")
        action(step)
        step.settle()
    except OutOfTime as exc:
        step.skip(f"skipped: {exc}")
    except Exception as exc:
        step.fail(f"{type(exc).__name__}: {exc}")
        step.evidence["traceback"] = traceback.format_exc()[-3000:]
    step.seconds = time.monotonic() - began
    ctx.log(f"{step.name}: {step.status} in {step.seconds:.0f} s: {step.summary}")
