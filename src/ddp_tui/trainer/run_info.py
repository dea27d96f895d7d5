"""``run.json``: who ran, where, with what; rank 0 writes it at start and updates it."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch


def utc_now() -> str:
    """ISO 8601 UTC time, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` in one rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


class RunInfo:
    """The in-memory ``run.json``; :meth:`update` rewrites the file."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def start(cls, path: Path, data: dict[str, Any]) -> RunInfo:
        """Write the start record; a restart keeps the first start time and counts attempts."""
        previous: dict[str, Any] = {}
        if path.is_file():
            try:
                previous = json.loads(path.read_text())
            except (OSError, ValueError):
                previous = {}
        merged = dict(data)
        if previous.get("started_at"):
            merged["started_at"] = previous["started_at"]
            merged["attempts"] = int(previous.get("attempts", 1)) + 1
        else:
            merged["attempts"] = 1
        merged["attempt_started_at"] = utc_now()
        info = cls(path, merged)
        write_json_atomic(path, merged)
        return info

    def update(self, **changes: Any) -> None:
        self.data.update(changes)
        write_json_atomic(self.path, self.data)


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
