"""The ``podman run`` in front of a job's launcher: its words, as the job script writes them.

Every flag here answers something measured (README "Environments and containers"), on a
Debian 12 machine with podman 4.3.1, runc and a cgroup v1 hybrid, as root:

- ``--pid host``: the ranks keep host pids, so ``ddp-tui stacks`` can signal them and the
  observation journals are named as on the host. Without it both go wrong (measured).
- ``--network host``: torchrun's rendezvous and gloo/NCCL see the node's own interfaces.
- ``--ipc host`` where ``/dev/mqueue`` exists, else ``-v /dev/shm:/dev/shm`` (podman refuses
  ``--ipc host`` without it when rootless): either way the ranks and their data loader
  workers share the host's ``/dev/shm`` instead of podman's 64 MB one.
- ``--ulimit nofile=H:H --ulimit nproc=P:P``, worked out on the node when the job runs: H is
  the shell's own hard NOFILE and P its hard NPROC capped at 32768. podman's defaults
  (NOFILE 1048576, and ``--ulimit host``, which asks for the same) fail with "error setting
  rlimit type 7" where the hard limit is lower, and any nproc above 32768 with "type 6".
- ``--env NAME`` and the globs ``SLURM*``, ``DDP_TUI_*``, ...: podman passes no variable of
  the host by default. ``SLURM*`` also passes ``SLURMD_NODENAME``, which the resource sampler
  matches processes by; ``DDP_TUI_*`` the local scheduler's job marker, so its cancel finds
  the container's processes.
- ``--name ddptui-<job>-<node>-<n> --replace``: the job's containers can be found by job
  (ddp-tui's cancel stops them on Slurm: remote/live/containers.py), and a leftover of an
  earlier attempt under the same name is replaced. Under Slurm the name is expanded in each
  task, never in the batch shell, which has ``SLURM_NODEID=0`` on every node (measured: "the
  container name is already in use"). A label names the run directory.
- Everything is mounted at its own path and the run directory is the working directory, so
  paths read the same inside and out.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Final

from ddp_tui.spec.environments import parse_mount

__all__ = [
    "CONTAINER_PREFIX",
    "ENV_GLOBS",
    "NPROC_CAP",
    "PODMAN_GLOBAL_OPTIONS",
    "RUN_DIR_LABEL",
    "container_name_prefix",
    "podman_args",
]

#: podman's own options, before ``run``. Measured here: crun fails on a cgroup v1 hybrid and
#: systemd is absent in containers, so runc and cgroupfs (both podman's choice already where
#: crun is not installed). A module constant, not a profile key: the profile does not reach
#: the templates; ``podman_args(global_options=...)`` takes another list.
PODMAN_GLOBAL_OPTIONS: Final[tuple[str, ...]] = ("--runtime", "runc", "--cgroup-manager=cgroupfs")

#: Every container a job starts is named ``ddptui-<job>-<node>-<n>``, and labelled with
#: its run directory.
CONTAINER_PREFIX: Final = "ddptui"
RUN_DIR_LABEL: Final = "ddp-tui.run-dir"

#: The most NPROC podman could set here: its own process runs with 32768 (its parent shell
#: had 96365), and conmon inherits that, so any higher limit fails with "rlimit type 6".
NPROC_CAP: Final = 32768

#: Variables passed by prefix (podman's trailing ``*``): Slurm's per-task ones, ddp-tui's own,
#: and those the job script exports for NCCL, torch's flight recorder and OpenMP.
ENV_GLOBS: Final[tuple[str, ...]] = ("SLURM*", "DDP_TUI_*", "NCCL_*", "TORCH_*", "OMP_*")

#: Passed by name whatever the caller asks: what every job script exports, or may.
_ALWAYS_ENV: Final[tuple[str, ...]] = (
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "ACCELERATE_USE_CPU",
    "CUDA_VISIBLE_DEVICES",
)

_ENV_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCHEDULERS: Final = ("local", "slurm")

# Worked out by bash on the node when the job runs; each expands to exactly one word. Written
# without single quotes, so the same text serves inside the Slurm form's ``bash -c '...'``.
_IPC: Final = '"$([ -d /dev/mqueue ] && echo --ipc=host || echo --volume=/dev/shm:/dev/shm)"'
_NOFILE: Final = '"nofile=$(ulimit -Hn):$(ulimit -Hn)"'
_NPROC: Final = (
    f'"nproc=$(n="$(ulimit -Hu)"; {{ [ "$n" = unlimited ] || (( n > {NPROC_CAP} )); }}'
    f' && n={NPROC_CAP}; echo "$n:$n")"'
)


def container_name_prefix(job_id: str) -> str:
    """What every container of job ``job_id`` is named with (``ddptui-<job>-``)."""
    return f"{CONTAINER_PREFIX}-{job_id}-"


def _env_words(env_names: Sequence[str]) -> list[str]:
    words = [w for g in ENV_GLOBS for w in ("--env", shlex.quote(g))]
    for name in dict.fromkeys([*_ALWAYS_ENV, *env_names]):
        if not _ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"env_names: {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
        words += ["--env", name]
    return words


def _job(scheduler: str) -> str:
    """The ``<job>`` of a container's name, as bash expands it. The local scheduler numbers
    jobs per state directory, so two of them (parallel test workers) would both have a job 1:
    there the name takes the job's marker (``<job id>-<token>``, new at every start), which
    still begins with the job id."""
    return "${DDP_TUI_LOCAL_JOB:-${SLURM_JOB_ID:-0}}" if scheduler == "local" else "$SLURM_JOB_ID"


def _check_scheduler(scheduler: str) -> None:
    if scheduler not in _SCHEDULERS:
        raise ValueError(f"scheduler: {scheduler!r}; allowed: {', '.join(_SCHEDULERS)}")


def podman_args(
    *,
    image: str,
    mounts: Sequence[str],
    env_names: Sequence[str],
    workdir: str,
    scheduler: str,
    index: int = 0,
    cuda: bool = False,
    global_options: Sequence[str] = PODMAN_GLOBAL_OPTIONS,
) -> list[str]:
    """The words that start ``image`` around the launcher, up to and including the image:
    the caller writes them joined by spaces, then the command (``"$PYTHON" -m ...``).

    Each item is one shell word as the script must hold it: quoted, or a deliberate run-time
    expansion in double quotes (the limits, the IPC choice, the container's name). Do not
    quote them again. ``mounts``: ``container_mounts`` entries (``SRC[:DST[:ro|rw]]``), all
    mounted; ``workdir`` (an absolute path, the run directory) is mounted at its own path
    unless a mount already targets it, is the working directory, and labels the container
    (``ddp-tui.run-dir``). ``env_names``: variables passed by name besides the globs.
    ``index``: the ``<n>`` of the container's name, when a job starts more than one container
    on a node at a time. ``cuda``: the node's GPUs through CDI (``--device nvidia.com/gpu=all
    --security-opt=label=disable``, NVIDIA's documented form; the node needs the CDI spec that
    ``nvidia-ctk cdi generate`` writes), ``CUDA_VISIBLE_DEVICES`` still choosing among them.

    ``scheduler="local"``: podman runs from the batch shell itself. ``"slurm"``: the words go
    after ``srun ...`` and start ``bash -c 'exec podman ...'`` in each task, so that what
    differs per node (its name, its limits) is worked out there, and the task's process is
    podman's client (``exec``), which forwards srun's signals to the container.
    """
    _check_scheduler(scheduler)
    if not workdir.startswith("/"):
        raise ValueError(f"workdir: {workdir!r} must be an absolute path")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"index: {index!r} must be a whole number of at least 0")
    volumes: list[str] = []
    targets: set[str] = set()
    for entry in mounts:
        mount = parse_mount(entry)  # ValueError names the entry
        if mount.target not in targets:
            targets.add(mount.target)
            volumes += ["--volume", shlex.quote(mount.text)]
    if workdir not in targets:
        volumes += ["--volume", shlex.quote(f"{workdir}:{workdir}")]
    # The rest of ``run``'s options: the same, literal, in either form.
    static = [
        "--rm",
        "--replace",
        "--network=host",
        "--pid=host",
        *(("--device", "nvidia.com/gpu=all", "--security-opt=label=disable") if cuda else ()),
        "--label",
        shlex.quote(f"{RUN_DIR_LABEL}={workdir}"),
        *_env_words(env_names),
        *volumes,
        "--workdir",
        shlex.quote(workdir),
        shlex.quote(image),
    ]
    podman = ["podman", *(shlex.quote(o) for o in global_options), "run"]
    node = "${SLURM_NODEID:-0}" if scheduler == "local" else "$SLURM_NODEID"
    name = f'"{CONTAINER_PREFIX}-{_job(scheduler)}-{node}-{index}"'
    per_node = ["--name", name, _IPC, "--ulimit", _NOFILE, "--ulimit", _NPROC]
    if scheduler == "local":
        return [*podman, *per_node, *static]
    # Expanded by each task's own bash; the static words arrive as its "$@".
    inner = " ".join(["exec", *podman, *per_node, '"$@"'])
    return ["bash", "-c", shlex.quote(inner), "podman-run", *static]
