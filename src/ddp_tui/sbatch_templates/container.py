"""The words that run a job's launcher in a container, per runtime, as the job script holds
them (README "Environments and containers").

What holds for every runtime:

- The batch shell stays on the host: only the launcher step (the telemetry launcher, then
  torchrun or the srun ranks) runs inside, so requeue, the USR2 trap and ``ddp-tui stacks``
  work as without a container. On Slurm a pyxis launch is always an ``srun`` step (pyxis is
  an srun plugin); apptainer and podman run a one-node launcher from the batch shell itself,
  as the python environment does, and go through ``srun`` on several nodes.
- The same paths inside as outside: the run directory is mounted at its own path and is the
  working directory; so are ``data_root`` and a script's project directory in place.
- The same pid namespace as the host (pyxis has none of its own; apptainer none by default;
  podman ``--pid host``), so the ranks' pids are the host's.
- ddp-tui's variables are passed explicitly, because an image's own values win over the
  host's (pyxis, apptainer): pyxis ``--container-env=NAMES``, apptainer ``APPTAINERENV_NAME``
  (singularity ``SINGULARITYENV_NAME``). The names are those the batch shell exports when the
  launcher starts (:data:`PASS_PATTERNS`); per-task values (``SLURM_PROCID``,
  ``CUDA_VISIBLE_DEVICES``) are never among them: each task has its own.

Every word is shell text ready for the script: user values are quoted here, and the only
expansions are ``"$RUN_DIR"``, ``"$HOME"`` and ``"$DDP_TUI_CONTAINER_ENV"``.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ddp_tui.sbatch_templates.podman import podman_args
from ddp_tui.spec import ExperimentSpec, FieldError, SpecError
from ddp_tui.spec.container_refs import APPTAINER_LIKE, Mount
from ddp_tui.spec.environments import auto_mount_paths, mount_sources

__all__ = [
    "PASS_PATTERNS",
    "ContainerLaunch",
    "MountWord",
    "apptainer_args",
    "container_launch",
    "pass_patterns",
    "pyxis_args",
]

#: The exported variables of the batch shell passed into the container by name (bash ``case``
#: patterns): ddp-tui's own, Python's, threads, the srun launcher's rendezvous, NCCL's and torch's
#: flight recorder's. A spec's ``nccl_env`` names are added (:func:`pass_patterns`).
PASS_PATTERNS: Final = (
    "DDP_TUI_*",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "PYTHONNOUSERSITE",
    "OMP_*",
    "MASTER_ADDR",
    "MASTER_PORT",
    "ACCELERATE_USE_CPU",
    "NCCL_*",
    "TORCH_NCCL_*",
    "TORCH_FR_*",
)

#: The variable that holds the run directory in the job script.
RUN_DIR_VAR: Final = '"$RUN_DIR"'
#: The variable the job script collects the passed names in (comma-separated, for pyxis).
ENV_LIST_VAR: Final = '"$DDP_TUI_CONTAINER_ENV"'


@dataclass(frozen=True)
class MountWord:
    """One mount as shell text: ``source`` and ``target`` are shell words (``"$RUN_DIR"``,
    ``"$HOME"/data``, ``/data``), ``same`` when they name one path."""

    source: str
    target: str
    read_only: bool = False

    @property
    def same(self) -> bool:
        return self.source == self.target


def _path_word(path: str) -> str:
    """``path`` as one shell word, a leading ``~/`` still the home directory."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _run_dir_mount_errors(run_dir: str, mounts: Sequence[Mount], runtime: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if "," in run_dir:  # P14 (':' cannot be in a run directory at all)
        errors.append(
            FieldError(
                "run_dir",
                f"{run_dir} cannot be mounted by {runtime}: ',' separates its mounts; use a "
                "runs_root without ','",
            )
        )
    for m in mounts:  # P13: the run directory is ddp-tui's mount
        inside = m.target == run_dir or m.target.startswith(run_dir.rstrip("/") + "/")
        hides = run_dir.startswith(m.target.rstrip("/") + "/") and m.source != m.target
        if inside or hides:
            errors.append(
                FieldError(
                    "container_mounts",
                    f"{m.text}: the run directory {run_dir} is mounted at its own path by "
                    "ddp-tui; a mount at or above it with another source would hide it",
                )
            )
    return errors


def container_mounts(spec: ExperimentSpec, run_dir: str) -> list[Mount]:
    """Every mount of ``spec``'s container, as paths (a ``~/`` path as written): the run
    directory, the paths the spec names (``data_root``, a script's project directory in
    place) at their own paths unless already inside a mount, then ``container_mounts``.
    Raises :class:`SpecError` where the run directory cannot be mounted as it must (P13,
    P14)."""
    user = list(mount_sources(spec))
    errors = _run_dir_mount_errors(run_dir, user, spec.container_runtime)
    if errors:
        raise SpecError(errors)
    found = [Mount(run_dir, run_dir)]
    for _field, path in auto_mount_paths(spec):
        norm = path if path.startswith("~") else posixpath.normpath(path)
        if any(m.covers(norm) for m in (*found, *user)):
            continue
        found.append(Mount(norm, norm))
    return found + user


def mount_words(spec: ExperimentSpec, run_dir: str) -> list[MountWord]:
    """:func:`container_mounts` as shell words, the run directory as ``"$RUN_DIR"``."""
    return [
        MountWord(
            RUN_DIR_VAR if m.source == run_dir else _path_word(m.source),
            RUN_DIR_VAR if m.target == run_dir else _path_word(m.target),
            m.read_only,
        )
        for m in container_mounts(spec, run_dir)
    ]


def pass_patterns(spec: ExperimentSpec) -> list[str]:
    """:data:`PASS_PATTERNS` and the names of ``spec``'s ``nccl_env``."""
    return list(dict.fromkeys([*PASS_PATTERNS, *(k for k, _ in spec.nccl_env)]))


def pyxis_args(*, image: str, mounts: Sequence[MountWord], workdir: str) -> list[str]:
    """pyxis's options of the ``srun`` that starts the launcher (NVIDIA/pyxis README): the
    image, every mount in one ``--container-mounts`` (``SRC:DST[:ro]``, comma-separated), the
    working directory, no home directory (the paths the job uses are mounted), and the
    variables that keep the host's value over the image's (``--container-env``)."""
    parts = []
    for m in mounts:
        if m.same and m.source == RUN_DIR_VAR:
            parts.append('"$RUN_DIR:$RUN_DIR"')
        else:
            parts.append(f"{m.source}:{m.target}" + (":ro" if m.read_only else ""))
    return [
        f"--container-image={shlex.quote(image)}",
        "--container-mounts=" + ",".join(parts),
        f"--container-workdir={workdir}",
        "--no-container-mount-home",
        f"--container-env={ENV_LIST_VAR}",
    ]


def apptainer_args(
    *, tool: str, image: str, mounts: Sequence[MountWord], workdir: str, nv: bool
) -> list[str]:
    """``apptainer exec`` (or ``singularity exec``) up to and including the image: ``--nv``
    for the GPUs (the host's driver libraries), a ``--bind`` per mount (``SRC[:DST[:ro]]``),
    and the working directory (``--pwd``). No ``--containall``/``--pid`` (a pid namespace of
    its own would hide the ranks) and no ``--cleanenv`` (Slurm's per-task variables pass)."""
    if tool not in APPTAINER_LIKE:
        raise ValueError(f"tool: {tool!r}; allowed: {', '.join(APPTAINER_LIKE)}")
    words = [tool, "exec"]
    if nv:
        words.append("--nv")
    for m in mounts:
        bind = m.source if m.same and not m.read_only else f"{m.source}:{m.target}"
        words += ["--bind", bind + (":ro" if m.read_only else "")]
    return [*words, "--pwd", workdir, shlex.quote(image)]


@dataclass(frozen=True)
class ContainerLaunch:
    """What the job script needs of a container: ``lines``, the words in front of the
    launcher (one option group a line); ``in_step`` when they are ``srun`` options (pyxis),
    which then always launches through ``srun``; ``probe``, the words that run ``$PYTHON`` in
    the image from the batch shell for a quick question (empty: none, pyxis); ``env_prefix``,
    the variable prefix that passes a value in (``APPTAINERENV_``); ``env_list`` when the
    names go in as one comma-separated list (pyxis's ``--container-env``). podman has
    neither: its own ``--env`` options name what passes."""

    runtime: str
    image: str
    lines: tuple[str, ...]
    in_step: bool
    probe: tuple[str, ...]
    env_prefix: str
    patterns: tuple[str, ...]
    env_list: bool = False


def container_launch(spec: ExperimentSpec, run_dir: str, *, multi: bool) -> ContainerLaunch:
    """The container words of ``spec``'s job in ``run_dir``; ``multi``: the launcher starts
    through ``srun`` (several nodes, or the srun launcher). Raises :class:`SpecError` where the
    run directory cannot be mounted as it must."""
    runtime, image = spec.container_runtime, spec.container_image
    patterns = tuple(pass_patterns(spec))
    if runtime == "pyxis":
        args = pyxis_args(image=image, mounts=mount_words(spec, run_dir), workdir=RUN_DIR_VAR)
        lines = (args[0], args[1], " ".join(args[2:4]), args[4])
        return ContainerLaunch(runtime, image, lines, True, (), "", patterns, env_list=True)
    if runtime in APPTAINER_LIKE:
        words = apptainer_args(
            tool=runtime,
            image=image,
            mounts=mount_words(spec, run_dir),
            workdir=RUN_DIR_VAR,
            nv=spec.device == "cuda",
        )
        probe = (runtime, "exec", shlex.quote(image))
        return ContainerLaunch(
            runtime,
            image,
            (" ".join(words[:-1]), words[-1]),
            False,
            probe,
            f"{runtime.upper()}ENV_",
            patterns,
        )
    if runtime == "podman":
        return _podman_launch(spec, run_dir, patterns, multi=multi)
    raise ValueError(f"container_runtime: {runtime!r} has no launch")


def _podman_launch(
    spec: ExperimentSpec, run_dir: str, patterns: tuple[str, ...], *, multi: bool
) -> ContainerLaunch:
    """podman's words (``podman.py``): started from the batch shell on one node, in each
    ``srun`` task on several; its version probe from the batch shell, as a second container."""
    # podman_args quotes its paths itself and mounts the run directory as its workdir; a
    # home-relative path cannot reach it unexpanded (P16 warns of those).
    paths = [
        m.text
        for m in container_mounts(spec, run_dir)[1:]
        if m.source.startswith("/") and m.target.startswith("/")
    ]
    names = [p for p in patterns if "*" not in p]
    image = spec.container_image
    scheduler = "slurm" if multi else "local"
    words = podman_args(
        image=image, mounts=paths, env_names=names, workdir=run_dir, scheduler=scheduler
    )
    probe = podman_args(
        image=image, mounts=paths, env_names=names, workdir=run_dir, scheduler="local", index=1
    )
    return ContainerLaunch("podman", image, (" ".join(words),), False, tuple(probe), "", patterns)
