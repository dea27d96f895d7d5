"""Job scripts for a spec: one pure function per script, rendered from Jinja2 templates.

Every value a user types reaches the script either shell-quoted (``shquote``) or after
:func:`ddp_tui.spec.validate` has held it to a strict pattern (everything on ``#SBATCH``
lines, which cannot be quoted). The one deliberate exception is ``env_setup``: those lines
are the user's own shell code and run verbatim. The same script runs under Slurm and under
the local scheduler (``bash job.sbatch``, where the ``#SBATCH`` lines are comments).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import jinja2

from ddp_tui.sbatch_templates.environment import environment_context
from ddp_tui.spec import (
    FIELDS,
    ExperimentSpec,
    FieldError,
    SpecError,
    format_time_limit,
    parse_time_limit,
    validate,
)
from ddp_tui.spec.environments import clean_environment
from ddp_tui.spec.gpu_types import render_error as gpu_type_render_error
from ddp_tui.spec.gpu_types import split_gpu_type

__all__ = [
    "PREFLIGHT_MAX_MINUTES",
    "check_run_dir",
    "directive",
    "render_adopted",
    "render_array",
    "render_errors",
    "render_preflight",
    "render_training",
    "resource_directives",
    "sbatch_directives",
    "script_launch_args",
    "shquote",
    "trainer_args",
]

#: The module every worker of a user's script runs: it starts the script and, on rank 0,
#: copies its stdout to the log and parses it into metrics.csv (``ddp_tui.scriptrun``).
SCRIPT_RUNNER: Final = "ddp_tui.scriptrun"
#: Where a snapshot of the user's project lands in the run directory (runs.PROJECT_DIR).
PROJECT_SUBDIR: Final = "project"

#: A preflight only checks collectives; a short limit also lets it backfill sooner.
PREFLIGHT_MAX_MINUTES: Final = 15

#: A constraint of one feature, which needs no parentheses to be AND-ed with another.
_WORD: Final = re.compile(r"[A-Za-z0-9_.-]+")

# The run dir lands on #SBATCH --output/--error/--chdir lines, which cannot be quoted; '%' is
# excluded because sbatch expands it in file name patterns.
_RUN_DIR_RE: Final = re.compile(r"/[A-Za-z0-9_.,+@=/-]*")


def shquote(value: object) -> str:
    """Quote ``value`` as one shell word."""
    return shlex.quote(str(value))


def shquote_home(value: object) -> str:
    """Like :func:`shquote`, but a leading ``~/`` still means the home directory."""
    text = str(value)
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        rest = text[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"/'
    return shlex.quote(text)


_ENV: Final = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent)),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["shquote"] = shquote
_ENV.filters["shquote_home"] = shquote_home


def _check(spec: ExperimentSpec, run_dir: str, *, checked: bool) -> None:
    # A submit plan has validated the spec already (once, with the cluster-aware checks);
    # what meets the #SBATCH lines only here is still checked.
    errors = [] if checked else list(validate(spec))
    errors += render_errors(spec, run_dir)
    if errors:
        raise SpecError(errors)


def render_errors(spec: ExperimentSpec, run_dir: str) -> list[FieldError]:
    """What rendering refuses beyond :func:`~ddp_tui.spec.validate`: a run directory that
    cannot go on ``#SBATCH`` lines, and a GPU type by plain name (``H100 80GB``) that no
    plan found among the cluster's partitions (a plan made without sinfo)."""
    errors = _run_dir_errors(run_dir)
    if spec.device == "cuda" and (problem := gpu_type_render_error(spec.gpu_type)):
        errors.append(FieldError("gpu_type", problem))
    return errors


def _run_dir_errors(run_dir: str) -> list[FieldError]:
    if isinstance(run_dir, str) and _RUN_DIR_RE.fullmatch(run_dir) and "//" not in run_dir:
        return []
    return [
        FieldError(
            "run_dir",
            "must be an absolute path of letters, digits and _.,+@=/- "
            f"(it goes on #SBATCH lines), got {run_dir!r}",
        )
    ]


def check_run_dir(run_dir: str) -> None:
    """Raise :class:`SpecError` where ``run_dir`` cannot go on ``#SBATCH`` lines."""
    errors = _run_dir_errors(run_dir)
    if errors:
        raise SpecError(errors)


def trainer_args(spec: ExperimentSpec) -> list[str]:
    """The trainer's command-line arguments for ``spec`` (without ``--run-dir``), unquoted."""
    s = spec
    args = ["--model", s.model, "--dataset", s.dataset]
    if s.data_root:
        args += ["--data-root", s.data_root]
    if s.download:
        args.append("--download")
    if s.target:
        args += ["--target", s.target]
    if s.num_classes is not None:
        args += ["--num-classes", str(s.num_classes)]
    if s.dataset == "synthetic":
        if s.synthetic_samples is not None:
            args += ["--synthetic-samples", str(s.synthetic_samples)]
        if s.synthetic_val_samples is not None:
            args += ["--synthetic-val-samples", str(s.synthetic_val_samples)]
        if s.synthetic_shape:
            args += ["--synthetic-shape", s.synthetic_shape]
    args += [
        "--epochs",
        str(s.epochs or FIELDS["epochs"].default),  # validated: the trainer's is never None
        "--batch-size",
        str(s.batch_per_gpu),
    ]
    if s.lr is not None:
        args += ["--lr", repr(float(s.lr))]
    args += [
        "--lr-scaling",
        s.lr_scaling,
    ]
    if s.base_batch is not None:
        args += ["--base-batch-size", str(s.base_batch)]
    args += [
        "--optimizer",
        s.optimizer,
        "--schedule",
        s.schedule,
        "--warmup-epochs",
        str(s.warmup_epochs),
        "--precision",
        s.precision,
        "--workers",
        str(s.workers),
        "--seed",
        str(s.seed),
        "--backend",
        s.backend,
    ]
    if s.max_steps_per_epoch is not None:
        args += ["--max-steps-per-epoch", str(s.max_steps_per_epoch)]
    if s.decode != "auto":  # auto is the trainer's own default: job scripts stay as they were
        args += ["--decode", s.decode]
    args += list(s.extra_trainer_args)
    return args


def script_target(spec: ExperimentSpec) -> tuple[str, list[str]]:
    """Where a user's script runs from, and what python is given to run it there.

    A snapshot's paths are the app machine's absolute paths (the plan resolves them); the
    script runs from the project's copy in the run directory. In place, the script runs where
    it is on the cluster, from the project directory or else its own directory."""
    s = spec
    project = s.project_dir or posixpath.dirname(s.script) or "."
    if s.script_module:
        target = ["-m", s.script_module]
    elif s.code_mode == "snapshot":
        target = [posixpath.relpath(s.script, project)]
    else:
        target = [s.script]
    return (PROJECT_SUBDIR if s.code_mode == "snapshot" else project), target


def script_launch_args(spec: ExperimentSpec, run_dir: str) -> list[str]:
    """The wrapper's arguments for a user's script (without ``--run-dir``), unquoted:
    its options, ``--``, then the script (or ``-m module``) and the script's own words."""
    s = spec
    cwd, target = script_target(s)
    if cwd == PROJECT_SUBDIR:
        cwd = f"{run_dir}/{PROJECT_SUBDIR}"
    args = ["--cwd", cwd, "--metrics", s.metrics]
    for src, dst in s.metrics_columns:
        args += ["--column", f"{src}={dst}"]
    if s.samples_per_epoch is not None:
        args += ["--samples-per-epoch", str(s.samples_per_epoch)]
    if s.epochs is not None:
        args += ["--epochs", str(s.epochs)]
    if s.max_steps is not None:
        args += ["--max-steps", str(s.max_steps)]
    args += ["--world-size", str(s.world_size), "--backend", s.backend]
    if s.launcher == "srun":
        args.append("--local-env-from-slurm")
    if s.observe == "off":
        args += ["--observe", "off"]
    return [*args, "--", *target, *shlex.split(s.script_args)]


def sbatch_directives(
    spec: ExperimentSpec,
    run_dir: str,
    *,
    job_name: str | None = None,
    time_minutes: int | None = None,
    requeue: bool | None = None,
    signal: bool = True,
) -> list[str]:
    """The ``#SBATCH`` options for ``spec``: ours sorted by name, then ``extra_sbatch`` in order.

    ``spec`` must already be valid (the render functions check); nothing here is quoted."""
    s = spec
    minutes = parse_time_limit(s.time_limit) if time_minutes is None else time_minutes
    do_requeue = s.requeue if requeue is None else requeue
    tasks_per_node = s.gpus_per_node if s.launcher == "srun" else 1
    opts: dict[str, str | None] = {
        "chdir": run_dir,
        "cpus-per-task": str(s.cpus_per_task),
        "error": f"{run_dir}/slurm-%j.err",
        "job-name": job_name or s.name,
        "nodes": str(s.nodes),
        "ntasks-per-node": str(tasks_per_node),
        # A requeued job keeps its id; append so the first attempt's log survives.
        "open-mode": "append",
        "output": f"{run_dir}/slurm-%j.out",
        "time": format_time_limit(minutes),
    }
    gres_type, feature = split_gpu_type(s.gpu_type) if s.device == "cuda" else ("", "")
    if s.device == "cuda":
        # A GRES type asks for its GPUs by name; a feature's kind keeps untyped GPUs and
        # adds the feature to the constraint (README, "GPU types").
        opts["gres"] = (
            f"gpu:{gres_type}:{s.gpus_per_node}" if gres_type else f"gpu:{s.gpus_per_node}"
        )
    for name in ("partition", "account", "qos", "constraint", "mem", "mail_type", "mail_user"):
        value = getattr(s, name)
        if value:  # only when set: a spec without them renders as before
            opts[name.replace("_", "-")] = value
    if feature:
        own = s.constraint
        if own and not _WORD.fullmatch(own):
            own = f"({own})"  # the user's own expression stays one term
        opts["constraint"] = f"{own}&{feature}" if own else feature
    if clean_environment(s):  # the python environment renders as before: no --export
        opts["export"] = "NONE"
    if signal and s.signal_lead_sec > 0:
        # B: signals only the batch shell, which forwards SIGTERM to the launcher.
        opts["signal"] = f"B:USR2@{s.signal_lead_sec}"
    opts["requeue" if do_requeue else "no-requeue"] = None
    lines = [f"--{k}" if v is None else f"--{k}={v}" for k, v in sorted(opts.items())]
    return lines + list(s.extra_sbatch)


def _arg_lines(args: list[str]) -> list[str]:
    """Quoted arguments, one option (with its value) per line, for a readable script.

    A leading ``~/`` still means the home directory, as it would typed at a shell."""
    lines: list[list[str]] = []
    for i, arg in enumerate(args):
        is_value = i > 0 and args[i - 1].startswith("--") and not arg.startswith("--")
        if is_value and lines and len(lines[-1]) == 1 and "=" not in args[i - 1]:
            lines[-1].append(shquote_home(arg))
        else:
            lines.append([shquote_home(arg)])
    return [" ".join(words) for words in lines]


def _context(
    spec: ExperimentSpec,
    run_dir: str,
    *,
    module: str,
    args: list[str],
    directives: list[str],
    requeue: bool,
    title: str,
    telemetry_sec: int = 0,
) -> dict[str, Any]:
    s = spec
    if s.launcher == "srun":
        mode = "srun"
    elif s.nodes > 1:
        mode = "torchrun_multi"
    else:
        mode = "torchrun_single"
    return {
        "title": title,
        "script": module == SCRIPT_RUNNER,
        "spec": s,
        "run_dir": run_dir,
        "directives": directives,
        "mode": mode,
        "module": module,
        "arg_lines": _arg_lines(args),
        "requeue": requeue,
        "telemetry_sec": telemetry_sec,
        # NCCL training turns on PyTorch's flight recorder (docs/flight-recorder.md).
        "flight_recorder": s.backend == "nccl" and title == "training",
        "cpus_per_node": s.cpus_per_node,
        "nccl_env": list(s.nccl_env),
        "env_setup": list(s.env_setup),
        "world_size": s.world_size,
        "ntasks": s.world_size if s.launcher == "srun" else s.nodes,
        "tasks_per_node": s.gpus_per_node if s.launcher == "srun" else 1,
        **_launch_words(environment_context(s, run_dir, mode=mode)),
    }


def _launch_words(env: dict[str, Any]) -> dict[str, Any]:
    """The environment's values (``environment.py``) and the words a container puts in
    front of the launcher and of the flight recorder's version probe ("" without one)."""
    container = env["container"]
    lines = container.lines if container is not None else ()
    probe = container.probe if container is not None else ()
    return {
        **env,
        "launch_prefix": "".join(f"{line} \\\n    " for line in lines),
        "fr_probe": "".join(f"{word} " for word in probe),
    }


def render_training(spec: ExperimentSpec, run_dir: str, *, checked: bool = False) -> str:
    """The training job script for ``spec`` writing into ``run_dir`` (an absolute path).

    Raises :class:`~ddp_tui.spec.SpecError` listing every problem when the spec is invalid.
    ``checked=True`` says the caller has validated ``spec`` already (a submit plan), so it
    is not validated again; ``run_dir`` always is."""
    _check(spec, run_dir, checked=checked)
    script = spec.entry == "script"
    ctx = _context(
        spec,
        run_dir,
        module=SCRIPT_RUNNER if script else "ddp_tui.trainer",
        args=script_launch_args(spec, run_dir) if script else trainer_args(spec),
        directives=sbatch_directives(spec, run_dir),
        requeue=spec.requeue,
        title="training",
        telemetry_sec=spec.telemetry_sec,
    )
    return _ENV.get_template("training.sbatch.j2").render(ctx)


def render_preflight(spec: ExperimentSpec, run_dir: str, *, checked: bool = False) -> str:
    """A preflight job on ``spec``'s allocation shape: the trainer's collective checks only.

    Same nodes, processes, GPUs, partition and environment as the training job; at most
    :data:`PREFLIGHT_MAX_MINUTES` minutes, and never requeued. ``checked`` as for
    :func:`render_training`."""
    _check(spec, run_dir, checked=checked)
    minutes = min(parse_time_limit(spec.time_limit), PREFLIGHT_MAX_MINUTES)
    ctx = _context(
        spec,
        run_dir,
        module="ddp_tui.trainer.preflight",
        args=["--backend", spec.backend],
        directives=sbatch_directives(
            spec,
            run_dir,
            job_name=f"{spec.name[:54]}-preflight",
            time_minutes=minutes,
            requeue=False,
            signal=False,
        ),
        requeue=False,
        title="preflight",
    )
    return _ENV.get_template("preflight.sbatch.j2").render(ctx)


#: The sbatch options that name one job's place and files: the members of a job array
#: differ in these only.
_PER_RUN_OPTIONS: Final = frozenset({"chdir", "error", "job-name", "output"})


def resource_directives(spec: ExperimentSpec) -> tuple[str, ...]:
    """The ``#SBATCH`` options of ``spec``'s training job that set what it asks Slurm for
    (nodes, tasks, GPUs, partition, account, QOS, time, signal, requeue, extra lines):
    the members of a sweep whose options are equal can go to Slurm as one job array."""
    return tuple(
        d
        for d in sbatch_directives(spec, "/", job_name="-")
        if d.removeprefix("--").partition("=")[0] not in _PER_RUN_OPTIONS
    )


def render_array(
    spec: ExperimentSpec,
    run_dirs: Sequence[str],
    array_dir: str,
    *,
    job_name: str,
    max_concurrent: int | None = None,
) -> str:
    """The job array script over ``run_dirs`` (each holding its member's own checked
    ``job.sbatch``): ``--array=0-<n-1>`` (``%K`` with ``max_concurrent``), the resource
    options of ``spec`` (which the caller made sure every member shares), and
    ``array_dir`` for the array's own place and the few lines a task logs before it
    switches to its member's logs."""
    if not run_dirs:
        raise ValueError("a job array needs at least one member")
    for path in (*run_dirs, array_dir):
        _check(spec, path, checked=True)
    throttle = f"%{max_concurrent}" if max_concurrent else ""
    own = [
        f"--array=0-{len(run_dirs) - 1}{throttle}",
        f"--chdir={array_dir}",
        f"--error={array_dir}/slurm-%A_%a.err",
        f"--job-name={job_name[:64]}",
        f"--output={array_dir}/slurm-%A_%a.out",
    ]
    ctx = {
        "directives": [*own, *resource_directives(spec)],
        "members": list(run_dirs),
        "limit": max_concurrent or 0,
    }
    return _ENV.get_template("array.sbatch.j2").render(ctx)


#: A value an ``#SBATCH`` line can carry as it is: sbatch splits those lines at spaces, reads
#: quotes and ``#`` and expands ``%`` in file names, so none of those.
_DIRECTIVE_VALUE: Final = re.compile(r"[A-Za-z0-9_.,:+=@/&|!()\[\]*-]*")


def directive(option: str, value: str) -> str | None:
    """``--option=value`` (``--option`` for a flag's ""), or None where the value cannot
    go on an ``#SBATCH`` line as it is (a space, a quote, ``#``, ``%``)."""
    if not re.fullmatch(r"[a-z][a-z-]*", option) or not _DIRECTIVE_VALUE.fullmatch(value):
        return None
    return f"--{option}={value}" if value else f"--{option}"


def render_adopted(
    run_dir: str,
    *,
    job_id: str,
    directives: Sequence[str],
    work_dir: str,
    command: Sequence[str],
) -> str:
    """The ``job.sbatch`` of a run made of job ``job_id``, which ddp-tui did not submit: a
    retry submits it. It asks for what the job was given (``directives``, each from
    :func:`directive`), logs to ``slurm-%j.out``/``.err`` in ``run_dir`` like every run, and
    runs ``command`` (the job's own script under its interpreter) from ``work_dir``, where
    the job ran."""
    check_run_dir(run_dir)
    own = [
        f"--chdir={run_dir}",
        f"--error={run_dir}/slurm-%j.err",
        # A requeued job keeps its id; append so the first attempt's log survives.
        "--open-mode=append",
        f"--output={run_dir}/slurm-%j.out",
    ]
    ctx = {
        "directives": [*own, *directives],
        "job_id": job_id,
        "work_dir": work_dir,
        "command": " ".join(shquote(word) for word in command),
    }
    return _ENV.get_template("adopted.sbatch.j2").render(ctx)
