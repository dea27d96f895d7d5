"""Container jobs in real podman on the local scheduler (sbatch_templates/podman.py; README
"Environments and containers").

The image is the 20 KB host shim (tests/fixtures/podman_image.py): this machine's ``/usr``,
interpreter and venv bind-mounted read-only, so the job runs this very torch. The stories:
the words alone run torch in the image; ``ddp-tui submit --environment container
--container-runtime podman`` trains 2 gloo ranks to COMPLETED with metrics, a true verify and
telemetry; a hung script's ranks are found by ``ddp-tui stacks`` at their host pids, and
``ddp-tui cancel`` leaves no container behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.sbatch_templates.podman import PODMAN_GLOBAL_OPTIONS, RUN_DIR_LABEL, podman_args
from tests.fixtures.podman_image import PodmanImage
from tests.integration.story import tiny_script_spec, wait_state
from tests.integration.test_cli import SMALL, cli
from tests.integration.test_stacks_local import wait_file

pytestmark = pytest.mark.torch

_PROBE = """
import json, os, resource, sys, torch
open("inside.txt", "w").write("written inside")
print(json.dumps({
    "torch": torch.__version__,
    "cwd": os.getcwd(),
    "pid": os.getpid(),
    "init": open("/proc/1/comm").read().strip(),
    "node": os.environ.get("SLURMD_NODENAME"),
    "marker": os.environ.get("DDP_TUI_LOCAL_JOB"),
    "leak": os.environ.get("F_NOT_PASSED"),
    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
}))
"""


def containers(run_dir: Path | str) -> list[str]:
    """The names of every container (running or not) of the run directory ``run_dir``."""
    res = subprocess.run(
        [
            "podman",
            *PODMAN_GLOBAL_OPTIONS,
            "ps",
            "--all",
            "--filter",
            f"label={RUN_DIR_LABEL}={run_dir}",
            "--format",
            "{{.Names}}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return res.stdout.split()


def test_the_words_run_this_machines_torch_in_the_shim_with_host_pids(
    podman_image: PodmanImage, tmp_path: Path
) -> None:
    """The local form as a job script holds it, run by bash: torch imports inside, the
    working directory is the mounted run directory, ddp-tui's and Slurm's variables pass and
    nothing else does, the limits are the shell's own (nproc capped), the pids are the host's
    (its pid 1), and --rm leaves no container."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    line = " ".join(
        podman_args(
            image=podman_image.name,
            mounts=podman_image.mounts,
            env_names=(),
            workdir=str(run_dir),
            scheduler="local",
        )
    )
    marker = f"{os.getpid()}-direct"  # the name's <job>: unique to this test process
    env = {
        **os.environ,
        "SLURM_JOB_ID": "1",
        "SLURMD_NODENAME": "node-x",
        "DDP_TUI_LOCAL_JOB": marker,
        "F_NOT_PASSED": "1",
    }
    res = subprocess.run(
        ["bash", "-c", f'set -euo pipefail\n{line} "$0" -c "$1"', sys.executable, _PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=run_dir,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    assert seen["torch"] and seen["cwd"] == str(run_dir)
    assert (run_dir / "inside.txt").read_text() == "written inside"
    assert (seen["node"], seen["marker"], seen["leak"]) == ("node-x", marker, None)
    hard_nofile = int(subprocess.check_output(["bash", "-c", "ulimit -Hn"], text=True))
    assert seen["nofile"] == [hard_nofile, hard_nofile]
    assert seen["nproc"][1] <= 32768
    assert seen["init"] == Path("/proc/1/comm").read_text().strip()  # the host's pid 1
    assert seen["pid"] > 1
    assert containers(run_dir) == []


def container_args(image: PodmanImage, *mounts: str) -> list[str]:
    """The submit options that run the job in ``image`` with this machine's Python."""
    args = ["--environment", "container", "--container-runtime", "podman"]
    args += ["--container-image", image.name, "--python", sys.executable]
    return [*args, "--container-mounts", " ".join((*image.mounts, *mounts))]  # one list: words


def local_cluster(tmp_path: Path) -> Cluster:
    """The facade on the CLI's own runs root and local scheduler state (tests/integration/
    test_cli.py's ``cli``), to follow what ``ddp-tui`` submitted."""
    return Cluster.open(
        Profile(scheduler="local", runs_root=str(tmp_path / "runs")),
        local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"),
    )


def test_submit_in_podman_completes_with_metrics_a_true_verify_and_telemetry(
    podman_image: PodmanImage, tmp_path: Path
) -> None:
    """The issue's acceptance: 2 gloo ranks of the trainer in one podman container."""
    res = cli(
        tmp_path,
        "submit",
        *container_args(podman_image),
        *SMALL,
        "--device", "cpu", "--backend", "gloo", "--gpus-per-node", "2", "--telemetry-sec", "1",
    )  # fmt: skip
    run_id, _job_id = res.stdout.split()
    cluster = local_cluster(tmp_path)
    done = wait_state(cluster, run_id, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)
    run_dir = Path(done.run_dir)
    out = (run_dir / f"slurm-{done.job_id}.out").read_text()
    err = (run_dir / f"slurm-{done.job_id}.err").read_text()
    assert done.state is JobState.COMPLETED, err[-3000:]
    assert f"(inside {podman_image.name}, podman)" in out, out
    assert done.epochs_done == 2
    metrics = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(metrics) >= 3, metrics  # a header and a line per epoch
    verify = cli(tmp_path, "verify", run_id)
    assert verify.stdout.count("[ok  ]") == 6 and "FAIL" not in verify.stdout, verify.stdout
    rows = [
        json.loads(x) for x in (run_dir / "telemetry" / "node-0.jsonl").read_text().splitlines()
    ]
    assert any(r.get("host") for r in rows), rows[:3]
    assert containers(run_dir) == []


def test_stacks_find_the_ranks_in_podman_and_cancel_leaves_no_container(
    podman_image: PodmanImage, tmp_path: Path
) -> None:
    """A 2-rank script held by construction (rank 1 waits on a file, mounted into the
    container): ``ddp-tui stacks`` takes both ranks' stacks at their host pids, and ``ddp-tui
    cancel`` ends the job and its container."""
    hold = tmp_path / "hold"
    hold.mkdir()
    release = hold / "release"
    cluster = local_cluster(tmp_path)
    spec = tiny_script_spec(
        "hang_ddp.py", name="hang", script_args=f"--release {release}", epochs=1, metrics="auto"
    ).replace(
        environment="container",
        container_runtime="podman",
        container_image=podman_image.name,
        container_mounts=(*podman_image.mounts, f"{hold}:{hold}"),
    )
    view = cluster.submit(cluster.plan(spec))
    run_dir = Path(view.run_dir)
    try:
        wait_file(Path(f"{release}.entered"), cluster, view.run_id)
        assert containers(run_dir), "the job runs in no container"
        stacks = cli(tmp_path, "stacks", view.run_id)
        assert "rank 1: in slow_step at hang_ddp.py:" in stacks.stdout, stacks.stdout
        taken = json.loads(cli(tmp_path, "stacks", view.run_id, "--json").stdout)
        pids = {p["rank"]: p["pid"] for p in taken["processes"]}
        assert set(pids) == {0, 1}, taken
        # the host's own pids: their environment names the run
        assert all(_runs_in(pid, run_dir) for pid in pids.values()), pids
        cli(tmp_path, "cancel", view.run_id)
        done = wait_state(cluster, view.run_id, JobState.CANCELLED, JobState.FAILED, timeout=60)
        assert done.state is JobState.CANCELLED
    finally:
        release.write_text("")  # a failed test leaves no rank waiting
    assert containers(run_dir) == []
    assert not [pid for pid in pids.values() if _runs_in(pid, run_dir)]


def _runs_in(pid: int, run_dir: Path) -> bool:
    """Whether ``pid`` is alive and a process of the run in ``run_dir`` (not a reused pid)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"DDP_TUI_RUN_DIR={run_dir}".encode() in environ
