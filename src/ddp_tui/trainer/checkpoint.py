"""``checkpoints/latest.pt``: what resuming needs, written atomically.

It holds the model (``module.state_dict()``), optimizer, scheduler and scaler states, the
position (completed epochs, steps into the next one, global step), every rank's RNG states and
every rank's partial epoch sums, so that a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import contextlib
import os
import random
from pathlib import Path
from typing import Any

import torch

from ddp_tui.jobfiles import RunWriteError, os_error_in

FORMAT_VERSION = 1


def checkpoint_path(run_dir: Path) -> Path:
    """Where the latest checkpoint lives."""
    return run_dir / "checkpoints" / "latest.pt"


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over ``path``.

    A reader (or a resumed run) therefore sees the old checkpoint or the new one, never half.
    A write that fails (a full or read-only disk) removes the temporary file, leaves the old
    checkpoint as it was, and raises :class:`RunWriteError` naming ``path``.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except Exception as exc:
        # torch.save answers ENOSPC with a RuntimeError ("unexpected pos") raised while
        # handling the OSError: the OSError is the cause to report.
        cause = os_error_in(exc)
        if cause is None:
            raise
        raise RunWriteError(path, cause) from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def load(path: Path) -> dict[str, Any] | None:
    """The checkpoint at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("version") != FORMAT_VERSION:
        raise RuntimeError(f"{path} is not a ddp-tui trainer checkpoint (version {FORMAT_VERSION})")
    return state


def rng_state(device: torch.device) -> dict[str, Any]:
    """This process's RNG states (torch CPU, CUDA device, Python)."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    """Restore what :func:`rng_state` captured."""
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    python = state.get("python")
    if python is not None:
        random.setstate((python[0], tuple(python[1]), python[2]))
