"""``run.json``: who ran, where, with what; rank 0 writes it at start and updates it.

Also re-exports the per-rank :class:`Heartbeater` (``heartbeats/rank-N.json``), which every
rank writes from the training loop."""

from __future__ import annotations

import ctypes
import hashlib

import torch

from ddp_tui.jobfiles import Heartbeater, utc_now, write_json_atomic

# The record itself is written the same way for a user's script (ddp_tui.scriptrun).
from ddp_tui.jobfiles import RunRecord as RunInfo

__all__ = [
    "Heartbeater",
    "RunInfo",
    "state_dict_sha256",
    "utc_now",
    "versions",
    "write_json_atomic",
]


def versions() -> dict[str, str | None]:
    """torch, CUDA and NCCL versions (None where absent)."""
    nccl: str | None = None
    if torch.cuda.is_available():
        try:
            raw = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
            nccl = ".".join(str(v) for v in raw) if isinstance(raw, tuple) else str(raw)
        except Exception:  # NCCL not compiled in
            nccl = None
    return {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "nccl_version": nccl,
    }


def state_dict_sha256(module: torch.nn.Module) -> str:
    """A hash of every parameter and buffer, to show that all ranks hold the same weights."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        t = tensor.detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        if t.numel():
            digest.update(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    return digest.hexdigest()
