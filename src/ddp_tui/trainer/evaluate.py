"""Losses and the sharded, globally reduced validation pass."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
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


@torch.no_grad()
def evaluate_shard(
    module: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    task: str,
    autocast: AutocastFactory,
) -> list[float]:
    """This rank's sums ``[loss, correct, count, |error|, error^2]`` over its validation shard,
    from ``batches`` already on the device (:class:`.device_input.Prefetcher`).

    Runs the bare module (not the DDP wrapper): DDP's forward would broadcast buffers, a
    collective that uneven shard lengths would deadlock.
    """
    was_training = module.training
    module.eval()
    sums = torch.zeros(5, dtype=torch.float64, device=device)
    for x, y in batches:
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
