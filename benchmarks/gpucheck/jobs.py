"""The user's path, through the ``ddp-tui`` command on the embedded local scheduler: a trainer job
on the GPU (verify, Resources, Run detail), a user's own DDP script, a real CUDA out-of-memory
error and its diagnosis, and a preflight over NCCL. Without CUDA the same commands run on the CPU
with gloo; the out-of-memory job, which needs a GPU, is then only planned (``submit --dry-run``).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ddp_tui.remote.backends.states import TERMINAL_STATES

from .context import Context
from .report import FAIL, Step


def size_flags(ctx: Context) -> list[str]:
    device, backend = ("cuda", "nccl") if ctx.cuda else ("cpu", "gloo")
    return ["--device", device, "--backend", backend, "--nodes", "1", "--gpus-per-node", "1"]


def training_flags(ctx: Context) -> list[str]:
    """A few short epochs of the trainer, long enough for the sampler's 1 s samples."""
    if ctx.cuda:
        return [
            "--model", "resnet50", "--dataset", "synthetic", "--synthetic-shape", "3,224,224",
            "--num-classes", "1000", "--synthetic-samples", "12800",
            "--synthetic-val-samples", "512", "--batch-per-gpu", "128", "--epochs", "4",
            "--max-steps-per-epoch", "60", "--workers", "8", "--precision", "bf16",
        ]  # fmt: skip
    return [
        "--model", "simple_cnn", "--dataset", "synthetic", "--synthetic-samples", "2048",
        "--synthetic-val-samples", "256", "--batch-per-gpu", "64", "--epochs", "2",
        "--workers", "0",
    ]  # fmt: skip


def oom_flags() -> list[str]:
    """ResNet-50 at batch 4096 on 224x224 images: about 200 GB of activations in bf16, more
    than an H100 or H200 holds. Loader workers 0: a 2.4 GB batch never goes through /dev/shm."""
    return [
        "--model", "resnet50", "--dataset", "synthetic", "--synthetic-shape", "3,224,224",
        "--num-classes", "1000", "--synthetic-samples", "4096", "--synthetic-val-samples", "256",
        "--batch-per-gpu", "4096", "--epochs", "1", "--max-steps-per-epoch", "1",
        "--workers", "0", "--precision", "bf16", "--telemetry-sec", "0",
    ]  # fmt: skip


def submit(ctx: Context, step: Step, command: str, name: str, flags: list[str]) -> str | None:
    """``ddp-tui submit|preflight``; the run id, or None (the step then fails)."""
    proc = ctx.ddp_tui(command, "--name", name, *flags, timeout=120)
    if proc.returncode != 0:
        step.fail(f"ddp-tui {command} exited {proc.returncode}")
        step.evidence[f"ddp-tui {command}"] = proc.stdout + proc.stderr
        return None
    run_id = proc.stdout.split()[0]
    ctx.log(f"{step.name}: submitted {run_id}")
    return run_id


def submit_and_wait(
    ctx: Context, step: Step, command: str, name: str, flags: list[str], wanted: float
) -> tuple[str | None, dict[str, Any] | None]:
    """Submit, then wait up to ``wanted`` s for the end: the run id and its last ``ls`` row
    (either None when that part failed; the step says why)."""
    run_id = submit(ctx, step, command, name, flags)
    if run_id is None:
        return None, None
    return run_id, wait_for_end(ctx, step, run_id, wanted)


def run_row(ctx: Context, run_id: str) -> dict[str, Any] | None:
    proc = ctx.ddp_tui("ls", "--json")
    if proc.returncode != 0:
        return None
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return next((r for r in rows if r["run_id"] == run_id), None)


def wait_for_end(ctx: Context, step: Step, run_id: str, wanted: float) -> dict[str, Any] | None:
    """Poll ``ddp-tui ls --json`` (each call is also the local scheduler's refresh) until the
    run ends; its row, or None when it did not end in time."""
    end = time.monotonic() + ctx.limit(wanted)
    row = None
    while time.monotonic() < end:
        row = run_row(ctx, run_id)
        if row and row["state"] in {s.value for s in TERMINAL_STATES}:
            ctx.log(f"{step.name}: {run_id} {row['state']}")
            return row
        time.sleep(2)
    step.fail(f"{run_id} did not end within {wanted:g} s (last state {row and row['state']})")
    return None


def command_text(ctx: Context, *args: str) -> tuple[int, str]:
    proc = ctx.ddp_tui(*args)
    return proc.returncode, f"$ ddp-tui {' '.join(args)}\n{proc.stdout}{proc.stderr}"


def _metrics(ctx: Context, run_id: str) -> list[dict[str, str]]:
    path = ctx.runs_root / run_id / "metrics.csv"
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _completed_and_verified(ctx: Context, step: Step, run_id: str, row: dict[str, Any]) -> None:
    """An ended training run must have COMPLETED (else ``why`` is the evidence) with verify
    green (its checklist is the evidence either way)."""
    step.details["state"] = row["state"]
    step.details["epochs"] = f"{row['epochs_done']}/{row['epochs_total']}"
    if row["state"] != "COMPLETED":
        step.fail(f"ended {row['state']}")
        step.evidence["ddp-tui why"] = command_text(ctx, "why", run_id)[1]
    code, text = command_text(ctx, "verify", run_id)
    step.evidence["ddp-tui verify"] = text
    if code != 0:
        step.fail("verify is not green")


def local_job(ctx: Context, step: Step) -> str | None:
    """Submit the trainer, wait, then verify, Resources and the run's own records."""
    flags = [*size_flags(ctx), *training_flags(ctx), "--telemetry-sec", "1"]
    run_id, row = submit_and_wait(ctx, step, "submit", "gpu-check", flags, 240)
    if run_id is None or row is None:
        return run_id
    _completed_and_verified(ctx, step, run_id, row)
    step.details["throughput"] = row["throughput"]
    _check_resources(ctx, step, run_id)
    _check_records(ctx, step, run_id)
    if step.status != FAIL:
        step.summary = (
            f"{run_id}: COMPLETED, verify green, {step.details.get('GPU rows', 'no')} GPU "
            f"telemetry rows ({step.details.get('GPU sources')}), peak GPU memory "
            f"{step.details.get('peak GPU MiB (metrics.csv)', '-')} MiB"
        )
    return run_id


def _check_resources(ctx: Context, step: Step, run_id: str) -> None:
    proc = ctx.ddp_tui("resources", run_id, "--json")
    step.evidence["ddp-tui resources"] = command_text(ctx, "resources", run_id)[1]
    if proc.returncode != 0:
        step.fail(f"ddp-tui resources exited {proc.returncode}")
        return
    summary = json.loads(proc.stdout)
    step.details["GPU sources"] = summary.get("gpu_sources")
    step.details["telemetry samples"] = summary.get("samples")
    if not summary.get("hosts"):
        step.fail("no host telemetry rows")
    if not ctx.cuda:
        return
    devices = summary.get("devices") or []
    step.details["GPU rows"] = len(devices)
    if not devices:
        step.fail("no GPU telemetry rows")
    for dev in devices:
        memory = (dev.get("memory") or {}).get("peak")
        util, power = dev.get("util_avg"), dev.get("power_avg")
        if not memory or util is None or power is None:
            step.fail(f"a GPU row lacks memory, utilisation or power: {dev}")
    if not any("nvml" in str(s) for s in summary.get("gpu_sources") or []):
        step.fail("the sampler did not read NVML")


def _check_records(ctx: Context, step: Step, run_id: str) -> None:
    """metrics.csv and run.json: the numbers Run detail shows."""
    rows = _metrics(ctx, run_id)
    if not rows:
        step.fail("no metrics.csv rows")
        return
    last = rows[-1]
    step.details["last epoch"] = {
        k: last.get(k)
        for k in ("epoch", "train_loss", "throughput_samples_per_sec", "gpu_mem_peak_mib", "mfu")
    }
    peak = last.get("gpu_mem_peak_mib") or ""
    step.details["peak GPU MiB (metrics.csv)"] = peak or "-"
    run_json = json.loads((ctx.runs_root / run_id / "run.json").read_text())
    for key in ("world_size", "backend", "devices", "nccl_version", "cuda_version", "precision"):
        step.details[f"run.json {key}"] = run_json.get(key)
    if ctx.cuda:
        if not peak:
            step.fail("metrics.csv has no peak GPU memory")
        if not last.get("mfu"):
            step.fail("metrics.csv has no MFU")
        if run_json.get("backend") != "nccl" or not run_json.get("nccl_version"):
            step.fail("run.json does not say nccl")


USER_SCRIPT = Path(__file__).resolve().parent / "user_script" / "ddp_tutorial.py"


def script_job(ctx: Context, step: Step) -> None:
    """A user's own DDP script (the tutorials' idiom) through ``--entry script``: it runs on
    the GPU with NCCL, its epochs are read from its output, and verify is green."""
    epochs = 3
    ran = _script_run(ctx, step, USER_SCRIPT, "gpu-check-script", epochs, 120)
    if ran is None:
        return
    run_id, rows = ran
    if len(rows) != epochs or not all(r.get("train_loss") for r in rows):
        step.fail(f"{len(rows)} metrics.csv rows with a loss, not {epochs}")
    # The script's own word for the group it formed (run.json only repeats the spec's).
    log = command_text(ctx, "logs", run_id)[1]
    want = f"backend {'nccl' if ctx.cuda else 'gloo'} device {'cuda:0' if ctx.cuda else 'cpu'}"
    said = next((line for line in log.splitlines() if line.startswith("rank 0/")), "")
    step.details["the script says"] = said or "-"
    if want not in said:
        step.fail(f"the script did not report {want}")
    _observed(ctx, step, run_id, rows, epochs)
    if step.status != FAIL:
        step.summary = f"{run_id}: COMPLETED, {len(rows)} epochs observed, {said}"


LIGHTNING_SCRIPT = USER_SCRIPT.with_name("lightning_fit.py")


def lightning_job(ctx: Context, step: Step) -> None:
    """A Lightning script (fit, then test) with only the defaults: the observation layer finds
    its epochs (test adds none), its logged metrics and the NCCL group on the GPU."""
    probe = subprocess.run(
        [sys.executable, "-c", "import pytorch_lightning"],
        env=ctx.env(),
        capture_output=True,
        text=True,
        timeout=ctx.limit(120),
        check=False,
    )
    if probe.returncode != 0:
        step.skip("pytorch_lightning does not import here (make gpu-wheels carries it)")
        step.evidence["import pytorch_lightning"] = probe.stderr[-2000:]
        return
    epochs = 3
    ran = _script_run(ctx, step, LIGHTNING_SCRIPT, "gpu-check-lightning", epochs, 240)
    if ran is None:
        return
    run_id, rows = ran
    if not all(r.get("train_loss") and r.get("val_loss") for r in rows):
        step.fail("a row lacks Lightning's logged train_loss or val_loss")
    _observed(ctx, step, run_id, rows, epochs)
    if step.status != FAIL:
        step.summary = f"{run_id}: COMPLETED, {len(rows)} epochs observed from Lightning's hooks"


def _script_run(
    ctx: Context, step: Step, script: Path, name: str, epochs: int, wait: float
) -> tuple[str, list[dict[str, str]]] | None:
    """Submit ``script`` with only the defaults and the size; once it ended, check that it
    completed and verifies. Its run id and metrics.csv rows, or None if it never ended."""
    flags = [
        *size_flags(ctx), "--entry", "script", "--script", str(script),
        "--script-args", f"--epochs {epochs}", "--epochs", str(epochs), "--telemetry-sec", "0",
    ]  # fmt: skip
    run_id, row = submit_and_wait(ctx, step, "submit", name, flags, wait)
    if run_id is None or row is None:
        return None
    _completed_and_verified(ctx, step, run_id, row)
    return run_id, _metrics(ctx, run_id)


def _observed(
    ctx: Context, step: Step, run_id: str, rows: list[dict[str, str]], epochs: int
) -> None:
    """What the observation layer saw: one group of the right backend on the right device,
    and one row per epoch with its own time and throughput."""
    step.details["metrics.csv"] = [
        {k: r.get(k) for k in ("epoch", "train_loss", "val_loss", "epoch_time_sec",
                               "throughput_samples_per_sec")}
        for r in rows
    ]  # fmt: skip
    observed = json.loads((ctx.runs_root / run_id / "run.json").read_text()).get("observed") or {}
    step.details["run.json observed"] = {
        k: observed.get(k) for k in ("group", "reason", "backend", "devices", "frameworks", "notes")
    }
    backend, device = ("nccl", "cuda:0") if ctx.cuda else ("gloo", "cpu")
    if observed.get("group") != "formed" or observed.get("backend") != backend:
        step.fail(f"observed: {observed.get('reason')!r}, not one {backend} group")
    if observed.get("devices") != [device]:
        step.fail(f"observed devices {observed.get('devices')}, not [{device!r}]")
    if len(rows) != epochs or not all(r.get("throughput_samples_per_sec") for r in rows):
        step.fail(f"{len(rows)} metrics.csv rows with throughput, not {epochs}")


def oom(ctx: Context, step: Step) -> None:
    """A batch far too big, on purpose: the job must fail, and ``why`` must say CUDA OOM."""
    flags = [*size_flags(ctx), *oom_flags()]
    if not ctx.cuda:
        code, text = command_text(ctx, "submit", "--dry-run", "--name", "gpu-check-oom", *flags)
        if code != 0:
            step.fail("the out-of-memory job's spec was refused")
            step.evidence["ddp-tui submit --dry-run"] = text[-3000:]
        else:
            step.skip("no CUDA device: the job was planned (--dry-run), not run")
        return
    run_id, row = submit_and_wait(ctx, step, "submit", "gpu-check-oom", flags, 180)
    if run_id is None or row is None:
        return
    step.details["state"] = row["state"]
    proc = ctx.ddp_tui("why", run_id, "--json")
    step.evidence["ddp-tui why"] = command_text(ctx, "why", run_id)[1]
    step.details["why exit code"] = proc.returncode
    try:
        diagnosis = json.loads(proc.stdout)
    except json.JSONDecodeError:
        step.fail("ddp-tui why --json printed no JSON")
        return
    step.details["diagnosis"] = diagnosis.get("short")
    if proc.returncode != 1 or diagnosis.get("code") != "cuda-oom":
        step.fail(f"the diagnosis is {diagnosis.get('code')!r}, not 'cuda-oom'")
    if "evidence" not in diagnosis or not diagnosis["evidence"]:
        step.fail("the diagnosis has no evidence line")
    if row["state"] == "COMPLETED":
        step.fail("the job did not run out of memory")
    if step.status != FAIL:
        step.summary = f"{run_id}: {row['state']}, diagnosed: {diagnosis.get('short')}"


def preflight(ctx: Context, step: Step) -> None:
    """``ddp-tui preflight`` at world size 1: the backend starts, and the bandwidth table."""
    run_id, row = submit_and_wait(ctx, step, "preflight", "gpu-check", size_flags(ctx), 150)
    if run_id is None or row is None:
        return
    pf = row.get("preflight") or {}
    step.details["preflight"] = {k: pf.get(k) for k in ("ok", "backend", "bandwidth_rows", "note")}
    code, text = command_text(ctx, "verify", run_id)
    step.evidence["ddp-tui verify"] = text
    step.evidence["the bandwidth table (ddp-tui logs)"] = _table(
        command_text(ctx, "logs", run_id)[1]
    )
    want = "nccl" if ctx.cuda else "gloo"
    if row["state"] != "COMPLETED" or not pf.get("ok"):
        step.fail(f"preflight ended {row['state']}: {pf.get('error')}")
    if pf.get("backend") != want:
        step.fail(f"backend {pf.get('backend')}, not {want}")
    if not pf.get("bandwidth_rows"):
        step.fail("no bandwidth rows")
    if code != 0:
        step.fail("verify is not green")
    if step.status != FAIL:
        step.summary = f"{run_id}: {want} at world size 1, {pf.get('bandwidth_rows')} sizes"


def _table(log: str) -> str:
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("preflight ")), 0)
    return "\n".join(lines[start : start + 24])
