"""The words and limits a spec is written in: the closed lists, the trainer's built-in
names and sample shapes, size limits, the patterns of the values that reach ``#SBATCH``
lines, and the sections the fields are shown in."""

from __future__ import annotations

from typing import Final

#: What a job runs: ddp-tui's built-in trainer, or the user's own torchrun-ready script.
ENTRIES: Final = ("trainer", "script")
#: Where a script's code comes from: a copy in the run directory, or the cluster as it is.
CODE_MODES: Final = ("snapshot", "in-place")
#: Whether a user's script is observed from inside its processes (ddp_tui.scriptrun.observe).
OBSERVE_MODES: Final = ("on", "off")
#: Where a script's metrics come from by name (``ddp_tui.scriptrun``'s presets, which a test
#: holds to this list); ``regex:PATTERN`` and ``csv:PATH`` are allowed besides.
METRICS_SOURCES: Final = (
    "auto",
    "helper",
    "epoch-line",
    "key-value",
    "hf-dict",
    "tqdm",
    "step-line",
    "none",
)
TASKS: Final = ("classification", "regression")
BACKENDS: Final = ("auto", "nccl", "gloo")
LAUNCHERS: Final = ("torchrun", "srun")
DEVICES: Final = ("cuda", "cpu")
LR_SCALINGS: Final = ("none", "linear")
OPTIMIZERS: Final = ("sgd", "adamw")
SCHEDULES: Final = ("none", "step", "cosine")
#: "auto": bf16 autocast on a GPU that supports it, fp32 on the CPU (the trainer decides).
PRECISIONS: Final = ("auto", "off", "bf16", "fp16")
BUILTIN_DATASETS: Final = (
    "synthetic",
    "mnist",
    "fashion_mnist",
    "cifar10",
    "cifar100",
    "imagefolder",
    "tabular",
)
#: Datasets the trainer reads from (or, with ``download``, downloads into) the data root:
#: a job without one fails at start (the trainer's ``args.DATASETS_NEEDING_ROOT``).
DATASETS_NEEDING_ROOT: Final = tuple(d for d in BUILTIN_DATASETS if d != "synthetic")
#: Models the trainer builds by name (its ``args.BUILTIN_MODELS``). Any other name is a
#: torchvision classification model, or ``pkg.module:function``.
BUILTIN_MODELS: Final = ("mlp", "simple_cnn")
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
#: The shape of a synthetic sample when ``synthetic_shape`` is empty (the trainer's default).
SYNTHETIC_DEFAULT_SHAPE: Final = (1, 28, 28)
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
