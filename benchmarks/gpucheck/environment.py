"""The first step: install the carried wheels, and say what this machine is and what it lacks.

A GPU machine lent for a few minutes has no network, and its image holds torch but not the app's
own packages (textual, paramiko, ...). ``make gpu-wheels`` downloads those beforehand, for that
machine's Python, into ``.gpu-wheels/``; here they are installed into the work directory and put
on the path of this process and of every ``ddp-tui`` it starts.
"""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .context import Context
from .report import Step

# What ddp-tui imports (the app, the cluster layer, the trainer, the sampler), and whether the
# check fails without it. pynvml is optional: without it the sampler falls back to nvidia-smi.
MODULES = (
    ("textual", True),
    ("textual_plotext", True),
    ("paramiko", True),
    ("pandas", True),
    ("jinja2", True),
    ("torch", True),
    ("torchvision", True),
    ("pynvml", False),
)


def wheel_names(wheels: Path) -> list[str]:
    """``name version`` of each wheel in the folder (from the file name, as PEP 427 writes it)."""
    names = []
    for whl in sorted(wheels.glob("*.whl")):
        parts = whl.name.split("-")
        names.append(f"{parts[0]} {parts[1]}" if len(parts) > 1 else whl.name)
    return names


class NotForThisPython(Exception):
    """The wheels were downloaded for another Python version than the one running the check."""


def install_wheels(ctx: Context, wheels: Path) -> list[str]:
    """Install the carried wheels (no network, no dependency resolution: they were resolved when
    downloaded) into the work directory; returns what was carried."""
    files = sorted(wheels.glob("*.whl"))
    if not files:
        return []
    marker = wheels / "python-version"
    made_for = marker.read_text().strip() if marker.is_file() else ""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if made_for and made_for != running:
        raise NotForThisPython(
            f"the wheels in {wheels} are for Python {made_for}, this is {running}: not carried"
        )
    site = ctx.work / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    cmd += ["--no-compile", "--disable-pip-version-check", "--target", str(site)]
    proc = subprocess.run(
        [*cmd, *map(str, files)], capture_output=True, text=True, timeout=ctx.limit(120)
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip install of the carried wheels failed:\n{proc.stderr[-2000:]}")
    ctx.site = site
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return wheel_names(wheels)


def _version(name: str) -> str | None:
    try:
        module = importlib.import_module(name)
    except Exception:
        return None
    return str(getattr(module, "__version__", "present"))


def _nvidia_smi() -> str:
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi"
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,power.limit",
             "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    return proc.stdout.strip() or proc.stderr.strip()


def describe_device(cuda: bool) -> dict[str, Any]:
    """What the report's header says of the machine."""
    import torch

    shm = shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else 0
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "dev_shm_gib": round(shm / 2**30, 1),
        "torch": torch.__version__,
        "cuda_available": cuda,
    }
    if not cuda:
        info["summary"] = f"no CUDA device (torch {torch.__version__}, {os.cpu_count()} CPUs)"
        return info
    from ddp_tui.trainer.metrics import device_peak_flops

    props = torch.cuda.get_device_properties(0)
    peak = device_peak_flops(torch.device("cuda", 0), None)
    nccl = torch.cuda.nccl.version()
    info.update(
        name=props.name,
        capability=f"{props.major}.{props.minor}",
        memory_gib=round(props.total_memory / 2**30, 1),
        multiprocessors=props.multi_processor_count,
        cuda=torch.version.cuda,
        nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
        peak_bf16_tflops=None if peak is None else peak / 1e12,
        nvidia_smi=_nvidia_smi(),
    )
    info["summary"] = (
        f"{props.name}, {info['memory_gib']} GiB, CUDA {torch.version.cuda}, torch "
        f"{torch.__version__}, NCCL {info['nccl']}, dense bf16 peak "
        + (f"{peak / 1e12:.0f} TFLOP/s" if peak else "unknown (not in the table)")
    )
    return info


def run(ctx: Context, step: Step, wheels: Path) -> list[str]:
    """The environment step; returns the carried wheels."""
    carried: list[str] = []
    try:
        carried = install_wheels(ctx, wheels)
    except NotForThisPython as exc:
        # Not a failure in itself: what ddp-tui needs may be installed here already, and the
        # imports below say whether it is.
        step.details["wheels not carried"] = str(exc)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        step.fail(str(exc))
    step.details["carried wheels"] = carried or "none (everything must already be installed)"
    missing = []
    for name, required in MODULES:
        version = _version(name)
        step.details[name] = version or "MISSING"
        if version is None and required:
            missing.append(name)
    if missing:
        step.fail("missing: " + ", ".join(missing) + " (run `make gpu-wheels` before the check)")
    ctx.write_config()
    step.summary = step.summary or (
        f"{len(carried)} wheels carried; every module ddp-tui needs imports"
    )
    return carried
