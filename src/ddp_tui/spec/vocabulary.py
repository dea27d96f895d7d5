"""The words and limits a spec is written in: the closed lists, the trainer's built-in
names and sample shapes, size limits, the patterns of the values that reach ``#SBATCH``
lines, and the sections the fields are shown in.

The trainer's names (models, datasets, the choices of its options) are ``ddp_tui.jobfiles``'s,
the one module the trainer and the spec both import; a script's metrics sources are
``ddp_tui.scriptrun``'s presets. Both are re-exported here, so the spec offers exactly what the
job side takes."""

from __future__ import annotations

from typing import Final

from ddp_tui.jobfiles import BACKENDS as BACKENDS
from ddp_tui.jobfiles import BUILTIN_DATASETS as BUILTIN_DATASETS
from ddp_tui.jobfiles import BUILTIN_MODELS as BUILTIN_MODELS
from ddp_tui.jobfiles import DATASETS_NEEDING_ROOT as DATASETS_NEEDING_ROOT
from ddp_tui.jobfiles import DECODE_MODES as DECODE_MODES
from ddp_tui.jobfiles import LR_SCALINGS as LR_SCALINGS
from ddp_tui.jobfiles import OPTIMIZERS as OPTIMIZERS
from ddp_tui.jobfiles import PRECISIONS as PRECISIONS
from ddp_tui.jobfiles import SCHEDULES as SCHEDULES
from ddp_tui.jobfiles import SYNTHETIC_DEFAULT_SHAPE as SYNTHETIC_DEFAULT_SHAPE
from ddp_tui.scriptrun.presets import METRICS_PRESETS

#: What a job runs: ddp-tui's built-in trainer, or the user's own torchrun-ready script.
ENTRIES: Final = ("trainer", "script")
#: Where a script's code comes from: a copy in the run directory, or the cluster as it is.
CODE_MODES: Final = ("snapshot", "in-place")
#: Whether a user's script is observed from inside its processes (ddp_tui.scriptrun.observe).
OBSERVE_MODES: Final = ("on", "off")
#: Where a script's metrics come from by name (``ddp_tui.scriptrun``'s presets);
#: ``regex:PATTERN`` and ``csv:PATH`` are allowed besides.
METRICS_SOURCES: Final = METRICS_PRESETS
TASKS: Final = ("classification", "regression")
LAUNCHERS: Final = ("torchrun", "srun")
DEVICES: Final = ("cuda", "cpu")
#: torchvision classifiers a form offers beside the built-in models (any other works too).
SUGGESTED_MODELS: Final = (
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
)
#: What each built-in dataset other than synthetic feeds the model (the trainer's data.py and
#: images.py): C,H,W images, or tabular's rows of numbers. -1: a size known only at run time.
DATASET_SHAPES: Final[dict[str, tuple[int, ...]]] = {
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "cifar100": (3, 32, 32),
    "imagefolder": (3, -1, -1),  # loaded as RGB, resized to --image-size
    "tabular": (-1,),
}
#: Not part of the experiment: runs named differently, or sampled for telemetry at another
#: interval, still compare.
LABEL_FIELDS: Final = ("name", "telemetry_sec")

MAX_NODES: Final = 1024
MAX_PROCS_PER_NODE: Final = 128
MAX_TIME_MIN: Final = 365 * 24 * 60

#: The groups a spec's fields are shown in, in order (the CLI's --help, Compose's form).
SECTION_ENTRY: Final = "Entry"
SECTION_TRAIN: Final = "What to train"
SECTION_SIZE: Final = "Size and launch"
SECTION_SLURM: Final = "Slurm resources"
SECTION_OPTIM: Final = "Optimisation"
SECTION_PREEMPT: Final = "Preemption"
SECTION_ENV: Final = "Environment"
FIELD_SECTIONS: Final = (
    SECTION_ENTRY,
    SECTION_TRAIN,
    SECTION_SIZE,
    SECTION_SLURM,
    SECTION_OPTIM,
    SECTION_PREEMPT,
    SECTION_ENV,
)

# Patterns of the values that end up on #SBATCH lines or in names, which cannot be quoted.
NAME_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_IDENT: Final = r"[A-Za-z_][A-Za-z0-9_]*"
MODEL_PATTERN: Final = rf"{_IDENT}(\.{_IDENT})*(:{_IDENT})?"
CALLABLE_PATTERN: Final = rf"{_IDENT}(\.{_IDENT})*:{_IDENT}"
WORD_PATTERN: Final = r"[A-Za-z0-9_.-]+"
PARTITION_PATTERN: Final = rf"{WORD_PATTERN}(,{WORD_PATTERN})*"
CONSTRAINT_PATTERN: Final = r"[A-Za-z0-9_.&|,*\[\]():!-]+"
MEM_PATTERN: Final = r"0|[1-9][0-9]{0,8}[KMGT]?"
#: Slurm's --mail-type values (sbatch(1)); a job asks for one or several, comma-separated.
MAIL_TYPES: Final = (
    "NONE",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "ALL",
    "INVALID_DEPEND",
    "STAGE_OUT",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "ARRAY_TASKS",
)
_MAIL_TYPE: Final = "(?:" + "|".join(sorted(MAIL_TYPES, key=len, reverse=True)) + ")"
MAIL_TYPE_PATTERN: Final = rf"{_MAIL_TYPE}(,{_MAIL_TYPE})*"
#: A user name or an e-mail address: nothing a #SBATCH line would have to quote.
MAIL_USER_PATTERN: Final = r"[A-Za-z0-9._%+-]+(@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)?"
SHAPE_PATTERN: Final = r"[1-9][0-9]{0,3}(,[1-9][0-9]{0,3}){0,2}"
