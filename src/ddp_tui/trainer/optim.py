"""Optimizers (SGD, AdamW) and learning-rate schedules (none, step, cosine; with warmup)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .args import TrainConfig


def scaled_lr(cfg: TrainConfig, world_size: int) -> float:
    """The learning rate, times global batch / base batch under ``--lr-scaling linear``."""
    lr = cfg.base_lr()
    if cfg.lr_scaling == "linear":
        lr *= cfg.batch_size * world_size * cfg.grad_accum / cfg.base_batch_size
    return lr


def build_optimizer(
    cfg: TrainConfig, model: nn.Module, lr: float, device: torch.device
) -> torch.optim.Optimizer:
    """SGD or AdamW; biases and norm weights (1-D tensors) get no weight decay."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() <= 1]
    groups = [
        {"params": decay, "weight_decay": cfg.effective_weight_decay()},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    if cfg.optimizer == "adamw":
        # The fused kernel is the fastest AdamW on GPUs; it does not exist for CPUs everywhere.
        return torch.optim.AdamW(groups, lr=lr, fused=device.type == "cuda" or None)
    return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum)


def lr_factor(cfg: TrainConfig, steps_per_epoch: int) -> Callable[[int], float]:
    """Multiplier of the base rate at optimizer step ``s`` (0-based), for ``LambdaLR``."""
    total = max(1, cfg.epochs * steps_per_epoch)
    warmup = round(cfg.warmup_epochs * steps_per_epoch)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if cfg.schedule == "cosine":
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        if cfg.schedule == "step":
            return cfg.gamma ** ((step // max(1, steps_per_epoch)) // cfg.step_size)
        return 1.0

    return factor


def build_scheduler(
    cfg: TrainConfig, optimizer: torch.optim.Optimizer, steps_per_epoch: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step schedule (so warmup and cosine are smooth within an epoch)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(cfg, steps_per_epoch))
