"""Command-line arguments of the trainer: parsing and validation, without importing torch.

Every problem is reported as :class:`UsageError` (or argparse's own error), both of which name the
argument and end in exit code 2.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ddp_tui.jobfiles import (
    BACKENDS,
    BUILTIN_DATASETS,
    BUILTIN_MODELS,
    DATASETS_NEEDING_ROOT,
    DECODE_MODES,
    LR_SCALINGS,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    SYNTHETIC_DEFAULT_NOISE,
    SYNTHETIC_DEFAULT_SHAPE,
)

from .errors import UsageError

_USER_CALLABLE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run is, as parsed from the command line."""

    run_dir: Path
    model: str = "simple_cnn"
    dataset: str = "synthetic"
    data_root: Path | None = None
    download: bool = False
    target: str | None = None
    num_classes: int | None = None
    synthetic_samples: int = 2048
    synthetic_val_samples: int = 512
    synthetic_shape: tuple[int, ...] = SYNTHETIC_DEFAULT_SHAPE
    synthetic_noise: float = SYNTHETIC_DEFAULT_NOISE
    image_size: int | None = None
    decode: str = "auto"
    hflip: bool = False
    epochs: int = 10
    batch_size: int = 64
    lr: float | None = None
    lr_scaling: str = "none"
    base_batch_size: int = 256
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float | None = None
    schedule: str = "cosine"
    warmup_epochs: float = 0.0
    step_size: int = 30
    gamma: float = 0.1
    precision: str = "auto"
    channels_last: bool | None = None
    compile: bool = False
    grad_accum: int = 1
    workers: int | None = None
    prefetch: int | None = None
    seed: int = 0
    backend: str = "auto"
    timeout_sec: float = 900.0
    ckpt_every_steps: int = 0
    progress_every: int = 20
    max_steps_per_epoch: int = 0
    deterministic: bool = False
    data_on_device: bool = False
    peak_tflops: float | None = None
    bucket_cap_mb: float = 25.0
    calibration_steps: int = 5

    def base_lr(self) -> float:
        """The learning rate before scaling: the given one, or the optimizer's usual default."""
        if self.lr is not None:
            return self.lr
        return 0.05 if self.optimizer == "sgd" else 1e-3

    def effective_weight_decay(self) -> float:
        """The weight decay: the given one, or the optimizer's usual default."""
        if self.weight_decay is not None:
            return self.weight_decay
        return 5e-4 if self.optimizer == "sgd" else 0.05

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (paths as strings, tuples as lists)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected C,H,W such as 1,28,28, got {text!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(
            f"expected 1 to 3 positive sizes such as 1,28,28, got {text!r}"
        )
    return dims


class _Parser(argparse.ArgumentParser):
    """argparse, but errors carry the argument name and never print a traceback."""

    def error(self, message: str) -> Any:  # argparse's signature is NoReturn; keep it simple
        self.print_usage()
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(prog: str = "ddp-train") -> argparse.ArgumentParser:
    """The trainer's argument parser (the CLI contract in CONTRACTS.md, plus a few extras)."""
    p = _Parser(prog=prog, description="Standalone PyTorch DDP trainer.", allow_abbrev=False)
    d = TrainConfig(run_dir=Path("."))
    p.add_argument("--run-dir", type=Path, required=True, help="run directory; all outputs go here")
    g = p.add_argument_group("model and data")
    g.add_argument(
        "--model",
        default=d.model,
        help=" | ".join((*BUILTIN_MODELS, "torchvision name", "pkg.mod:fn")),
    )
    g.add_argument(
        "--dataset", default=d.dataset, help=" | ".join((*BUILTIN_DATASETS, "pkg.mod:fn"))
    )
    g.add_argument("--data-root", type=Path, default=None)
    g.add_argument("--download", action="store_true", help="download once per node first")
    g.add_argument("--target", default=None, help="target column (tabular)")
    g.add_argument("--num-classes", type=int, default=None)
    g.add_argument("--synthetic-samples", type=int, default=d.synthetic_samples)
    g.add_argument("--synthetic-val-samples", type=int, default=d.synthetic_val_samples)
    g.add_argument("--synthetic-shape", type=_shape, default=d.synthetic_shape, metavar="C,H,W")
    g.add_argument(
        "--synthetic-noise",
        type=float,
        default=d.synthetic_noise,
        help="synthetic: the noise's std over the class patterns' (default %(default)g; "
        "1.5 is an easy task)",
    )
    g.add_argument("--image-size", type=int, default=None, help="imagefolder resize (default 224)")
    g.add_argument(
        "--decode",
        choices=DECODE_MODES,
        default=d.decode,
        help="imagefolder: where JPEGs are decoded; auto: the GPU on a CUDA device, else the "
        "loader workers (docs/input-pipeline.md)",
    )
    g.add_argument(
        "--hflip",
        action="store_true",
        help="imagefolder: flip half the training images each epoch (drawn from the seed)",
    )
    t = p.add_argument_group("optimisation")
    t.add_argument("--epochs", type=int, default=d.epochs)
    t.add_argument("--batch-size", type=int, default=d.batch_size, help="per process")
    t.add_argument("--lr", type=float, default=None, help="default 0.05 (sgd) or 1e-3 (adamw)")
    t.add_argument("--lr-scaling", choices=LR_SCALINGS, default=d.lr_scaling)
    t.add_argument("--base-batch-size", type=int, default=d.base_batch_size)
    t.add_argument("--optimizer", choices=OPTIMIZERS, default=d.optimizer)
    t.add_argument("--momentum", type=float, default=d.momentum)
    t.add_argument("--weight-decay", type=float, default=None, help="default 5e-4 / 0.05")
    t.add_argument("--schedule", choices=SCHEDULES, default=d.schedule)
    t.add_argument("--warmup-epochs", type=float, default=d.warmup_epochs)
    t.add_argument("--step-size", type=int, default=d.step_size, help="epochs per step decay")
    t.add_argument("--gamma", type=float, default=d.gamma)
    t.add_argument("--grad-accum", type=int, default=d.grad_accum)
    t.add_argument("--seed", type=int, default=d.seed)
    s = p.add_argument_group("speed")
    s.add_argument("--precision", choices=PRECISIONS, default=d.precision)
    s.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None)
    s.add_argument("--compile", action="store_true")
    s.add_argument(
        "--workers", type=int, default=None, help="data-loader workers (default: from the cores)"
    )
    s.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help="batches each loader worker keeps ready (default: from the memory, at most 4)",
    )
    s.add_argument("--deterministic", action="store_true", help="deterministic kernels (slower)")
    s.add_argument(
        "--data-on-device",
        action="store_true",
        help="synthetic data only: assemble each batch on the device, with no loader workers "
        "or host copies (measures the model and DDP, not the input pipeline)",
    )
    s.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU")
    r = p.add_argument_group("distributed and bookkeeping")
    r.add_argument("--backend", choices=BACKENDS, default=d.backend)
    r.add_argument("--timeout-sec", type=float, default=d.timeout_sec, help="process-group timeout")
    r.add_argument("--ckpt-every-steps", type=int, default=d.ckpt_every_steps)
    r.add_argument("--progress-every", type=int, default=d.progress_every)
    r.add_argument("--max-steps-per-epoch", type=int, default=d.max_steps_per_epoch)
    r.add_argument(
        "--bucket-cap-mb",
        type=float,
        default=d.bucket_cap_mb,
        help="DDP's gradient bucket size in MiB (default 25, DDP's own)",
    )
    r.add_argument(
        "--calibration-steps",
        type=int,
        default=d.calibration_steps,
        help="forward+backward passes without all-reduce at each start, to tell exposed "
        "communication from compute (0: off; see docs/step-breakdown.md)",
    )
    return p


def _at_least(name: str, value: float | None, low: float) -> None:
    if value is not None and value < low:
        raise UsageError(name, f"must be at least {low:g}, got {value:g}")


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise UsageError(name, f"must be greater than 0, got {value:g}")


def validate(cfg: TrainConfig) -> None:
    """Check what can be checked without torch; raises :class:`UsageError` naming the argument."""
    for name, value, low in (
        ("--epochs", cfg.epochs, 1),
        ("--batch-size", cfg.batch_size, 1),
        ("--base-batch-size", cfg.base_batch_size, 1),
        ("--grad-accum", cfg.grad_accum, 1),
        ("--synthetic-samples", cfg.synthetic_samples, 1),
        ("--synthetic-val-samples", cfg.synthetic_val_samples, 0),
        ("--num-classes", cfg.num_classes, 1),
        ("--image-size", cfg.image_size, 1),
        ("--workers", cfg.workers, 0),
        ("--prefetch", cfg.prefetch, 1),
        ("--synthetic-noise", cfg.synthetic_noise, 0),
        ("--momentum", cfg.momentum, 0),
        ("--weight-decay", cfg.weight_decay, 0),
        ("--warmup-epochs", cfg.warmup_epochs, 0),
        ("--step-size", cfg.step_size, 1),
        ("--ckpt-every-steps", cfg.ckpt_every_steps, 0),
        ("--progress-every", cfg.progress_every, 0),
        ("--max-steps-per-epoch", cfg.max_steps_per_epoch, 0),
        ("--seed", cfg.seed, 0),
        ("--calibration-steps", cfg.calibration_steps, 0),
    ):
        _at_least(name, value, low)
    for name, fvalue in (
        ("--lr", cfg.lr),
        ("--gamma", cfg.gamma),
        ("--timeout-sec", cfg.timeout_sec),
        ("--peak-tflops", cfg.peak_tflops),
        ("--bucket-cap-mb", cfg.bucket_cap_mb),
    ):
        _positive(name, fvalue)
    if not math.isfinite(cfg.bucket_cap_mb):
        raise UsageError(
            "--bucket-cap-mb", f"must be a finite size in MiB, got {cfg.bucket_cap_mb:g}"
        )
    if cfg.model not in BUILTIN_MODELS and ":" in cfg.model and not _USER_CALLABLE.match(cfg.model):
        raise UsageError("--model", f"{cfg.model!r} is not of the form package.module:function")
    if not re.match(r"^[\w.:]+$", cfg.model):
        raise UsageError("--model", f"{cfg.model!r} is not a model name")
    if cfg.dataset not in BUILTIN_DATASETS and not _USER_CALLABLE.match(cfg.dataset):
        raise UsageError(
            "--dataset",
            f"unknown dataset {cfg.dataset!r}; choose one of {', '.join(BUILTIN_DATASETS)} "
            "or package.module:function",
        )
    if cfg.dataset in DATASETS_NEEDING_ROOT and cfg.data_root is None:
        raise UsageError("--data-root", f"is required for --dataset {cfg.dataset}")
    if cfg.data_on_device and cfg.dataset != "synthetic":
        raise UsageError(
            "--data-on-device",
            f"needs --dataset synthetic, not {cfg.dataset} (real data is read on the host)",
        )
    for name, given in (("--decode gpu", cfg.decode == "gpu"), ("--hflip", cfg.hflip)):
        if given and cfg.dataset != "imagefolder":
            raise UsageError(
                name.split()[0],
                f"{name} is for --dataset imagefolder, not {cfg.dataset}",
            )
    if not math.isfinite(cfg.synthetic_noise):
        raise UsageError("--synthetic-noise", f"must be finite, got {cfg.synthetic_noise:g}")
    if cfg.dataset == "tabular" and not cfg.target:
        raise UsageError("--target", "is required for --dataset tabular (the column to predict)")
    if cfg.dataset in ("imagefolder", "tabular") and cfg.data_root and not cfg.data_root.exists():
        raise UsageError("--data-root", f"{cfg.data_root} does not exist")
    if cfg.dataset == "synthetic" and cfg.num_classes is not None and cfg.num_classes < 2:
        raise UsageError(
            "--num-classes", f"must be at least 2 for classification, got {cfg.num_classes}"
        )


def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    """Parse and validate; argparse problems exit 2, the rest raise :class:`UsageError`."""
    ns = build_parser().parse_args(argv)
    values = vars(ns)
    cfg = TrainConfig(**values)
    validate(cfg)
    return cfg
