"""Rules for running out of memory: on the GPU (PyTorch's allocator) and on the host
(the kernel's OOM killer, Slurm's cgroup, the OUT_OF_MEMORY state)."""

from __future__ import annotations

import re

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make, rank_words, scheduler_evidence, state_of

# torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a ...
# (torch.cuda.OutOfMemoryError before torch 2.5); cuBLAS and cuDNN say it their way.
_CUDA_OOM = clue(
    r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory"
    r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
    "CUDA out of memory",
    "OutOfMemoryError",
    "CUDA error: out of memory",
    "_STATUS_ALLOC_FAILED",
)
_TRIED = re.compile(r"Tried to allocate ([\d.]+ [KMGT]iB)")
_GPU = re.compile(r"GPU (\d+)")
# slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks
#   have been OOM Killed.  (older: "Detected 2 oom-kill event(s) in step 3756240.batch")
# srun: error: nid001277: tasks 1-3: Out Of Memory
# kernel: "Out of memory: Killed process 1234 (python)", "Memory cgroup out of memory: ..."
_HOST_OOM = clue(
    r"Detected \d+ oom[-_]kill event"
    r"|tasks? [\d,-]+: Out Of Memory\b"
    r"|Out of memory: Kill(?:ed)? process\b"
    r"|Memory cgroup out of memory\b"
    r"|\boom-kill(?:er)?\b",
    "oom",
    "Out Of Memory",
    "Out of memory",
    "out of memory",
)
_SRUN_NODE = clue(r"srun: error: (\S+): tasks? [\d,-]+: Out Of Memory", "Out Of Memory")


def cuda_oom(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_CUDA_OOM)
    if hit is None:
        return None
    tried = _TRIED.search(hit.line.text)
    gpu = _GPU.search(hit.line.text)
    who = rank_words(hit)
    detail = ""
    if tried:
        detail = f" while allocating {tried.group(1)}"
        if gpu:
            detail += f" on GPU {gpu.group(1)}"
    return make(
        "cuda-oom",
        "CUDA out of memory",
        f"{who.capitalize() or 'A rank'} ran out of GPU memory{detail}.",
        "Lower batch_per_gpu (the global batch shrinks with it unless you add GPUs), set "
        "precision to bf16 (or fp16) to halve activation memory, or spread the work over "
        "more GPUs. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps when much memory "
        "is reserved but unallocated (fragmentation).",
        [hit],
    )


def host_oom(scan: Scan) -> Diagnosis | None:
    """The OUT_OF_MEMORY state, or an OOM-kill line from Slurm or the kernel."""
    hit = scan.find(_HOST_OOM)
    if state_of(scan) != "OUT_OF_MEMORY" and hit is None:
        return None
    node = scan.find(_SRUN_NODE)
    where = f" on {node.group(1)}" if node else ""
    return make(
        "host-oom",
        "host out of memory",
        f"The job used more host memory than it was given{where}: the kernel's OOM killer "
        "(Slurm's memory limit) killed a process.",
        "Ask for more memory (mem in the spec, e.g. 32G, or 0 for a whole node's), or use "
        "less: fewer data-loader workers, smaller batch_per_gpu, or a dataset that does not "
        "load everything into memory.",
        [hit, node, scheduler_evidence(scan) if state_of(scan) == "OUT_OF_MEMORY" else None],
    )


def host_oom_state(scan: Scan) -> Diagnosis | None:
    """OUT_OF_MEMORY: the scheduler's verdict, checked with the other states' verdicts."""
    return host_oom(scan) if state_of(scan) == "OUT_OF_MEMORY" else None
