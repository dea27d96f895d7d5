"""The experiment spec, a pure domain: what one run is, each field described once, and the
checks that hold a spec to its descriptions and to a cluster's partitions.

``experiment`` declares :class:`ExperimentSpec` with a :class:`FieldSpec` per field
(``fields``); ``validate`` runs the generic checks those descriptions drive (``checks``),
the named checks of the few free-form fields (``field_checks``) and then the cross-field
rules; ``cluster_fit`` checks against :class:`PartitionInfo` (``partitions``); ``form`` and
``convert`` turn form and CLI text into values and back; ``sweep`` expands a sweep over any
field into checked member specs; ``timefmt`` reads Slurm time limits;
``vocabulary`` holds the closed lists and limits. Nothing here imports ``ddp_tui.remote`` or
``ddp_tui.tui`` (see docs/architecture.md).
"""

from __future__ import annotations

from ddp_tui.spec.cluster_fit import validate_for_cluster
from ddp_tui.spec.errors import FieldError, SpecError
from ddp_tui.spec.experiment import FIELDS, SCALE_FIELDS, ExperimentSpec
from ddp_tui.spec.fields import FieldSpec
from ddp_tui.spec.form import check_form, convert_form, form_text, merge_errors, spec_from_form
from ddp_tui.spec.partitions import PartitionInfo
from ddp_tui.spec.sweep import (
    MAX_MEMBERS,
    SWEEP_MODES,
    SWEEPABLE_FIELDS,
    Sweep,
    SweepAxis,
    SweepFile,
    SweepMember,
    effective_lr,
    expand_sweep,
    load_sweep_file,
    parse_sweep_option,
    sweep_from_options,
    value_words,
    varying_fields,
)
from ddp_tui.spec.timefmt import format_time_limit, parse_time_limit, parse_time_limit_seconds
from ddp_tui.spec.validate import validate
from ddp_tui.spec.vocabulary import (
    BACKENDS,
    BUILTIN_DATASETS,
    BUILTIN_MODELS,
    DATASET_SHAPES,
    DEVICES,
    FIELD_SECTIONS,
    LAUNCHERS,
    LR_SCALINGS,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    SYNTHETIC_DEFAULT_SHAPE,
    TASKS,
)

__all__ = [
    "BACKENDS",
    "BUILTIN_DATASETS",
    "BUILTIN_MODELS",
    "DATASET_SHAPES",
    "DEVICES",
    "FIELDS",
    "FIELD_SECTIONS",
    "LAUNCHERS",
    "LR_SCALINGS",
    "MAX_MEMBERS",
    "OPTIMIZERS",
    "PRECISIONS",
    "SCALE_FIELDS",
    "SCHEDULES",
    "SWEEPABLE_FIELDS",
    "SWEEP_MODES",
    "SYNTHETIC_DEFAULT_SHAPE",
    "TASKS",
    "ExperimentSpec",
    "FieldError",
    "FieldSpec",
    "PartitionInfo",
    "SpecError",
    "Sweep",
    "SweepAxis",
    "SweepFile",
    "SweepMember",
    "check_form",
    "convert_form",
    "effective_lr",
    "expand_sweep",
    "form_text",
    "format_time_limit",
    "load_sweep_file",
    "merge_errors",
    "parse_sweep_option",
    "parse_time_limit",
    "parse_time_limit_seconds",
    "spec_from_form",
    "sweep_from_options",
    "validate",
    "validate_for_cluster",
    "value_words",
    "varying_fields",
]
