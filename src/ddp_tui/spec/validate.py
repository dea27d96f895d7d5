"""validate(): every problem with a spec at once, each naming its field.

First each field is held to its own description (:data:`CHECKS`, chosen by
``FieldSpec.check_name``), in declaration order; then the rules that relate fields run, each
a small function below that looks only at fields that passed their own check, so that one
bad value is reported once, by its own name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from ddp_tui.spec.checks import GENERIC_CHECKS, Check
from ddp_tui.spec.environments import ENVIRONMENT_CHECKS, ENVIRONMENT_RULES
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.experiment import FIELDS, ExperimentSpec
from ddp_tui.spec.field_checks import FIELD_CHECKS
from ddp_tui.spec.timefmt import parse_time_limit_seconds
from ddp_tui.spec.vocabulary import (
    DATASET_SHAPES,
    DATASETS_NEEDING_ROOT,
    ENTRIES,
    SYNTHETIC_DEFAULT_SHAPE,
)

#: Every check a description can name.
CHECKS: Final[Mapping[str, Check]] = {**GENERIC_CHECKS, **FIELD_CHECKS, **ENVIRONMENT_CHECKS}


class _Passed:
    """Which fields passed their own check: the cross-field rules look only at those."""

    def __init__(self, failed: set[str]) -> None:
        self._failed = failed

    def __call__(self, *names: str) -> bool:
        return not any(name in self._failed for name in names)


def _applies(spec: ExperimentSpec, applies: str) -> bool:
    """Whether a field for ``applies`` (an entry, or "" for all) counts for ``spec``: the
    trainer's own fields mean nothing to a script's run, and a form hides them then."""
    return not applies or spec.entry not in ENTRIES or spec.entry == applies


def field_errors(spec: ExperimentSpec) -> list[FieldError]:
    """Each field that applies to the spec's entry against its own description, in
    declaration order."""
    errors: list[FieldError] = []
    for name, field in FIELDS.items():
        if _applies(spec, field.applies):
            errors.extend(CHECKS[field.check_name](field, getattr(spec, name)))
    return errors


def _trainer_only(
    rule: Callable[[ExperimentSpec, _Passed], FieldError | None],
) -> Callable[[ExperimentSpec, _Passed], FieldError | None]:
    """A rule of the built-in trainer's fields, which a script's run does not use."""

    def checked(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
        return rule(s, ok) if _applies(s, "trainer") else None

    checked.__name__ = rule.__name__
    checked.__doc__ = rule.__doc__
    return checked


# -- the rules that relate fields ---------------------------------------------------------


@_trainer_only
def _data_root_required(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("dataset") and s.dataset in DATASETS_NEEDING_ROOT and s.data_root == "":
        what = (
            "a directory or file"
            if s.dataset in ("imagefolder", "tabular")
            else "the directory it is in, or to download it into with download"
        )
        return FieldError("data_root", f"is required for dataset {s.dataset} ({what})")
    return None


@_trainer_only
def _task_fits_dataset(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    # A custom dataset (pkg.module:function) may train as either.
    if ok("task", "dataset") and ":" not in s.dataset:
        wanted = "regression" if s.dataset == "tabular" else "classification"
        if s.task != wanted:
            return FieldError("task", f"dataset {s.dataset} trains as {wanted}, got {s.task!r}")
    return None


@_trainer_only
def _target_only_where_used(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if not ok("target"):
        return None
    used = not ok("dataset") or ":" in s.dataset or s.dataset == "tabular"
    if s.target and not used:
        return FieldError("target", "is only used with dataset tabular or a custom dataset")
    if not s.target and s.dataset == "tabular":
        return FieldError("target", "is required for dataset tabular (the column to predict)")
    return None


@_trainer_only
def _no_classes_in_regression(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("num_classes") and s.num_classes is not None and s.task == "regression":
        return FieldError("num_classes", "must be empty for a regression task")
    return None


@_trainer_only
def _model_takes_the_samples(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    """The trainer's build_model rules (trainer/models.py), so that a model that cannot take
    the dataset's samples is refused at submit rather than when the job starts.

    mlp flattens any sample; a pkg.module:function model, or any model on a custom dataset,
    meets the real shape only at run time."""
    if not ok("model", "dataset", "synthetic_shape"):
        return None
    if s.model == "mlp" or ":" in s.model or ":" in s.dataset:
        return None
    if s.dataset == "synthetic":
        shape = (
            tuple(int(d) for d in s.synthetic_shape.split(","))
            if s.synthetic_shape
            else SYNTHETIC_DEFAULT_SHAPE
        )
        data = f"synthetic_shape {','.join(map(str, shape))}"
    else:
        shape = DATASET_SHAPES[s.dataset]
        data = f"dataset {s.dataset}"
    if len(shape) != 3:
        if s.dataset == "synthetic":
            given, fix = "gives flat samples", ", or a C,H,W synthetic_shape"
        else:
            given, fix = "gives rows of numbers", ""
        return FieldError(
            "model",
            f"{s.model} needs C,H,W images, but {data} {given}; use mlp or "
            f"pkg.module:function{fix}",
        )
    if s.model != "simple_cnn" and shape[0] not in (1, 3):
        # torchvision models take RGB; the trainer repeats a single grey channel three times.
        return FieldError(
            "model",
            f"{s.model} needs images with 1 or 3 channels, but {data} has {shape[0]}; use "
            "mlp, simple_cnn or pkg.module:function",
        )
    return None


def _nccl_needs_cuda(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("backend", "device") and s.backend == "nccl" and s.device == "cpu":
        return FieldError("backend", "nccl needs device cuda; use gloo or auto for CPU runs")
    return None


def _gpu_type_needs_cuda(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("gpu_type", "device") and s.gpu_type and s.device == "cpu":
        return FieldError("gpu_type", "a GPU type needs device cuda")
    return None


@_trainer_only
def _trainer_needs_epochs(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    # Only a script may have none (an iteration loop): the trainer trains by epochs.
    if ok("epochs") and s.epochs is None:
        return FieldError("epochs", "is required for the trainer: a whole number from 1 to 100000")
    return None


@_trainer_only
def _warmup_below_epochs(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("warmup_epochs", "epochs") and s.epochs is not None and 0 < s.epochs <= s.warmup_epochs:
        return FieldError(
            "warmup_epochs", f"must be below epochs ({s.epochs}), got {s.warmup_epochs}"
        )
    return None


@_trainer_only
def _gpu_decode_needs_an_image_folder(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    # The trainer refuses it too (--decode): only an image folder's JPEGs are decoded.
    if ok("decode", "dataset") and s.decode == "gpu" and s.dataset != "imagefolder":
        return FieldError("decode", f"gpu is for the imagefolder dataset, not {s.dataset}")
    return None


@_trainer_only
def _fp16_needs_cuda(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("precision", "device") and s.precision == "fp16" and s.device == "cpu":
        return FieldError("precision", "fp16 needs device cuda; use bf16 or off on the CPU")
    return None


def _signal_lead_within_time_limit(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if not ok("signal_lead_sec", "time_limit"):
        return None
    seconds = parse_time_limit_seconds(s.time_limit)
    if 0 < seconds <= s.signal_lead_sec:
        return FieldError(
            "signal_lead_sec",
            f"must be shorter than the time limit ({seconds} s), got {s.signal_lead_sec}",
        )
    return None


def _script_given(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    if ok("entry", "script") and s.entry == "script" and not s.script.strip():
        return FieldError(
            "script", "is required when entry is script: a .py file, or -m package.module"
        )
    return None


def _module_in_place_needs_dir(s: ExperimentSpec, ok: _Passed) -> FieldError | None:
    # A snapshot of -m pkg.mod copies the project directory, which defaults to the one the
    # app runs from; in place there is no such default on the cluster.
    if not ok("entry", "script", "code_mode", "project_dir") or s.entry != "script":
        return None
    if s.code_mode == "in-place" and s.script_module and not s.project_dir:
        return FieldError(
            "project_dir",
            "is required to run -m package.module in place: the directory on the cluster "
            "it runs from",
        )
    return None


#: The cross-field rules, in the order of the fields they report on.
CROSS_FIELD_RULES: Final[tuple[Callable[[ExperimentSpec, _Passed], FieldError | None], ...]] = (
    _script_given,
    _module_in_place_needs_dir,
    _data_root_required,
    _task_fits_dataset,
    _target_only_where_used,
    _no_classes_in_regression,
    _model_takes_the_samples,
    _nccl_needs_cuda,
    _gpu_type_needs_cuda,
    _trainer_needs_epochs,
    _warmup_below_epochs,
    _fp16_needs_cuda,
    _gpu_decode_needs_an_image_folder,
    _signal_lead_within_time_limit,
    *ENVIRONMENT_RULES,
)


def validate(spec: ExperimentSpec) -> list[FieldError]:
    """Every problem with ``spec`` at once (empty when it can be rendered and submitted)."""
    errors = field_errors(spec)
    ok = _Passed({e.field for e in errors})
    for rule in CROSS_FIELD_RULES:
        error = rule(spec, ok)
        if error is not None:
            errors.append(error)
    return errors
