"""Losses and the sharded, globally reduced validation pass."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .data import CLASSIFICATION

AutocastFactory = Callable[[], AbstractContextManager[Any]]


def batch_loss(
    task: str, output: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy for classification, mean squared error for regression (in fp32)."""
    if task == CLASSIFICATION:
        return F.cross_entropy(output.float(), target, reduction=reduction)
    return F.mse_loss(output.float().reshape(-1), target.float().reshape(-1), reduction=reduction)


def to_device(
    batch: Any, device: torch.device, channels_last: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Move one (input, target) batch to ``device`` without waiting for the copy."""
    x, y = batch
    if channels_last and x.dim() == 4:
        x = x.to(device, non_blocking=True, memory_format=torch.channels_last)
    else:
        x = x.to(device, non_blocking=True)
    return x, y.to(device, non_blocking=True)


@torch.no_grad()
def evaluate_shard(
    module: nn.Module,
    loader: Any,
    device: torch.device,
    task: str,
    autocast: AutocastFactory,
    channels_last: bool,
) -> list[float]:
    """This rank's sums ``[loss, correct, count, |error|, error^2]`` over its validation shard.

    Runs the bare module (not the DDP wrapper): DDP's forward would broadcast buffers, a
    collective that uneven shard lengths would deadlock.
    """
    was_training = module.training
    module.eval()
    sums = torch.zeros(5, dtype=torch.float64, device=device)
    for batch in loader:
        x, y = to_device(batch, device, channels_last)
        with autocast():
            out = module(x)
        sums[0] += batch_loss(task, out, y, reduction="sum").double()
        sums[2] += y.shape[0]
        if task == CLASSIFICATION:
            sums[1] += (out.argmax(dim=1) == y).sum()
        else:
            err = out.float().reshape(-1) - y.float().reshape(-1)
            sums[3] += err.abs().sum().double()
            sums[4] += err.square().sum().double()
    module.train(was_training)
    return [float(v) for v in sums.tolist()]


def validation_metrics(
    sums: list[float], task: str, target_scale: float
) -> dict[str, float | None]:
    """Global validation metrics from summed ``[loss, correct, count, |err|, err^2]``."""
    loss_sum, correct, count, abs_sum, sq_sum = sums
    if count <= 0:
        return {"val_loss": None, "val_acc": None, "val_mae": None, "val_rmse": None}
    if task == CLASSIFICATION:
        return {
            "val_loss": loss_sum / count,
            "val_acc": correct / count,
            "val_mae": None,
            "val_rmse": None,
        }
    return {
        "val_loss": loss_sum / count,
        "val_acc": None,
        "val_mae": abs_sum / count * target_scale,
        "val_rmse": math.sqrt(sq_sum / count) * target_scale,
    }
