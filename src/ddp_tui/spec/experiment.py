"""ExperimentSpec: everything one run is, each field declared with its one description.

The descriptions (:class:`~ddp_tui.spec.fields.FieldSpec`) are what the CLI's ``--help``,
Compose's form and the per-field validation are generated from: a new field is added here,
and nowhere else. This module is longer than most because it holds all of them together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ddp_tui.jobfiles import TELEMETRY_DEFAULT_SEC
from ddp_tui.spec.convert import KIND_WORDS, is_int, json_type_ok
from ddp_tui.spec.environments import (
    CONTAINER_RUNTIMES,
    ENVIRONMENTS,
    MAX_MODULES,
    MAX_MOUNTS,
)
from ddp_tui.spec.errors import FieldError, SpecError
from ddp_tui.spec.fields import FieldSpec, describe, describe_fields
from ddp_tui.spec.gpu_types import GPU_TYPE_PATTERN
from ddp_tui.spec.timefmt import TIME_HELP
from ddp_tui.spec.vocabulary import (
    BACKENDS,
    BUILTIN_DATASETS,
    BUILTIN_MODELS,
    CALLABLE_PATTERN,
    CODE_MODES,
    CONSTRAINT_PATTERN,
    DECODE_MODES,
    DEVICES,
    ENTRIES,
    LABEL_FIELDS,
    LAUNCHERS,
    LR_SCALINGS,
    MAIL_TYPE_PATTERN,
    MAIL_TYPES,
    MAIL_USER_PATTERN,
    MAX_NODES,
    MAX_PROCS_PER_NODE,
    MEM_PATTERN,
    METRICS_SOURCES,
    MODEL_PATTERN,
    NAME_PATTERN,
    OBSERVE_MODES,
    OPTIMIZERS,
    PARTITION_PATTERN,
    PRECISIONS,
    SCHEDULES,
    SECTION_ENTRY,
    SECTION_ENV,
    SECTION_OPTIM,
    SECTION_PREEMPT,
    SECTION_SIZE,
    SECTION_SLURM,
    SECTION_TRAIN,
    SHAPE_PATTERN,
    SUGGESTED_MODELS,
    SYNTHETIC_DEFAULT_SHAPE,
    TASKS,
    WORD_PATTERN,
)


@dataclass(frozen=True)
class ExperimentSpec:
    """Everything one DDP run is: what to train, on how much, where, and how to start it."""

    # the run's label, and what the job runs
    name: str = describe(
        "experiment",
        SECTION_ENTRY,
        "Name",
        "a label for the run: its directory and job name",
        syntax="NAME",
        pattern=NAME_PATTERN,
        pattern_words="letters, digits, '_', '.' or '-', starting with a letter or digit",
        max_len=64,
        required=True,
        hint="letters, digits, _ . -",
    )
    entry: str = describe(
        "trainer",
        SECTION_ENTRY,
        "Entry",
        "what the job runs: ddp-tui's built-in trainer, or your own torchrun-ready script",
        choices=ENTRIES,
    )
    script: str = describe(
        "",
        SECTION_ENTRY,
        "Script",
        "your training script: a .py file, or -m package.module run from the project directory",
        syntax="PATH",
        check="script",
        max_len=4096,
        hint="train.py or -m pkg.train",
        applies="script",
    )
    script_args: str = describe(
        "",
        SECTION_ENTRY,
        "Script args",
        "the script's arguments as one shell line; each word is quoted into the job script",
        syntax="ARGS",
        check="script_args",
        max_len=8192,
        hint="e.g. --epochs 3 --lr 0.1",
        applies="script",
    )
    project_dir: str = describe(
        "",
        SECTION_ENTRY,
        "Project dir",
        "snapshot: the directory copied into the run, where the script runs from; in-place: "
        "the directory on the cluster the script runs in",
        empty="the script's directory",
        syntax="PATH",
        max_len=4096,
        hint="empty: the script's directory",
        applies="script",
    )
    code_mode: str = describe(
        "snapshot",
        SECTION_ENTRY,
        "Code",
        "snapshot: copy the project into the run, so a retry runs the same code; in-place: run "
        "the script where it is on the cluster, so a retry runs whatever is there then",
        choices=CODE_MODES,
        applies="script",
    )
    snapshot_max_mb: int = describe(
        100,
        SECTION_ENTRY,
        "Snapshot cap (MB)",
        "refuse to snapshot a project bigger than this",
        unit="MB",
        minimum=1,
        maximum=100_000,
        hint="largest snapshot",
        applies="script",
    )
    metrics: str = describe(
        "auto",
        SECTION_ENTRY,
        "Metrics from",
        "where the script's metrics come from: a preset for what it prints (auto tries the "
        "reporting helper and every preset)",
        choices=METRICS_SOURCES,
        others=(
            "regex:PATTERN with named groups (epoch, train_loss, val_acc, ...)",
            "csv:PATH of a CSV the script writes",
        ),
        syntax="SOURCE",
        check="metrics",
        max_len=4096,
        hint="regex:PATTERN or csv:PATH",
        applies="script",
    )
    metrics_columns: tuple[tuple[str, str], ...] = describe(
        (),
        SECTION_ENTRY,
        "Column map",
        "for csv: and regex: metrics, SOURCE=COLUMN pairs that name metrics.csv's column for "
        "each of the source's, e.g. train_loss_epoch=train_loss",
        syntax="SRC=COLUMN...",
        check="metrics_columns",
        max_len=256,
        hint="src=column ...",
        applies="script",
    )
    samples_per_epoch: int | None = describe(
        None,
        SECTION_ENTRY,
        "Samples/epoch",
        "samples in one epoch over all ranks, for throughput when the script reports none",
        empty="as the script reports",
        minimum=1,
        maximum=10**12,
        hint="for throughput",
        applies="script",
    )
    max_steps: int | None = describe(
        None,
        SECTION_ENTRY,
        "Max steps",
        "the script's step budget (optimizer steps), for progress by steps (450/600 it) and verify",
        empty="read from the script's arguments (--max_iters, --max-steps, ...)",
        minimum=1,
        maximum=10**12,
        hint="e.g. 5000",
        applies="script",
    )
    observe: str = describe(
        "on",
        SECTION_ENTRY,
        "Observe",
        "on: see inside every rank (the process group it formed, its epochs, steps, samples and "
        "data wait, and Lightning's, Hugging Face's and Accelerate's own records); off: read "
        "only what the script prints",
        choices=OBSERVE_MODES,
        applies="script",
    )
    model: str = describe(
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
        suggestions=SUGGESTED_MODELS,
        pattern=MODEL_PATTERN,
        max_len=200,
        required=True,
        hint="torchvision name or pkg.module:function",
        applies="trainer",
    )
    dataset: str = describe(
        "synthetic",
        SECTION_TRAIN,
        "Dataset",
        "the data to train on",
        choices=BUILTIN_DATASETS,
        others=("pkg.module:function",),
        syntax="DATASET",
        check="one_of",
        pattern=CALLABLE_PATTERN,
        max_len=200,
        hint="pkg.module:function",
        applies="trainer",
    )
    data_root: str = describe(
        "",
        SECTION_TRAIN,
        "Data root",
        "where the data is on the cluster: a directory, or a .csv/.npz file for tabular; "
        "required for imagefolder and tabular",
        syntax="PATH",
        max_len=4096,
        hint="directory or file (imagefolder, tabular)",
        applies="trainer",
    )
    download: bool = describe(
        False,
        SECTION_TRAIN,
        "Download data",
        "download a torchvision dataset into data root first (needs internet on the node)",
        applies="trainer",
    )
    task: str = describe(
        "classification",
        SECTION_TRAIN,
        "Task",
        "what the model predicts; tabular trains as regression, the other built-in datasets "
        "as classification",
        choices=TASKS,
        applies="trainer",
    )
    target: str = describe(
        "",
        SECTION_TRAIN,
        "Target column",
        "the column to predict (tabular; handed to a custom dataset)",
        syntax="COLUMN",
        max_len=256,
        hint="tabular: the column to predict",
        applies="trainer",
    )
    num_classes: int | None = describe(
        None,
        SECTION_TRAIN,
        "Classes",
        "the number of classes",
        empty="from the dataset",
        minimum=2,
        maximum=1_000_000,
        hint="empty: from the dataset",
        applies="trainer",
    )
    synthetic_samples: int | None = describe(
        None,
        SECTION_TRAIN,
        "Synthetic samples",
        "training samples of the synthetic dataset",
        empty="the trainer's",
        minimum=1,
        maximum=100_000_000,
        hint="empty: trainer default",
        applies="trainer",
    )
    synthetic_val_samples: int | None = describe(
        None,
        SECTION_TRAIN,
        "Synthetic val",
        "validation samples of the synthetic dataset",
        empty="the trainer's",
        minimum=1,
        maximum=100_000_000,
        hint="empty: trainer default",
        applies="trainer",
    )
    synthetic_shape: str = describe(
        "",
        SECTION_TRAIN,
        "Synthetic shape",
        "the shape of a synthetic sample: C,H,W for images, one or two sizes for flat "
        "samples (mlp only)",
        empty=",".join(map(str, SYNTHETIC_DEFAULT_SHAPE)),
        syntax="C,H,W",
        pattern=SHAPE_PATTERN,
        pattern_words="C,H,W (1 to 3 positive integers up to 9999, e.g. 1,28,28)",
        max_len=20,
        hint="C,H,W e.g. 1,28,28",
        applies="trainer",
    )
    # size and launch
    nodes: int = describe(
        1,
        SECTION_SIZE,
        "Nodes",
        f"nodes to run on, 1 to {MAX_NODES}; more than one needs Slurm",
        scale=True,
        minimum=1,
        maximum=MAX_NODES,
        hint="1 or more",
    )
    gpus_per_node: int = describe(
        1,
        SECTION_SIZE,
        "GPUs per node",
        f"training processes per node, 1 to {MAX_PROCS_PER_NODE}: GPUs, or CPU processes "
        "with device cpu",
        scale=True,
        minimum=1,
        maximum=MAX_PROCS_PER_NODE,
        hint="processes per node on CPU",
    )
    backend: str = describe(
        "auto",
        SECTION_SIZE,
        "Backend",
        "the torch.distributed backend; auto: nccl on GPUs, gloo on the CPU",
        choices=BACKENDS,
    )
    launcher: str = describe(
        "torchrun",
        SECTION_SIZE,
        "Launcher",
        "what starts the processes: torchrun, one per node, or srun, one task per process "
        "(needs Slurm)",
        choices=LAUNCHERS,
    )
    device: str = describe(
        "cuda", SECTION_SIZE, "Device", "train on GPUs (cuda) or on the CPU", choices=DEVICES
    )
    # Slurm resources
    partition: str = describe(
        "",
        SECTION_SLURM,
        "Partition",
        "the Slurm partition, or several joined by commas",
        empty="the cluster's default",
        syntax="NAME",
        pattern=PARTITION_PATTERN,
        pattern_words="a partition name (letters, digits, '_', '.', '-'; several joined by commas)",
        max_len=256,
    )
    gpu_type: str = describe(
        "",
        SECTION_SLURM,
        "GPU type",
        "the GPU type to run on: as the cluster names it (h100, nvidia_a100_80gb_pcie, "
        "feature:gpu_a100) or by a plain name (H100, A100 80GB), found in the partition's "
        "types; any case",
        empty="any GPU",
        syntax="TYPE",
        pattern=GPU_TYPE_PATTERN,
        pattern_words="a GPU type: letters, digits, spaces and _ . : + -, neither a space nor "
        "':' at either end",
        max_len=64,
        hint="e.g. h100 or A100 80GB; empty: any",
    )
    account: str = describe(
        "",
        SECTION_SLURM,
        "Account",
        "the Slurm account to charge",
        empty="your default account",
        syntax="NAME",
        pattern=WORD_PATTERN,
        pattern_words="letters, digits, '_', '.' or '-'",
        max_len=64,
        hint="empty: your default",
    )
    qos: str = describe(
        "",
        SECTION_SLURM,
        "QOS",
        "the Slurm quality of service",
        empty="the default QOS",
        syntax="NAME",
        pattern=WORD_PATTERN,
        pattern_words="letters, digits, '_', '.' or '-'",
        max_len=64,
        hint="empty: default",
    )
    time_limit: str = describe(
        "01:00:00",
        SECTION_SLURM,
        "Time limit",
        f"the job's wall-clock limit: {TIME_HELP}",
        syntax="D-HH:MM:SS",
        check="time_limit",
        hint="HH:MM:SS or D-HH:MM:SS",
    )
    constraint: str = describe(
        "",
        SECTION_SLURM,
        "Constraint",
        "node features the job needs, e.g. a100&ib",
        syntax="FEATURES",
        pattern=CONSTRAINT_PATTERN,
        pattern_words="node features with & | , * [ ] ( ) ! : (e.g. a100&ib)",
        max_len=256,
        hint="node features, e.g. a100&ib",
    )
    cpus_per_task: int = describe(
        4,
        SECTION_SLURM,
        "CPUs per task",
        "CPUs per Slurm task: with torchrun one task per node, shared by its processes; "
        "with srun one per process",
        minimum=1,
        maximum=1024,
    )
    mem: str = describe(
        "",
        SECTION_SLURM,
        "Memory",
        "memory per node, e.g. 64G or 500M; 0: all of the node's",
        empty="the cluster's default",
        syntax="SIZE",
        pattern=MEM_PATTERN,
        pattern_words="a size like 16G, 500M or 0 (all of the node's memory)",
        max_len=16,
        hint="e.g. 64G; empty: default",
    )
    # optimisation
    # Optional for a script (an iteration loop has none: its rows are step windows); the
    # trainer requires it (validate.py). 10 stays the default the trainer's form shows.
    epochs: int | None = describe(
        10,
        SECTION_OPTIM,
        "Epochs",
        "passes over the training data; for a script, the epochs it is expected to reach "
        "(progress and verify)",
        empty="for a script: none expected (a loop with no epochs: progress by steps)",
        minimum=1,
        maximum=100_000,
    )
    batch_per_gpu: int = describe(
        64,
        SECTION_OPTIM,
        "Batch per GPU",
        "samples per step on each process; the global batch is this times the world size",
        unit="samples",
        minimum=1,
        maximum=1_000_000,
        applies="trainer",
    )
    lr: float | None = describe(
        None,
        SECTION_OPTIM,
        "Learning rate",
        "the learning rate",
        empty="the trainer's, 0.05 for sgd and 1e-3 for adamw",
        minimum=0,
        maximum=100,
        hint="empty: 0.05 for sgd, 1e-3 for adamw",
        applies="trainer",
    )
    lr_scaling: str = describe(
        "none",
        SECTION_OPTIM,
        "LR scaling",
        "linear: lr times the global batch over base batch",
        choices=LR_SCALINGS,
        applies="trainer",
    )
    base_batch: int | None = describe(
        None,
        SECTION_OPTIM,
        "Base batch",
        "the global batch lr is tuned for, with linear scaling",
        empty="the trainer's",
        unit="samples",
        minimum=1,
        maximum=100_000_000,
        hint="for linear scaling; empty: none",
        applies="trainer",
    )
    optimizer: str = describe(
        "sgd",
        SECTION_OPTIM,
        "Optimizer",
        "the optimizer",
        choices=OPTIMIZERS,
        applies="trainer",
    )
    schedule: str = describe(
        "cosine",
        SECTION_OPTIM,
        "Schedule",
        "the learning-rate schedule after the warm-up",
        choices=SCHEDULES,
        applies="trainer",
    )
    warmup_epochs: int = describe(
        0,
        SECTION_OPTIM,
        "Warmup epochs",
        "epochs of linear learning-rate warm-up, fewer than epochs",
        minimum=0,
        maximum=100_000,
        applies="trainer",
    )
    precision: str = describe(
        "auto",
        SECTION_OPTIM,
        "Precision",
        "mixed precision; auto: bf16 on a GPU that supports it, fp32 on the CPU; fp16 needs a GPU",
        choices=PRECISIONS,
        applies="trainer",
    )
    workers: int = describe(
        2,
        SECTION_OPTIM,
        "Loader workers",
        "data-loader processes per training process",
        minimum=0,
        maximum=256,
        applies="trainer",
    )
    decode: str = describe(
        "auto",
        SECTION_OPTIM,
        "Image decode",
        "where an image folder's JPEGs are decoded: gpu, in batches on the device (nvjpeg); "
        "cpu, by the loader workers; auto: the GPU on a CUDA device, else the CPU",
        choices=DECODE_MODES,
        applies="trainer",
    )
    seed: int = describe(
        0,
        SECTION_OPTIM,
        "Seed",
        "the random seed: initial weights, data order",
        minimum=0,
        maximum=2**32 - 1,
        applies="trainer",
    )
    max_steps_per_epoch: int | None = describe(
        None,
        SECTION_OPTIM,
        "Max steps/epoch",
        "end each epoch after this many steps, for quick tests",
        empty="the whole epoch",
        minimum=1,
        maximum=10**9,
        hint="empty: whole epoch",
        applies="trainer",
    )
    # preemption
    requeue: bool = describe(
        True,
        SECTION_PREEMPT,
        "Requeue on timeout",
        "let Slurm requeue the job when it is preempted or runs out of time; it resumes from "
        "its checkpoint",
    )
    signal_lead_sec: int = describe(
        120,
        SECTION_PREEMPT,
        "Signal lead (s)",
        "how long before the time limit the job is told to checkpoint; 0: not at all",
        unit="s",
        minimum=0,
        maximum=65535,
        hint="checkpoint this early",
    )
    # environment and escape hatches
    env_setup: tuple[str, ...] = describe(
        (),
        SECTION_ENV,
        "Setup lines",
        "shell lines run before training, one per line, e.g. module load pytorch",
        syntax="LINES",
        check="env_setup",
        max_len=4096,
        lines=True,
        hint="e.g. module load pytorch",
    )
    python: str = describe(
        "python3",
        SECTION_ENV,
        "Python",
        "the Python that runs the trainer on the nodes: python3 or a venv's python",
        syntax="PATH",
        check="python",
        max_len=4096,
        required=True,
        hint="python3 or a venv's python",
    )
    # the software environment the job runs in (spec/environments.py; README "Environments
    # and containers")
    environment: str = describe(
        "python",
        SECTION_ENV,
        "Environment",
        "what python runs in: python as given (with the setup lines); venv or conda, that "
        "env of python activated in the job; modules, the modules loaded after module purge; "
        "container, an image of container_runtime. All but python start from a clean "
        "environment (--export=NONE): your shell's variables do not reach the job",
        choices=ENVIRONMENTS,
    )
    modules: tuple[str, ...] = describe(
        (),
        SECTION_ENV,
        "Modules",
        f"modules loaded in order after module purge, e.g. cuda/12.4 pytorch/2.3 (at most "
        f"{MAX_MODULES}); for environment modules, or a venv or conda env whose Python comes "
        "from a module",
        syntax="MODULE...",
        check="modules",
        max_len=256,
        hint="e.g. cuda/12.4 pytorch/2.3",
    )
    container_runtime: str = describe(
        "",
        SECTION_ENV,
        "Container runtime",
        "what runs the image (environment container): pyxis (srun --container-image, Slurm "
        "only), apptainer or singularity (exec --nv), podman (run --pid host)",
        choices=CONTAINER_RUNTIMES,
        empty="no container",
    )
    container_image: str = describe(
        "",
        SECTION_ENV,
        "Container image",
        "the image: for pyxis an enroot URI (nvcr.io#nvidia/pytorch:24.05-py3) or an absolute "
        ".sqsh path; for apptainer an absolute .sif path, a sandbox directory or docker://...; "
        "for podman an image name",
        empty="none",
        syntax="IMAGE",
        check="container_image",
        max_len=1024,
        hint="e.g. nvcr.io#nvidia/pytorch:24.05-py3",
    )
    container_mounts: tuple[str, ...] = describe(
        (),
        SECTION_ENV,
        "Container mounts",
        f"more host paths in the container, SRC[:DST[:ro|rw]] each (at most {MAX_MOUNTS}); the "
        "run directory, data root and project directory are mounted at their own paths always",
        syntax="SRC[:DST[:ro]]...",
        check="container_mounts",
        max_len=4096,
        hint="e.g. /scratch/data:/data:ro",
    )
    extra_sbatch: tuple[str, ...] = describe(
        (),
        SECTION_ENV,
        "Extra #SBATCH",
        "more sbatch options, as shell words, e.g. --exclusive",
        syntax="OPTIONS",
        check="extra_sbatch",
        max_len=512,
        hint="e.g. --exclusive",
    )
    extra_trainer_args: tuple[str, ...] = describe(
        (),
        SECTION_ENV,
        "Extra trainer args",
        "more trainer arguments, as shell words, e.g. --compile",
        syntax="ARGS",
        check="extra_trainer_args",
        max_len=4096,
        hint="e.g. --compile",
        applies="trainer",
    )
    telemetry_sec: int = describe(
        TELEMETRY_DEFAULT_SEC,
        SECTION_ENV,
        "Telemetry every (s)",
        "how often each node records GPU and host memory and utilisation into telemetry/ "
        "(Run detail's Resources tab); 0: not at all",
        unit="s",
        minimum=0,
        maximum=3600,
        hint="0: off",
    )
    nccl_env: tuple[tuple[str, str], ...] = describe(
        (),
        SECTION_ENV,
        "NCCL env",
        "environment variables for the training processes, e.g. NCCL_DEBUG=INFO",
        check="nccl_env",
        max_len=4096,
        hint="NAME=value ...",
    )
    mail_type: str = describe(
        "",
        SECTION_ENV,
        "Mail type",
        "when Slurm itself mails you about the job (sbatch --mail-type): one or several of "
        + ", ".join(MAIL_TYPES)
        + ", comma-separated",
        empty="no mail",
        syntax="TYPES",
        pattern=MAIL_TYPE_PATTERN,
        pattern_words="Slurm mail types, comma-separated, from " + ", ".join(MAIL_TYPES),
        max_len=256,
        hint="e.g. END,FAIL; empty: no mail",
    )
    mail_user: str = describe(
        "",
        SECTION_ENV,
        "Mail to",
        "who Slurm mails (sbatch --mail-user): an address, or a user name",
        empty="the submitting user",
        syntax="ADDRESS",
        pattern=MAIL_USER_PATTERN,
        pattern_words="an e-mail address (name@host.domain) or a user name, without spaces",
        max_len=254,
        hint="e.g. me@example.org",
    )

    def __post_init__(self) -> None:
        # Accept lists and a mapping (what JSON and forms give); keep the frozen spec hashable.
        for name in _LIST_FIELDS:
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in _ENV_FIELDS:
            env: Any = getattr(self, name)
            if isinstance(env, Mapping):
                object.__setattr__(self, name, tuple((k, v) for k, v in env.items()))
            elif isinstance(env, list) and all(isinstance(p, list | tuple) for p in env):
                object.__setattr__(self, name, tuple(tuple(p) for p in env))

    @property
    def script_module(self) -> str | None:
        """The module of a ``-m package.module`` script; None for a script file."""
        if not self.script.startswith("-"):
            return None
        return self.script.split(None, 1)[-1].strip()

    @property
    def workload(self) -> str:
        """What the run trains, in a few words: ``resnet50 on cifar10``, or ``script train.py``."""
        if self.entry == "script":
            return f"script {self.script_module or self.script.rsplit('/', 1)[-1]}"
        return f"{self.model} on {self.dataset}"

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
    def cpus_per_node(self) -> int:
        """The CPUs the job asks on each node: ``cpus_per_task`` for each task there (torchrun:
        one task per node, its processes share them; srun: one task per process). The job
        script sizes each process's threads from them (docs/advisor.md, "Ranks that share a
        node's cores")."""
        tasks = self.gpus_per_node if self.launcher == "srun" else 1
        return self.cpus_per_task * max(1, tasks)

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
            if f.name in _ENV_FIELDS:
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
            kind = FIELDS[f.name].kind
            ok = json_type_ok(kind, value)
            if not ok:
                errors.append(FieldError(f.name, f"expected {KIND_WORDS[kind]}, got {value!r}"))
                continue
            if kind in ("float", "optfloat") and is_int(value):
                value = float(value)
            kwargs[f.name] = value
        if errors:
            raise SpecError(errors)
        return cls(**kwargs)

    def group_fields(self) -> dict[str, Any]:
        """The spec without its size and label: what must match for runs to compare. A
        field of :data:`KEYED_WHEN_SET` at its default is left out too."""
        d = self.to_dict()
        for name in (*SCALE_FIELDS, *LABEL_FIELDS):
            d.pop(name)
        for name in KEYED_WHEN_SET:
            if getattr(self, name) == FIELDS[name].default:
                d.pop(name)
        return d

    def group_key(self) -> str:
        """A short stable key shared by runs that differ only in nodes/GPUs per node (and name)."""
        canon = json.dumps(self.group_fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


#: Every ExperimentSpec field's description, in declaration order.
FIELDS: Final[Mapping[str, FieldSpec]] = describe_fields(ExperimentSpec)
#: Fields that set the size of a run; runs that differ only in these compare as one group.
SCALE_FIELDS: Final = tuple(name for name, f in FIELDS.items() if f.scale)
#: Fields added after runs were made: at their default they leave the group key as it was, so
#: a run made before them and an identical one made after still compare as one group (each
#: run's group is recorded in its spec.json when it is submitted).
KEYED_WHEN_SET: Final = (
    "environment", "modules", "container_runtime", "container_image", "container_mounts",
    "gpu_type",
)  # fmt: skip
#: The list fields, which JSON and forms may give as lists (and env tables as mappings).
_LIST_FIELDS: Final = tuple(name for name, f in FIELDS.items() if f.kind == "strlist")
_ENV_FIELDS: Final = tuple(name for name, f in FIELDS.items() if f.kind == "env")
