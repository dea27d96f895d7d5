"""The ``metrics.csv`` contract columns (``ddp_tui.jobfiles``) and the names scripts use
for them."""

from __future__ import annotations

import re

from ddp_tui.jobfiles import EXIT_REQUEUE, METRICS_COLUMNS

__all__ = ["EXIT_REQUEUE"]

# The contract's columns and requeue code: one definition, shared with the trainer.
COLUMNS = METRICS_COLUMNS

#: Columns whose values are fractions: a ``%`` suffix or a value above 1 is divided by 100.
ACCURACY_COLUMNS = frozenset({"train_acc", "val_acc"})

#: A field that is not a column but gives the epoch's sample count (for throughput).
SAMPLES = "samples"

# What scripts call the contract's columns (normalised: lower case, words joined by "_").
ALIASES: dict[str, str] = {
    "loss": "train_loss",
    "training_loss": "train_loss",
    "avg_loss": "train_loss",
    "average_loss": "train_loss",
    "mean_loss": "train_loss",
    "train_avg_loss": "train_loss",
    "acc": "train_acc",
    "accuracy": "train_acc",
    "train_accuracy": "train_acc",
    "training_accuracy": "train_acc",
    "top1": "train_acc",
    "train_top1": "train_acc",
    "eval_top1": "val_acc",  # timm's summary.csv
    "val_top1": "val_acc",
    "test_top1": "val_acc",
    "valid_loss": "val_loss",
    "validation_loss": "val_loss",
    "eval_loss": "val_loss",
    "test_loss": "val_loss",
    "val_accuracy": "val_acc",
    "valid_acc": "val_acc",
    "valid_accuracy": "val_acc",
    "validation_acc": "val_acc",
    "validation_accuracy": "val_acc",
    "eval_acc": "val_acc",
    "eval_accuracy": "val_acc",
    "test_acc": "val_acc",
    "test_accuracy": "val_acc",
    "eval_mae": "val_mae",
    "test_mae": "val_mae",
    "eval_rmse": "val_rmse",
    "test_rmse": "val_rmse",
    "learning_rate": "lr",
    "epoch_time": "epoch_time_sec",
    "epoch_time_s": "epoch_time_sec",
    "throughput": "throughput_samples_per_sec",
    "samples_per_sec": "throughput_samples_per_sec",
    "samples_per_second": "throughput_samples_per_sec",
    "samples_s": "throughput_samples_per_sec",
    "tokens_s": "tokens_per_sec",
    "tok_s": "tokens_per_sec",
    "tokens_per_second": "tokens_per_sec",
    "tokens_sec": "tokens_per_sec",
    "num_samples": SAMPLES,
    "n_samples": SAMPLES,
}

_CONTRACT = frozenset(COLUMNS)
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise(name: str) -> str:
    """``"Val Loss"`` -> ``"val_loss"``, ``"train/acc"`` -> ``"train_acc"``."""
    return _NON_WORD.sub("_", name.strip().lower()).strip("_")


def canonical(name: str) -> str | None:
    """The contract column (or ``"samples"``) a script's name stands for, or None if unknown.

    ``epoch`` itself is not a metric and yields None; callers read it separately.
    """
    key = normalise(name)
    if key == "epoch":
        return None
    if key in _CONTRACT or key == SAMPLES:
        return key
    return ALIASES.get(key)


def is_contract_column(name: str) -> bool:
    return name in _CONTRACT
