"""ExperimentSpec: everything one run is, and validation whose errors name their field.

The spec is the single input to the sbatch templates. Values that end up on ``#SBATCH``
lines cannot be quoted there, so :func:`validate` holds them to strict patterns; every
other value is shell-quoted by the templates. ``env_setup`` lines are the user's own shell
code (``module load ...``) and run verbatim, with the same rights as the user who wrote
them; validation only keeps them from breaking the rest of the script by accident.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from ddp_tui.remote.scheduler import PartitionInfo

__all__ = [
    "BACKENDS",
    "BUILTIN_DATASETS",
    "BUILTIN_MODELS",
    "DEVICES",
    "FIELDS",
    "FIELD_SECTIONS",
    "LAUNCHERS",
    "SCALE_FIELDS",
    "SYNTHETIC_DEFAULT_SHAPE",
    "ExperimentSpec",
    "FieldError",
    "FieldSpec",
    "SpecError",
    "form_text",
    "format_time_limit",
    "parse_time_limit",
    "parse_time_limit_seconds",
    "spec_from_form",
    "validate",
    "validate_for_cluster",
]

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
#: Models the trainer builds by name (its ``args.BUILTIN_MODELS``). Any other name is a
#: torchvision classification model, or ``pkg.module:function``.
BUILTIN_MODELS: Final = ("mlp", "simple_cnn")
#: The shape of a synthetic sample when ``synthetic_shape`` is empty (the trainer's default).
SYNTHETIC_DEFAULT_SHAPE: Final = (1, 28, 28)
#: What each built-in dataset other than synthetic feeds the model (the trainer's data.py and
#: images.py): C,H,W images, or tabular's rows of numbers. -1: a size known only at run time.
_DATASET_SHAPES: Final[dict[str, tuple[int, ...]]] = {
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "cifar100": (3, 32, 32),
    "imagefolder": (3, -1, -1),  # loaded as RGB, resized to --image-size
    "tabular": (-1,),
}
#: A label, not part of the experiment: runs named differently still compare.
_LABEL_FIELDS: Final = ("name",)

MAX_NODES: Final = 1024
MAX_PROCS_PER_NODE: Final = 128
MAX_TIME_MIN: Final = 365 * 24 * 60

#: The groups a spec's fields are shown in, in order (the CLI's --help, Compose's form).
SECTION_TRAIN: Final = "What to train"
SECTION_SIZE: Final = "Size and launch"
SECTION_SLURM: Final = "Slurm resources"
SECTION_OPTIM: Final = "Optimisation"
SECTION_PREEMPT: Final = "Preemption"
SECTION_ENV: Final = "Environment"
FIELD_SECTIONS: Final = (
    SECTION_TRAIN,
    SECTION_SIZE,
    SECTION_SLURM,
    SECTION_OPTIM,
    SECTION_PREEMPT,
    SECTION_ENV,
)

_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_IDENT: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_MODEL_RE: Final = re.compile(rf"{_IDENT}(\.{_IDENT})*(:{_IDENT})?")
_CALLABLE_RE: Final = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}")
_SLURM_WORD: Final = r"[A-Za-z0-9_.-]+"
_PARTITION_RE: Final = re.compile(rf"{_SLURM_WORD}(,{_SLURM_WORD})*")
_WORD_RE: Final = re.compile(_SLURM_WORD)
_CONSTRAINT_RE: Final = re.compile(r"[A-Za-z0-9_.&|,*\[\]():!-]+")
_MEM_RE: Final = re.compile(r"0|[1-9][0-9]{0,8}[KMGT]?")
_SHAPE_RE: Final = re.compile(r"[1-9][0-9]{0,3}(,[1-9][0-9]{0,3}){0,2}")
_ENV_NAME_RE: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
# The value is a whitelist: #SBATCH lines cannot be quoted, and sbatch itself strips quotes.
_EXTRA_SBATCH_RE: Final = re.compile(
    r"--([a-z][a-z0-9-]{0,63})(=[A-Za-z0-9_.,:/=+@%*!&|\[\]^~-]+)?"
)
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_NO_TAB_RE: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_HEREDOC_RE: Final = re.compile(r"(?<!<)<<(?!<)")
_TIME_HELP: Final = "use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 02:00:00)"

#: sbatch options the spec (or the app) sets itself. An extra option may not name one of these,
#: nor abbreviate one: sbatch's getopt_long accepts unambiguous prefixes such as ``--out``.
_RESERVED_SBATCH: Final = frozenset(
    {
        "account",
        "array",
        "chdir",
        "constraint",
        "cpus-per-gpu",
        "cpus-per-task",
        "error",
        "gpus",
        "gpus-per-node",
        "gpus-per-socket",
        "gpus-per-task",
        "gres",
        "job-name",
        "mem",
        "mem-per-cpu",
        "mem-per-gpu",
        "nodes",
        "no-requeue",
        "ntasks",
        "ntasks-per-gpu",
        "ntasks-per-node",
        "open-mode",
        "output",
        "parsable",
        "partition",
        "qos",
        "requeue",
        "signal",
        "test-only",
        "time",
        "wrap",
    }
)
#: Variables the job script sets or relies on; ``nccl_env`` may not override them.
_RESERVED_ENV: Final = frozenset(
    {
        "BASH_ENV",
        "CDPATH",
        "ENV",
        "GLOBIGNORE",
        "HEAD",
        "HOME",
        "IFS",
        "JOB_ID",
        "LAUNCHER_PID",
        "MASTER_ADDR",
        "MASTER_PORT",
        "PATH",
        "PORT",
        "PS4",
        "PYTHON",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "RUN_DIR",
        "SHELLOPTS",
        "BASHOPTS",
        "STATUS",
    }
)


@dataclass(frozen=True)
class FieldError:
    """One problem with one field: ``message`` says what is allowed and what was given."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SpecError(ValueError):
    """A spec that cannot be used; ``errors`` lists every problem."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid spec")


@dataclass(frozen=True)
class FieldSpec:
    """One ExperimentSpec field, described once: its kind, default, allowed values, unit, help
    text, form section and whether it sets the run's size.

    Each field of :class:`ExperimentSpec` carries its description (``_doc``); :data:`FIELDS`
    completes them with the name and kind. The CLI's ``--help`` is generated from them, and
    Compose's form and the validation messages can be too, so the three cannot drift apart.
    """

    name: str
    #: How the value is typed: bool, int, optint, float, optfloat, str, strlist or env.
    kind: str
    default: Any
    section: str
    #: A short name for a form's label.
    label: str
    #: What the field is, in a phrase.
    help: str
    #: The allowed values, for fields that take one of a list (the lists validate() checks).
    choices: tuple[str, ...] = ()
    #: What else is allowed besides ``choices``, in words (model, dataset).
    others: tuple[str, ...] = ()
    unit: str = ""
    #: What an empty value stands for, where the field may be empty (``the cluster's default``).
    empty: str = ""
    #: How a value is written, as a placeholder (``HH:MM:SS``); empty: from the kind.
    syntax: str = ""
    #: Sets the run's size: runs differing only in these fields compare as one group.
    scale: bool = False

    @property
    def allowed(self) -> str:
        """``auto, nccl or gloo``; empty for fields that take free values."""
        items = (*self.choices, *self.others)
        if len(items) < 2:
            return "".join(items)
        return f"{', '.join(items[:-1])} or {items[-1]}"

    @property
    def default_text(self) -> str:
        """The default as a form or the CLI would give it (empty for none)."""
        return form_text(self.name, self.default)

    @property
    def placeholder(self) -> str:
        """How a value is written: ``syntax``, else a word for the kind."""
        return self.syntax or _KIND_SYNTAX[self.kind]


_DOC: Final = "ddp_tui.field"
_KIND_SYNTAX: Final = {
    "bool": "yes|no",
    "int": "N",
    "optint": "N",
    "float": "X",
    "optfloat": "X",
    "str": "TEXT",
    "strlist": "WORDS",
    "env": "NAME=VALUE...",
}


def _doc(
    default: Any,
    section: str,
    label: str,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    others: tuple[str, ...] = (),
    unit: str = "",
    empty: str = "",
    syntax: str = "",
    scale: bool = False,
) -> Any:
    """A dataclass field with ``default`` and its description (name and kind come later)."""
    spec = FieldSpec(
        name="",
        kind="",
        default=default,
        section=section,
        label=label,
        help=help,
        choices=choices,
        others=others,
        unit=unit,
        empty=empty,
        syntax=syntax,
        scale=scale,
    )
    return dataclasses.field(default=default, metadata={_DOC: spec})


@dataclass(frozen=True)
class ExperimentSpec:
    """Everything one DDP run is: what to train, on how much, where, and how to start it."""

    # what to train
    name: str = _doc(
        "experiment",
        SECTION_TRAIN,
        "Name",
        "a label for the run: its directory and job name",
        syntax="NAME",
    )
    model: str = _doc(
        "simple_cnn",
        SECTION_TRAIN,
        "Model",
        "the network to train",
        choices=BUILTIN_MODELS,
        others=(
            "a torchvision classification model (resnet50, vit_b_16, ...)",
            "pkg.module:function",
        ),
        syntax="MODEL",
    )
    dataset: str = _doc(
        "synthetic",
        SECTION_TRAIN,
        "Dataset",
        "the data to train on",
        choices=BUILTIN_DATASETS,
        others=("pkg.module:function",),
        syntax="DATASET",
    )
    data_root: str = _doc(
        "",
        SECTION_TRAIN,
        "Data root",
        "where the data is on the cluster: a directory, or a .csv/.npz file for tabular; "
        "required for imagefolder and tabular",
        syntax="PATH",
    )
    download: bool = _doc(
        False,
        SECTION_TRAIN,
        "Download data",
        "download a torchvision dataset into data root first (needs internet on the node)",
    )
    task: str = _doc(
        "classification",
        SECTION_TRAIN,
        "Task",
        "what the model predicts; tabular trains as regression, the other built-in datasets "
        "as classification",
        choices=TASKS,
    )
    target: str = _doc(
        "",
        SECTION_TRAIN,
        "Target column",
        "the column to predict (tabular; handed to a custom dataset)",
        syntax="COLUMN",
    )
    num_classes: int | None = _doc(
        None, SECTION_TRAIN, "Classes", "the number of classes", empty="from the dataset"
    )
    synthetic_samples: int | None = _doc(
        None,
        SECTION_TRAIN,
        "Synthetic samples",
        "training samples of the synthetic dataset",
        empty="the trainer's",
    )
    synthetic_val_samples: int | None = _doc(
        None,
        SECTION_TRAIN,
        "Synthetic val",
        "validation samples of the synthetic dataset",
        empty="the trainer's",
    )
    synthetic_shape: str = _doc(
        "",
        SECTION_TRAIN,
        "Synthetic shape",
        "the shape of a synthetic sample: C,H,W for images, one or two sizes for flat "
        "samples (mlp only)",
        empty=",".join(map(str, SYNTHETIC_DEFAULT_SHAPE)),
        syntax="C,H,W",
    )
    # size and launch
    nodes: int = _doc(
        1,
        SECTION_SIZE,
        "Nodes",
        f"nodes to run on, 1 to {MAX_NODES}; more than one needs Slurm",
        scale=True,
    )
    gpus_per_node: int = _doc(
        1,
        SECTION_SIZE,
        "GPUs per node",
        f"training processes per node, 1 to {MAX_PROCS_PER_NODE}: GPUs, or CPU processes "
        "with device cpu",
        scale=True,
    )
    backend: str = _doc(
        "auto",
        SECTION_SIZE,
        "Backend",
        "the torch.distributed backend; auto: nccl on GPUs, gloo on the CPU",
        choices=BACKENDS,
    )
    launcher: str = _doc(
        "torchrun",
        SECTION_SIZE,
        "Launcher",
        "what starts the processes: torchrun, one per node, or srun, one task per process "
        "(needs Slurm)",
        choices=LAUNCHERS,
    )
    device: str = _doc(
        "cuda", SECTION_SIZE, "Device", "train on GPUs (cuda) or on the CPU", choices=DEVICES
    )
    # Slurm resources
    partition: str = _doc(
        "",
        SECTION_SLURM,
        "Partition",
        "the Slurm partition, or several joined by commas",
        empty="the cluster's default",
        syntax="NAME",
    )
    account: str = _doc(
        "",
        SECTION_SLURM,
        "Account",
        "the Slurm account to charge",
        empty="your default account",
        syntax="NAME",
    )
    qos: str = _doc(
        "",
        SECTION_SLURM,
        "QOS",
        "the Slurm quality of service",
        empty="the default QOS",
        syntax="NAME",
    )
    time_limit: str = _doc(
        "01:00:00",
        SECTION_SLURM,
        "Time limit",
        f"the job's wall-clock limit: {_TIME_HELP}",
        syntax="D-HH:MM:SS",
    )
    constraint: str = _doc(
        "",
        SECTION_SLURM,
        "Constraint",
        "node features the job needs, e.g. a100&ib",
        syntax="FEATURES",
    )
    cpus_per_task: int = _doc(
        4,
        SECTION_SLURM,
        "CPUs per task",
        "CPUs per Slurm task: with torchrun one task per node, shared by its processes; "
        "with srun one per process",
    )
    mem: str = _doc(
        "",
        SECTION_SLURM,
        "Memory",
        "memory per node, e.g. 64G or 500M; 0: all of the node's",
        empty="the cluster's default",
        syntax="SIZE",
    )
    # optimisation
    epochs: int = _doc(10, SECTION_OPTIM, "Epochs", "passes over the training data")
    batch_per_gpu: int = _doc(
        64,
        SECTION_OPTIM,
        "Batch per GPU",
        "samples per step on each process; the global batch is this times the world size",
        unit="samples",
    )
    lr: float | None = _doc(
        None,
        SECTION_OPTIM,
        "Learning rate",
        "the learning rate",
        empty="the trainer's, 0.05 for sgd and 1e-3 for adamw",
    )
    lr_scaling: str = _doc(
        "none",
        SECTION_OPTIM,
        "LR scaling",
        "linear: lr times the global batch over base batch",
        choices=LR_SCALINGS,
    )
    base_batch: int | None = _doc(
        None,
        SECTION_OPTIM,
        "Base batch",
        "the global batch lr is tuned for, with linear scaling",
        empty="the trainer's",
        unit="samples",
    )
    optimizer: str = _doc("sgd", SECTION_OPTIM, "Optimizer", "the optimizer", choices=OPTIMIZERS)
    schedule: str = _doc(
        "cosine",
        SECTION_OPTIM,
        "Schedule",
        "the learning-rate schedule after the warm-up",
        choices=SCHEDULES,
    )
    warmup_epochs: int = _doc(
        0,
        SECTION_OPTIM,
        "Warmup epochs",
        "epochs of linear learning-rate warm-up, fewer than epochs",
    )
    precision: str = _doc(
        "auto",
        SECTION_OPTIM,
        "Precision",
        "mixed precision; auto: bf16 on a GPU that supports it, fp32 on the CPU; fp16 needs a GPU",
        choices=PRECISIONS,
    )
    workers: int = _doc(
        2, SECTION_OPTIM, "Loader workers", "data-loader processes per training process"
    )
    seed: int = _doc(0, SECTION_OPTIM, "Seed", "the random seed: initial weights, data order")
    max_steps_per_epoch: int | None = _doc(
        None,
        SECTION_OPTIM,
        "Max steps/epoch",
        "end each epoch after this many steps, for quick tests",
        empty="the whole epoch",
    )
    # preemption
    requeue: bool = _doc(
        True,
        SECTION_PREEMPT,
        "Requeue on timeout",
        "let Slurm requeue the job when it is preempted or runs out of time; it resumes from "
        "its checkpoint",
    )
    signal_lead_sec: int = _doc(
        120,
        SECTION_PREEMPT,
        "Signal lead",
        "how long before the time limit the job is told to checkpoint; 0: not at all",
        unit="s",
    )
    # environment and escape hatches
    env_setup: tuple[str, ...] = _doc(
        (),
        SECTION_ENV,
        "Setup lines",
        "shell lines run before training, one per line, e.g. module load pytorch",
        syntax="LINES",
    )
    python: str = _doc(
        "python3",
        SECTION_ENV,
        "Python",
        "the Python that runs the trainer on the nodes: python3 or a venv's python",
        syntax="PATH",
    )
    extra_sbatch: tuple[str, ...] = _doc(
        (),
        SECTION_ENV,
        "Extra #SBATCH",
        "more sbatch options, as shell words, e.g. --exclusive",
        syntax="OPTIONS",
    )
    extra_trainer_args: tuple[str, ...] = _doc(
        (),
        SECTION_ENV,
        "Extra trainer args",
        "more trainer arguments, as shell words, e.g. --compile",
        syntax="ARGS",
    )
    nccl_env: tuple[tuple[str, str], ...] = _doc(
        (),
        SECTION_ENV,
        "NCCL env",
        "environment variables for the training processes, e.g. NCCL_DEBUG=INFO",
    )

    def __post_init__(self) -> None:
        # Accept lists and a mapping (what JSON and forms give); keep the frozen spec hashable.
        for name in ("env_setup", "extra_sbatch", "extra_trainer_args"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        env: Any = self.nccl_env
        if isinstance(env, Mapping):
            object.__setattr__(self, "nccl_env", tuple((k, v) for k, v in env.items()))
        elif isinstance(env, list) and all(isinstance(p, list | tuple) for p in env):
            object.__setattr__(self, "nccl_env", tuple(tuple(p) for p in env))

    @property
    def world_size(self) -> int:
        """Total number of training processes."""
        return self.nodes * self.gpus_per_node

    @property
    def procs_per_node(self) -> int:
        """Training processes on each node (GPUs, or CPU processes for ``device='cpu'``)."""
        return self.gpus_per_node

    @property
    def needs_slurm(self) -> bool:
        """True when the job script needs Slurm (``srun``): several nodes or the srun launcher."""
        return self.nodes > 1 or self.launcher == "srun"

    @property
    def omp_threads(self) -> int:
        """OMP_NUM_THREADS per process: the task's CPUs shared by the processes it runs."""
        per_task = 1 if self.launcher == "srun" else max(1, self.gpus_per_node)
        return max(1, self.cpus_per_task // per_task)

    @property
    def nccl_env_dict(self) -> dict[str, str]:
        return dict(self.nccl_env)

    def replace(self, **changes: Any) -> ExperimentSpec:
        """A copy with ``changes`` applied (unknown names raise TypeError)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; :meth:`from_dict` gives back an equal spec."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "nccl_env":
                out[f.name] = dict(value)
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExperimentSpec:
        """Build a spec from :meth:`to_dict` output. Unknown keys are ignored (newer versions);
        values of the wrong JSON type raise :class:`SpecError` naming every such field."""
        errors: list[FieldError] = []
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            kind = _FIELD_KINDS[f.name]
            ok = _json_type_ok(kind, value)
            if not ok:
                errors.append(FieldError(f.name, f"expected {_KIND_WORDS[kind]}, got {value!r}"))
                continue
            if kind in ("float", "optfloat") and _is_int(value):
                value = float(value)
            kwargs[f.name] = value
        if errors:
            raise SpecError(errors)
        return cls(**kwargs)

    def group_fields(self) -> dict[str, Any]:
        """The spec without its size and label: what must match for runs to compare."""
        d = self.to_dict()
        for name in (*SCALE_FIELDS, *_LABEL_FIELDS):
            d.pop(name)
        return d

    def group_key(self) -> str:
        """A short stable key shared by runs that differ only in nodes/GPUs per node (and name)."""
        canon = json.dumps(self.group_fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# field kinds, for from_dict and spec_from_form

_FIELD_KINDS: Final[dict[str, str]] = {}
for _f in dataclasses.fields(ExperimentSpec):
    _t = str(_f.type)
    if _t == "bool":
        _FIELD_KINDS[_f.name] = "bool"
    elif _t == "int":
        _FIELD_KINDS[_f.name] = "int"
    elif _t == "int | None":
        _FIELD_KINDS[_f.name] = "optint"
    elif _t == "float":
        _FIELD_KINDS[_f.name] = "float"
    elif _t == "float | None":
        _FIELD_KINDS[_f.name] = "optfloat"
    elif _t == "str":
        _FIELD_KINDS[_f.name] = "str"
    elif _t == "tuple[str, ...]":
        _FIELD_KINDS[_f.name] = "strlist"
    elif _t == "tuple[tuple[str, str], ...]":
        _FIELD_KINDS[_f.name] = "env"
    else:  # pragma: no cover - a new field type needs a kind
        raise TypeError(f"no kind for field {_f.name}: {_t}")

_KIND_WORDS: Final = {
    "bool": "true or false",
    "int": "an integer",
    "optint": "an integer or null",
    "float": "a number",
    "optfloat": "a number or null",
    "str": "a string",
    "strlist": "a list of strings",
    "env": "a table of NAME = value strings",
}


def _field_specs() -> dict[str, FieldSpec]:
    specs: dict[str, FieldSpec] = {}
    for f in dataclasses.fields(ExperimentSpec):
        doc = f.metadata.get(_DOC)
        if not isinstance(doc, FieldSpec):  # pragma: no cover - a new field needs a _doc(...)
            raise TypeError(f"ExperimentSpec.{f.name} has no description: declare it with _doc()")
        specs[f.name] = dataclasses.replace(doc, name=f.name, kind=_FIELD_KINDS[f.name])
    return specs


#: Every ExperimentSpec field's description, in declaration order.
FIELDS: Final[Mapping[str, FieldSpec]] = MappingProxyType(_field_specs())
#: Fields that set the size of a run; runs that differ only in these compare as one group.
SCALE_FIELDS: Final = tuple(name for name, f in FIELDS.items() if f.scale)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_type_ok(kind: str, value: object) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return _is_int(value)
    if kind == "optint":
        return value is None or _is_int(value)
    if kind == "float":
        return _is_int(value) or isinstance(value, float)
    if kind == "optfloat":
        return value is None or _is_int(value) or isinstance(value, float)
    if kind == "str":
        return isinstance(value, str)
    if kind == "strlist":
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return isinstance(value, list | tuple) and all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in value
    )


# ---------------------------------------------------------------------------------------------
# time limits

# Slurm's forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds. Digits are ASCII only (re.ASCII).
_TIME_FORMATS: Final = tuple(
    re.compile(p, re.ASCII)
    for p in (
        r"(?P<m>\d{1,9})",
        r"(?P<m>\d{1,9}):(?P<s>\d{1,2})",
        r"(?P<h>\d{1,7}):(?P<m>\d{1,2}):(?P<s>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2}):(?P<m>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2})",
    )
)


def parse_time_limit_seconds(text: str) -> int:
    """Seconds in a Slurm time limit (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``). Raises ValueError saying what is allowed."""
    if not isinstance(text, str):
        raise ValueError(f"{_TIME_HELP}, got {text!r}")
    s = text.strip()
    for pattern in _TIME_FORMATS:
        m = pattern.fullmatch(s)
        if m is None:
            continue
        parts = {k: int(v) for k, v in m.groupdict().items()}
        if parts.get("s", 0) >= 60:
            raise ValueError(f"seconds must be below 60, got {text!r}")
        if "h" in parts and parts.get("m", 0) >= 60:
            raise ValueError(f"minutes must be below 60, got {text!r}")
        if "d" in parts and parts["h"] >= 24:
            raise ValueError(f"hours must be below 24 after a day count, got {text!r}")
        seconds = (
            parts.get("d", 0) * 86400
            + parts.get("h", 0) * 3600
            + parts.get("m", 0) * 60
            + parts.get("s", 0)
        )
        if seconds <= 0:
            raise ValueError(f"must be at least 1 minute (0 means no limit in Slurm), got {text!r}")
        return seconds
    raise ValueError(f"{_TIME_HELP}, got {text!r}")


def parse_time_limit(text: str) -> int:
    """Minutes in a Slurm time limit, rounded up as Slurm does."""
    return math.ceil(parse_time_limit_seconds(text) / 60)


def format_time_limit(minutes: int) -> str:
    """``HH:MM:00``, or ``D-HH:MM:00`` from one day on."""
    days, rest = divmod(int(minutes), 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"


# ---------------------------------------------------------------------------------------------
# validation


def _one_of(name: str, value: object, allowed: Sequence[str]) -> FieldError | None:
    if isinstance(value, str) and value in allowed:
        return None
    return FieldError(name, f"must be one of {', '.join(allowed)}, got {value!r}")


def _int_range(
    name: str, value: object, lo: int, hi: int, *, optional: bool = False
) -> FieldError | None:
    if optional and value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return None
    extra = " (or empty)" if optional else ""
    return FieldError(name, f"must be an integer from {lo} to {hi}{extra}, got {value!r}")


def _pattern(
    name: str, value: object, regex: re.Pattern[str], what: str, *, max_len: int, optional: bool
) -> FieldError | None:
    if not isinstance(value, str):
        return FieldError(name, f"must be a string, got {value!r}")
    if optional and value == "":
        return None
    if len(value) > max_len or regex.fullmatch(value) is None:
        empty = " or empty" if optional else ""
        return FieldError(
            name, f"must be {what} (at most {max_len} characters){empty}, got {value!r}"
        )
    return None


def _text(name: str, value: object, *, max_len: int, required: bool) -> FieldError | None:
    if not isinstance(value, str):
        return FieldError(name, f"must be a string, got {value!r}")
    if required and not value.strip():
        return FieldError(name, "must not be empty")
    if len(value) > max_len:
        return FieldError(name, f"must be at most {max_len} characters, got {len(value)}")
    if _CONTROL_RE.search(value):
        return FieldError(name, f"must not contain newlines or control characters, got {value!r}")
    return None


def _extra_sbatch_errors(value: object) -> list[FieldError]:
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        return [FieldError("extra_sbatch", f"must be a list of strings, got {value!r}")]
    errors: list[FieldError] = []
    for item in value:
        m = _EXTRA_SBATCH_RE.fullmatch(item) if len(item) <= 512 else None
        if m is None:
            errors.append(
                FieldError(
                    "extra_sbatch",
                    "each item must look like --option or --option=value (a lower-case option "
                    "name; the value only letters, digits and _.,:/=+@%*!&|[]^~-), got "
                    + repr(item),
                )
            )
            continue
        opt = m.group(1)
        clash = sorted(r for r in _RESERVED_SBATCH if r == opt or r.startswith(opt))
        if clash:
            errors.append(
                FieldError(
                    "extra_sbatch",
                    f"--{opt} would override --{clash[0]}, which ddp-tui sets from the spec; "
                    f"use the matching field instead, got {item!r}",
                )
            )
    return errors


def _env_setup_errors(value: object) -> list[FieldError]:
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        return [FieldError("env_setup", f"must be a list of strings (shell lines), got {value!r}")]
    errors: list[FieldError] = []
    for i, line in enumerate(value, 1):
        where = f"line {i}"
        if len(line) > 4096:
            errors.append(FieldError("env_setup", f"{where}: at most 4096 characters"))
        elif _CONTROL_NO_TAB_RE.search(line):
            errors.append(
                FieldError(
                    "env_setup",
                    f"{where}: one shell line per item; no newlines or control characters, "
                    f"got {line!r}",
                )
            )
        elif line.lstrip().upper().startswith("#SBATCH"):
            errors.append(
                FieldError(
                    "env_setup", f"{where}: #SBATCH lines belong in extra_sbatch, got {line!r}"
                )
            )
        elif line.rstrip().endswith("\\"):
            errors.append(
                FieldError(
                    "env_setup", f"{where}: must not end with \\ (it would join the next line)"
                )
            )
        elif _HEREDOC_RE.search(line):
            errors.append(
                FieldError(
                    "env_setup",
                    f"{where}: here-documents (<<) would swallow the rest of the script, "
                    f"got {line!r}",
                )
            )
    if not errors and value:
        problem = _shell_syntax_error(tuple(value))
        if problem:
            errors.append(FieldError("env_setup", f"not valid bash: {problem}"))
    return errors


@functools.lru_cache(maxsize=256)
def _shell_syntax_error(lines: tuple[str, ...]) -> str | None:
    """bash -n over the set-up block alone (so an open quote or ``if`` cannot reach the rest
    of the script). Skipped where bash is not installed: the cluster still checks at run time."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        proc = subprocess.run(
            [bash, "-n"],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return None
    msg = " ".join(proc.stderr.split())
    return msg.replace("bash: ", "", 1) or f"bash -n exited {proc.returncode}"


def _trainer_args_errors(value: object) -> list[FieldError]:
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        return [FieldError("extra_trainer_args", f"must be a list of strings, got {value!r}")]
    errors: list[FieldError] = []
    for item in value:
        if not item or len(item) > 4096 or _CONTROL_RE.search(item):
            errors.append(
                FieldError(
                    "extra_trainer_args",
                    f"each item must be 1-4096 characters without newlines or control "
                    f"characters, got {item!r}",
                )
            )
            continue
        opt = item.split("=", 1)[0]
        # argparse accepts prefixes, so --run and --run-d are --run-dir too.
        if len(opt) > 2 and opt.startswith("--") and "--run-dir".startswith(opt):
            errors.append(
                FieldError(
                    "extra_trainer_args",
                    f"the run directory is set by ddp-tui and cannot be changed, got {item!r}",
                )
            )
    return errors


def _nccl_env_errors(value: object) -> list[FieldError]:
    pairs: list[tuple[object, object]]
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, tuple | list) and all(
        isinstance(p, tuple | list) and len(p) == 2 for p in value
    ):
        pairs = [(p[0], p[1]) for p in value]
    else:
        return [FieldError("nccl_env", f"must map NAME to value, got {value!r}")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for key, val in pairs:
        if not isinstance(key, str) or not _ENV_NAME_RE.fullmatch(key) or len(key) > 128:
            errors.append(
                FieldError(
                    "nccl_env",
                    f"names must be upper-case shell variable names like NCCL_SOCKET_IFNAME, "
                    f"got {key!r}",
                )
            )
            continue
        if key in _RESERVED_ENV or key.startswith("SLURM_"):
            errors.append(
                FieldError("nccl_env", f"{key} is set by the job script and cannot be overridden")
            )
        if key in seen:
            errors.append(FieldError("nccl_env", f"{key} is given twice"))
        seen.add(key)
        problem = _text("nccl_env", val, max_len=4096, required=False)
        if problem is not None:
            errors.append(FieldError("nccl_env", f"{key}: {problem.message}"))
    return errors


def _model_input_error(s: ExperimentSpec) -> FieldError | None:
    """The trainer's build_model rules (trainer/models.py), so that a model that cannot take
    the dataset's samples is refused at submit rather than when the job starts.

    mlp flattens any sample; a pkg.module:function model, or any model on a custom dataset,
    meets the real shape only at run time."""
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
        shape = _DATASET_SHAPES[s.dataset]
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


def validate(spec: ExperimentSpec) -> list[FieldError]:
    """Every problem with ``spec`` at once (empty when it can be rendered and submitted)."""
    s = spec
    errs: list[FieldError | None] = []
    add = errs.append

    add(
        _pattern(
            "name",
            s.name,
            _NAME_RE,
            "letters, digits, '_', '.' or '-', starting with a letter or digit",
            max_len=64,
            optional=False,
        )
    )
    model_err = _pattern(
        "model", s.model, _MODEL_RE, FIELDS["model"].allowed, max_len=200, optional=False
    )
    add(model_err)
    dataset_ok = isinstance(s.dataset, str) and (
        s.dataset in BUILTIN_DATASETS
        or (len(s.dataset) <= 200 and _CALLABLE_RE.fullmatch(s.dataset) is not None)
    )
    if not dataset_ok:
        add(
            FieldError(
                "dataset",
                f"must be one of {FIELDS['dataset'].allowed}, got {s.dataset!r}",
            )
        )
    add(_text("data_root", s.data_root, max_len=4096, required=False))
    if dataset_ok and s.dataset in ("imagefolder", "tabular") and s.data_root == "":
        add(FieldError("data_root", f"is required for dataset {s.dataset} (a directory or file)"))
    if not isinstance(s.download, bool):
        add(FieldError("download", f"must be true or false, got {s.download!r}"))
    task_err = _one_of("task", s.task, TASKS)
    add(task_err)
    custom_dataset = dataset_ok and ":" in s.dataset
    if task_err is None and dataset_ok and not custom_dataset:
        wanted = "regression" if s.dataset == "tabular" else "classification"
        if s.task != wanted:
            add(FieldError("task", f"dataset {s.dataset} trains as {wanted}, got {s.task!r}"))
    target_err = _text("target", s.target, max_len=256, required=False)
    add(target_err)
    used_target = not dataset_ok or custom_dataset or s.dataset == "tabular"
    if target_err is None and s.target and not used_target:
        add(FieldError("target", "is only used with dataset tabular or a custom dataset"))
    if target_err is None and not s.target and s.dataset == "tabular":
        add(FieldError("target", "is required for dataset tabular (the column to predict)"))
    nc_err = _int_range("num_classes", s.num_classes, 2, 1_000_000, optional=True)
    add(nc_err)
    if nc_err is None and s.num_classes is not None and s.task == "regression":
        add(FieldError("num_classes", "must be empty for a regression task"))
    add(_int_range("synthetic_samples", s.synthetic_samples, 1, 100_000_000, optional=True))
    add(_int_range("synthetic_val_samples", s.synthetic_val_samples, 1, 100_000_000, optional=True))
    shape_err = _pattern(
        "synthetic_shape",
        s.synthetic_shape,
        _SHAPE_RE,
        "C,H,W (1 to 3 positive integers up to 9999, e.g. 1,28,28)",
        max_len=20,
        optional=True,
    )
    add(shape_err)
    if model_err is None and dataset_ok and shape_err is None:
        add(_model_input_error(s))

    nodes_err = _int_range("nodes", s.nodes, 1, MAX_NODES)
    add(nodes_err)
    gpn_err = _int_range("gpus_per_node", s.gpus_per_node, 1, MAX_PROCS_PER_NODE)
    add(gpn_err)
    backend_err = _one_of("backend", s.backend, BACKENDS)
    add(backend_err)
    add(_one_of("launcher", s.launcher, LAUNCHERS))
    device_err = _one_of("device", s.device, DEVICES)
    add(device_err)
    if backend_err is None and device_err is None and s.backend == "nccl" and s.device == "cpu":
        add(FieldError("backend", "nccl needs device cuda; use gloo or auto for CPU runs"))

    add(
        _pattern(
            "partition",
            s.partition,
            _PARTITION_RE,
            "a partition name (letters, digits, '_', '.', '-'; several joined by commas)",
            max_len=256,
            optional=True,
        )
    )
    for fname in ("account", "qos"):
        add(
            _pattern(
                fname,
                getattr(s, fname),
                _WORD_RE,
                "letters, digits, '_', '.' or '-'",
                max_len=64,
                optional=True,
            )
        )
    time_err: FieldError | None = None
    time_sec = 0
    if not isinstance(s.time_limit, str):
        time_err = FieldError("time_limit", f"{_TIME_HELP}, got {s.time_limit!r}")
    else:
        try:
            time_sec = parse_time_limit_seconds(s.time_limit)
        except ValueError as e:
            time_err = FieldError("time_limit", str(e))
        else:
            if time_sec > MAX_TIME_MIN * 60:
                time_err = FieldError(
                    "time_limit", f"must be at most 365 days, got {s.time_limit!r}"
                )
    add(time_err)
    add(
        _pattern(
            "constraint",
            s.constraint,
            _CONSTRAINT_RE,
            "node features with & | , * [ ] ( ) ! : (e.g. a100&ib)",
            max_len=256,
            optional=True,
        )
    )
    add(_int_range("cpus_per_task", s.cpus_per_task, 1, 1024))
    add(
        _pattern(
            "mem",
            s.mem,
            _MEM_RE,
            "a size like 16G, 500M or 0 (all of the node's memory)",
            max_len=16,
            optional=True,
        )
    )

    epochs_err = _int_range("epochs", s.epochs, 1, 100_000)
    add(epochs_err)
    add(_int_range("batch_per_gpu", s.batch_per_gpu, 1, 1_000_000))
    lr_ok = s.lr is None or (
        (_is_int(s.lr) or isinstance(s.lr, float)) and math.isfinite(s.lr) and 0 < s.lr <= 100
    )
    if not lr_ok:
        add(
            FieldError(
                "lr",
                f"must be a number above 0 and at most 100, or empty for the trainer's "
                f"default, got {s.lr!r}",
            )
        )
    add(_one_of("lr_scaling", s.lr_scaling, LR_SCALINGS))
    add(_int_range("base_batch", s.base_batch, 1, 100_000_000, optional=True))
    add(_one_of("optimizer", s.optimizer, OPTIMIZERS))
    add(_one_of("schedule", s.schedule, SCHEDULES))
    warm_err = _int_range("warmup_epochs", s.warmup_epochs, 0, 100_000)
    add(warm_err)
    if warm_err is None and epochs_err is None and 0 < s.epochs <= s.warmup_epochs:
        add(
            FieldError("warmup_epochs", f"must be below epochs ({s.epochs}), got {s.warmup_epochs}")
        )
    prec_err = _one_of("precision", s.precision, PRECISIONS)
    add(prec_err)
    if prec_err is None and device_err is None and s.precision == "fp16" and s.device == "cpu":
        add(FieldError("precision", "fp16 needs device cuda; use bf16 or off on the CPU"))
    add(_int_range("workers", s.workers, 0, 256))
    add(_int_range("seed", s.seed, 0, 2**32 - 1))
    add(_int_range("max_steps_per_epoch", s.max_steps_per_epoch, 1, 10**9, optional=True))

    if not isinstance(s.requeue, bool):
        add(FieldError("requeue", f"must be true or false, got {s.requeue!r}"))
    lead_err = _int_range("signal_lead_sec", s.signal_lead_sec, 0, 65535)
    add(lead_err)
    if lead_err is None and time_err is None and 0 < time_sec <= s.signal_lead_sec:
        add(
            FieldError(
                "signal_lead_sec",
                f"must be shorter than the time limit ({time_sec} s), got {s.signal_lead_sec}",
            )
        )

    errs.extend(_env_setup_errors(s.env_setup))
    py_err = _text("python", s.python, max_len=4096, required=True)
    if py_err is None and (any(c.isspace() for c in s.python) or s.python.startswith("-")):
        py_err = FieldError(
            "python",
            f"must be one program name or path without spaces (e.g. python3 or "
            f"~/venv/bin/python), got {s.python!r}",
        )
    add(py_err)
    errs.extend(_extra_sbatch_errors(s.extra_sbatch))
    errs.extend(_trainer_args_errors(s.extra_trainer_args))
    errs.extend(_nccl_env_errors(s.nccl_env))
    return [e for e in errs if e is not None]


def validate_for_cluster(
    spec: ExperimentSpec, partitions: Sequence[PartitionInfo]
) -> list[FieldError]:
    """Check ``spec`` against what ``sinfo`` reports: the partition exists, and GPUs per node,
    node count and time limit fit it. An empty partition means the cluster's default one."""
    if not partitions:
        return []
    by_name = {p.name: p for p in partitions}
    names = ", ".join(sorted(by_name))
    errors: list[FieldError] = []
    wanted: list[PartitionInfo] = []
    if isinstance(spec.partition, str) and spec.partition:
        for name in spec.partition.split(","):
            info = by_name.get(name)
            if info is None:
                errors.append(
                    FieldError("partition", f"no partition {name!r} on this cluster; have: {names}")
                )
            else:
                wanted.append(info)
    else:
        default = next((p for p in partitions if p.is_default), None)
        if default is not None:
            wanted.append(default)
    for p in wanted:
        where = f"partition {p.name}"
        if spec.device == "cuda" and _is_int(spec.gpus_per_node):
            if p.gpus_per_node <= 0:
                errors.append(
                    FieldError(
                        "device",
                        f"{where} has no GPUs; use device cpu or a GPU partition",
                    )
                )
            elif spec.gpus_per_node > p.gpus_per_node:
                errors.append(
                    FieldError(
                        "gpus_per_node",
                        f"{where} has {p.gpus_per_node} GPUs per node, got {spec.gpus_per_node}",
                    )
                )
        if _is_int(spec.nodes):
            limit = p.nodes if p.max_nodes is None else min(p.nodes, p.max_nodes)
            if spec.nodes > limit:
                errors.append(
                    FieldError("nodes", f"{where} allows at most {limit} nodes, got {spec.nodes}")
                )
        if _is_int(spec.cpus_per_task) and p.cpus_per_node > 0:
            tasks = spec.gpus_per_node if spec.launcher == "srun" else 1
            if _is_int(tasks) and spec.cpus_per_task * tasks > p.cpus_per_node:
                errors.append(
                    FieldError(
                        "cpus_per_task",
                        f"{where} has {p.cpus_per_node} CPUs per node; {tasks} task(s) x "
                        f"{spec.cpus_per_task} CPUs do not fit",
                    )
                )
        if p.max_time_min is not None and isinstance(spec.time_limit, str):
            try:
                minutes = parse_time_limit(spec.time_limit)
            except ValueError:
                continue  # validate() reports it
            if minutes > p.max_time_min:
                errors.append(
                    FieldError(
                        "time_limit",
                        f"{where} allows at most {format_time_limit(p.max_time_min)}, "
                        f"got {spec.time_limit}",
                    )
                )
    return errors


# ---------------------------------------------------------------------------------------------
# raw text (forms, CLI) to a spec

_TRUE: Final = frozenset({"1", "true", "yes", "on", "y"})
_FALSE: Final = frozenset({"0", "false", "no", "off", "n"})


def _conv_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"must be yes or no (true/false, 1/0), got {text!r}")


def _conv_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"must be an integer, got {text!r}") from None


def _conv_optint(text: str) -> int | None:
    return None if not text.strip() else _conv_int(text)


def _conv_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


def _conv_optfloat(text: str) -> float | None:
    return None if not text.strip() else _conv_float(text)


def _conv_str(text: str) -> str:
    return text.strip()


def _conv_lines(text: str) -> tuple[str, ...]:
    # One shell line per line of the text box; blank lines carry nothing.
    return tuple(line.rstrip() for line in text.split("\n") if line.strip())


def _conv_words(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as e:
        raise ValueError(f"cannot split into words ({e}), got {text!r}") from None


def _conv_env(text: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for word in _conv_words(text):
        # Commas separate items too (A=1,B=2), but a piece without "=" continues the value
        # before it, so that NCCL_IB_HCA=mlx5_0,mlx5_1 stays one item.
        pieces = [p for p in word.split(",") if p]
        for i, piece in enumerate(pieces):
            key, sep, value = piece.partition("=")
            if sep:
                pairs.append((key, value))
            elif i:
                pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]},{piece}")
            else:
                raise ValueError(f"each item must be NAME=value, got {word!r}")
    return tuple(pairs)


_CONVERTERS: Final[dict[str, Callable[[str], Any]]] = {
    "bool": _conv_bool,
    "int": _conv_int,
    "optint": _conv_optint,
    "float": _conv_float,
    "optfloat": _conv_optfloat,
    "str": _conv_str,
    "strlist": _conv_words,
    "env": _conv_env,
}
#: Form fields whose text box holds one item per line rather than shell words.
_LINE_FIELDS: Final = frozenset({"env_setup"})


def form_text(name: str, value: Any) -> str:
    """``value`` of field ``name`` as the text :func:`spec_from_form` reads back to it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name in _LINE_FIELDS:
        return "\n".join(value)
    if _FIELD_KINDS.get(name) == "env":
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in value)
    if isinstance(value, tuple | list):
        return shlex.join(value)
    return str(value)


def spec_from_form(
    form: Mapping[str, str], base: ExperimentSpec | None = None
) -> tuple[ExperimentSpec | None, list[FieldError]]:
    """Convert raw text fields (a form, CLI options) onto ``base`` (default: ExperimentSpec()).

    Returns ``(spec, [])`` when everything converts and validates, else ``(None, errors)``
    with every conversion and validation error, each naming its field. List fields take shell
    words (``extra_sbatch``, ``extra_trainer_args``), one line per item (``env_setup``) or
    ``NAME=value`` words (``nccl_env``)."""
    spec = base if base is not None else ExperimentSpec()
    errors: list[FieldError] = []
    changes: dict[str, Any] = {}
    for key, raw in form.items():
        kind = _FIELD_KINDS.get(key)
        if kind is None:
            errors.append(FieldError(key, "unknown field"))
            continue
        if not isinstance(raw, str):
            errors.append(FieldError(key, f"expected text, got {raw!r}"))
            continue
        conv = _conv_lines if key in _LINE_FIELDS else _CONVERTERS[kind]
        try:
            changes[key] = conv(raw)
        except ValueError as e:
            errors.append(FieldError(key, str(e)))
    candidate = spec.replace(**changes)
    failed = {e.field for e in errors}
    errors.extend(e for e in validate(candidate) if e.field not in failed)
    return (None, errors) if errors else (candidate, [])
