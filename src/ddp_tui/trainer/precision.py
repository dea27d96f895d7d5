"""Mixed precision: which one ``auto`` means on this device, and the autocast context for it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto`` is bf16 on GPUs that support it, else off."""
    if requested != "auto":
        return requested
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return "bf16"
    return "off"


def autocast_factory(
    precision: str, device: torch.device
) -> Callable[[], AbstractContextManager[Any]]:
    """A factory of autocast contexts for ``precision`` (a no-op context for ``off``)."""
    if precision == "off":
        return nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)
