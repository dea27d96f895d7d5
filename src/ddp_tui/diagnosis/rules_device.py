"""A script that asks for CUDA where the job has none.

Many public scripts pick their device for themselves: nanoGPT puts every DDP rank on
``cuda:LOCAL_RANK``, and a torchrun-launched script often calls ``torch.cuda.set_device``
without a check. On a CPU job (the local scheduler's default, a partition with no GPUs) or with
a CPU build of torch, that ends in one of torch's own messages, which name the symptom but not
what the job ran on. The traceback's frame in the user's code is where the device is chosen.
"""

from __future__ import annotations

import os

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make, rank_words
from ddp_tui.diagnosis.tracebacks import traceback_of, user_frame

# torch's words, from torch/cuda/__init__.py's _lazy_init and c10's CUDA checks.
_NO_DRIVER = clue(
    r"Found no NVIDIA driver on your system"
    r"|No CUDA GPUs are available"
    r"|no CUDA-capable device is detected"
    r"|ProcessGroupNCCL is only supported with GPUs, no GPUs found",
    "NVIDIA driver",
    "No CUDA GPUs",
    "CUDA-capable",
    "no GPUs found",
)
_CPU_BUILD = clue(r"Torch not compiled with CUDA enabled", "not compiled with CUDA")


def cuda_unavailable(scan: Scan) -> Diagnosis | None:
    """The script wanted a GPU: the node had none, or the job's torch is a CPU build."""
    cpu_build = scan.find(_CPU_BUILD)
    hit = cpu_build or scan.find(_NO_DRIVER)
    if hit is None:
        return None
    tb = traceback_of(scan, hit.line)
    frame = user_frame(tb, scan.facts) if tb is not None else None
    who = rank_words(hit).capitalize() or "A rank"
    where = f" at {os.path.basename(frame.file)}:{frame.line}" if frame is not None else ""
    if cpu_build is not None:
        cause = (
            f"{who} asked for CUDA{where}, but the job's torch is a CPU build "
            f"({scan.facts.python or 'the job'}'s torch has no CUDA)."
        )
        advice = (
            "Point the job at a Python whose torch is built with CUDA (--python or "
            "--env-setup), or run the script on the CPU (its own device option, e.g. "
            "--device cpu, and the gloo backend)."
        )
    else:
        cause = (
            f"{who} asked for CUDA{where}, but the node it ran on has no usable GPU: the "
            "script chooses its device itself, and the job was a CPU job or landed on a node "
            "without GPUs."
        )
        advice = (
            "Submit to a partition with GPUs (--partition, --gpus-per-node) with --device "
            "cuda; or, to run on the CPU, use the script's own device option (e.g. --device "
            "cpu) and the gloo backend, where the script has one."
        )
    return make(
        "cuda-unavailable",
        "torch is a CPU build" if cpu_build is not None else "no GPU for a CUDA script",
        cause,
        advice,
        [hit, frame.src if frame is not None else None],
    )
