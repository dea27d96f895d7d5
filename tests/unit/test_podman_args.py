"""The ``podman run`` words in front of a container job's launcher (sbatch_templates/podman.py).

The golden lines are what a job script holds. The execution tests run those words with bash
and a FAKE ``podman`` on PATH that prints the argv it got, one word a line: they check what
bash makes of the run-time parts (the limits, the IPC choice, the name per Slurm task). The
real podman runs these words in tests/integration/test_podman_local.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ddp_tui.sbatch_templates.podman import container_name_prefix, podman_args

MOUNTS = ("/usr:/usr:ro", "/data/imagenet", "/scratch/x:/x:rw")
RUN_DIR = "/runs/a b"  # a space: every literal must arrive as one word

_TAIL = (
    "--rm --replace --network=host --pid=host --label 'ddp-tui.run-dir=/runs/a b' "
    "--env 'SLURM*' --env 'DDP_TUI_*' "
    "--env 'NCCL_*' --env 'TORCH_*' --env 'OMP_*' --env PYTHONPATH --env PYTHONUNBUFFERED "
    "--env ACCELERATE_USE_CPU --env CUDA_VISIBLE_DEVICES --env MASTER_ADDR "
    "--volume /usr:/usr:ro --volume /data/imagenet:/data/imagenet --volume /scratch/x:/x "
    "--volume '/runs/a b:/runs/a b' --workdir '/runs/a b' localhost/img:1"
)
_RUNTIME = (
    '"$([ -d /dev/mqueue ] && echo --ipc=host || echo --volume=/dev/shm:/dev/shm)" '
    '--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" '
    '--ulimit "nproc=$(n="$(ulimit -Hu)"; { [ "$n" = unlimited ] || (( n > 32768 )); } '
    '&& n=32768; echo "$n:$n")"'
)
GOLDEN_LOCAL = (
    "podman --runtime runc --cgroup-manager=cgroupfs run "
    '--name "ddptui-${DDP_TUI_LOCAL_JOB:-${SLURM_JOB_ID:-0}}-${SLURM_NODEID:-0}-0" '
    + _RUNTIME
    + " "
    + _TAIL
)
GOLDEN_SLURM = (
    "bash -c "
    + shlex.quote(
        "exec podman --runtime runc --cgroup-manager=cgroupfs run "
        '--name "ddptui-$SLURM_JOB_ID-$SLURM_NODEID-0" ' + _RUNTIME + ' "$@"'
    )
    + " podman-run "
    + _TAIL
)


def words(scheduler: str, **kw: object) -> list[str]:
    args: dict[str, object] = dict(
        image="localhost/img:1",
        mounts=MOUNTS,
        env_names=("MASTER_ADDR", "PYTHONPATH"),
        workdir=RUN_DIR,
        scheduler=scheduler,
    )
    args.update(kw)
    return podman_args(**args)  # type: ignore[arg-type]


def test_local_words_are_the_golden_line() -> None:
    assert " ".join(words("local")) == GOLDEN_LOCAL


def test_slurm_words_are_the_golden_line() -> None:
    assert " ".join(words("slurm")) == GOLDEN_SLURM


def test_a_mount_of_the_run_directory_is_not_given_twice() -> None:
    line = " ".join(words("local", mounts=("/elsewhere:/runs/r1:ro",), workdir="/runs/r1"))
    assert line.count("--volume ") == 1 and "--volume /elsewhere:/runs/r1:ro" in line


def test_cuda_adds_the_gpus_through_cdi() -> None:
    line = " ".join(words("local", cuda=True))
    assert " --pid=host --device nvidia.com/gpu=all --security-opt=label=disable --label " in line
    assert "nvidia.com" not in " ".join(words("local"))


def test_index_and_other_global_options() -> None:
    line = " ".join(words("local", index=2, global_options=()))
    assert line.startswith(
        'podman run --name "ddptui-${DDP_TUI_LOCAL_JOB:-${SLURM_JOB_ID:-0}}-${SLURM_NODEID:-0}-2" '
    )
    assert container_name_prefix("123") == "ddptui-123-"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"scheduler": "pbs"}, "scheduler: 'pbs'; allowed: local, slurm"),
        ({"workdir": "runs"}, "workdir: 'runs' must be an absolute path"),
        ({"index": -1}, "index: -1 must be a whole number"),
        ({"env_names": ("A-B",)}, "env_names: 'A-B' is not a variable name"),
        ({"mounts": ("data:/data",)}, "the source must be an absolute path"),
    ],
)
def test_bad_input_names_the_argument(kw: dict[str, object], message: str) -> None:
    scheduler = str(kw.pop("scheduler", "local"))
    with pytest.raises(ValueError, match=re.escape(message)):
        words(scheduler, **kw)


# ------------------------------------------------------------ what bash makes of the words


def fake_podman(tmp_path: Path) -> dict[str, str]:
    """PATH with a FAKE podman that prints its argv, one word a line, and exits."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "podman"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def run_words(tmp_path: Path, scheduler: str, prelude: str, env: dict[str, str]) -> list[str]:
    script = f"set -euo pipefail\n{prelude}\n{' '.join(words(scheduler))} python3 -V\n"
    res = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=False
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_the_limits_are_the_shells_own_with_nproc_capped(tmp_path: Path) -> None:
    env = fake_podman(tmp_path)
    argv = run_words(tmp_path, "local", "ulimit -Sn 4096 -Hn 4096; ulimit -Su 40000 -Hu 40000", env)
    assert argv[argv.index("--ulimit") + 1] == "nofile=4096:4096"
    assert argv[argv.index("--ulimit", argv.index("--ulimit") + 1) + 1] == "nproc=32768:32768"
    argv = run_words(tmp_path, "local", "ulimit -Su 1000; ulimit -Hu 1000", env)
    assert "nproc=1000:1000" in argv
    ipc = "--ipc=host" if os.path.isdir("/dev/mqueue") else "--volume=/dev/shm:/dev/shm"
    assert ipc in argv
    # every literal is one word, the image last before the command
    assert argv[argv.index("--workdir") + 1] == RUN_DIR
    assert argv[-3:] == ["localhost/img:1", "python3", "-V"]
    assert argv[:4] == ["--runtime", "runc", "--cgroup-manager=cgroupfs", "run"]


def test_under_slurm_each_task_names_its_container_by_its_own_node(tmp_path: Path) -> None:
    """The batch shell has SLURM_NODEID=0 whatever the node (measured): the name must be
    expanded in the task. Here the "task" (bash -c) gets SLURM_NODEID=3 from srun's env,
    while the script that wrote the line has 0."""
    env = {**fake_podman(tmp_path), "SLURM_JOB_ID": "41"}
    script = " ".join(words("slurm")) + " python3 -V"
    res = subprocess.run(
        ["bash", "-c", f"SLURM_NODEID=0\nSLURM_NODEID=3 {script}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    argv = res.stdout.splitlines()
    assert argv[argv.index("--name") + 1] == "ddptui-41-3-0"
    assert argv[argv.index("--workdir") + 1] == RUN_DIR
    assert argv[-3:] == ["localhost/img:1", "python3", "-V"]
