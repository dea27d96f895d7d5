"""GPU types by name on the real Slurm test cluster, whose GRES are typed (n1, n2 ``a100``;
n3 ``h100``; ``small`` is n1 alone): sinfo's types through the facade, a type a partition
lacks refused before Slurm would refuse it (naming what is there, which Slurm does not),
types asked by any name landing on their nodes, and Compose offering the partition's types.

The jobs' python is ``true``: a job ends at once, and where it ran is what is checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Select

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import ExperimentSpec
from ddp_tui.tui.app import DdpTuiApp
from tests.integration.story import tiny_spec, wait_state
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import open_compose, pick, type_into

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def root(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-types") / "runs"


def _profile(root: Path) -> Profile:
    return Profile(scheduler="slurm", runs_root=str(root), partition="debug", check_python=False)


@pytest.fixture(scope="module")
def cluster(root: Path) -> Iterator[Cluster]:
    c = Cluster.open(_profile(root))
    yield c
    for view in c.refresh().runs:  # leave no job of ours for the next module
        if view.state.is_active:
            c.cancel(view.run_id)
    c.close()


def _spec(**changes: object) -> ExperimentSpec:
    base = tiny_spec(name="typed", epochs=1, partition="small", time_limit="00:05:00",
                     telemetry_sec=0, python="true", device="cuda")  # fmt: skip
    return base.replace(**changes)


def test_sinfo_shows_the_types_through_the_facade(cluster: Cluster) -> None:
    parts = {p.name: p for p in cluster.partitions()}
    assert [(k.raw, k.plain, k.source, k.nodes) for k in parts["debug"].gpu_kinds] == [
        ("a100", "A100", "gres", 2),
        ("h100", "H100 80GB", "gres", 1),
    ]
    assert [(k.raw, k.nodes) for k in parts["small"].gpu_kinds] == [("a100", 1)]


def test_a_type_the_partition_lacks_is_refused_naming_those_it_has(
    cluster: Cluster, slurm_cluster: Any
) -> None:
    plan = cluster.plan(_spec(gpu_type="h100"))
    assert not plan.ok
    assert [str(e) for e in plan.errors] == [
        "gpu_type: h100 is not in partition small, which has a100 (A100, 1 node); the cluster "
        "has a100 (A100) in debug and small, and h100 (H100 80GB) in debug"
    ]

    # What ddp-tui refuses, Slurm refuses too, without a name (sbatch --test-only submits
    # nothing); the type small has it accepts.
    def test_only(gres: str) -> Any:
        argv = ["sbatch", "--test-only", "-p", "small", f"--gres={gres}", "--wrap", "true"]
        return slurm_cluster.run(argv)

    refused = test_only("gpu:h100:1")
    assert refused.returncode != 0, refused.stderr
    assert "Requested node configuration is not available" in refused.stderr
    assert test_only("gpu:a100:1").returncode == 0


def test_types_asked_by_any_name_run_on_their_nodes(cluster: Cluster, slurm_cluster: Any) -> None:
    # Another case (Slurm itself refuses H100 for h100), and a plain name.
    a100 = cluster.plan(_spec(name="typed-a100", gpu_type="A100"))
    h100 = cluster.plan(_spec(name="typed-h100", gpu_type="H100 80GB", partition="debug"))
    assert a100.ok and h100.ok, (a100.errors, h100.errors)
    assert (a100.spec.gpu_type, h100.spec.gpu_type) == ("a100", "h100")
    assert "#SBATCH --gres=gpu:a100:1\n" in a100.script
    assert "#SBATCH --gres=gpu:h100:1\n" in h100.script
    runs = [cluster.submit(a100), cluster.submit(h100)]
    for run, node in zip(runs, ("n1", "n3"), strict=True):
        done = wait_state(cluster, run.run_id, JobState.COMPLETED, JobState.FAILED, timeout=120)
        assert done.state is JobState.COMPLETED and done.job_id
        slurm_cluster.wait_sacct(done.job_id, ["COMPLETED"])
        res = slurm_cluster.run(["sacct", "-X", "-n", "-P", "-o", "NodeList", "-j", done.job_id])
        assert res.stdout.split() == [node], res.stdout


def test_the_cli_flag_renders_the_type_or_refuses_it(root: Path) -> None:
    exe = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"

    def dry_run(gpu_type: str) -> subprocess.CompletedProcess[str]:
        argv = [exe, "--scheduler", "slurm", "--runs-root", str(root), "submit", "--dry-run",
                "--partition", "small", "--time-limit", "5", "--skip-python-check",
                "--gpu-type", gpu_type]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    ok = dry_run("A100")
    assert ok.returncode == 0, ok.stderr
    assert "#SBATCH --gres=gpu:a100:1\n" in ok.stdout
    refused = dry_run("h100")
    assert refused.returncode != 0
    assert "gpu_type: h100 is not in partition small, which has a100 (A100, 1 node)" in (
        refused.stderr
    )


async def test_compose_offers_the_chosen_partitions_types(root: Path) -> None:
    profile = _profile(root)

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, prompter=prompter)

    app = DdpTuiApp(factory, profile=profile, refresh_interval=60)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh", 30)
        screen = await open_compose(pilot)
        select = screen.query_one("#f-gpu_type", Select)

        def offered() -> list[str]:
            return [str(label) for label, _ in select._options]

        assert offered() == [
            "any GPU type",
            "A100 (a100, 2 nodes)",
            "H100 80GB (h100, 1 node)",
            "custom...",
        ]
        await pick(pilot, "partition", "small")
        await wait_until(
            pilot,
            lambda: offered() == ["any GPU type", "A100 (a100, 1 node)", "custom..."],
            "small's types",
            5,
        )
        await type_into(pilot, "time_limit", "00:05:00")  # small's limit is 10 minutes
        await pick(pilot, "gpu_type", "A100", "a100")
        await wait_until(
            pilot,
            lambda: "#SBATCH --gres=gpu:a100:1" in (screen.script or ""),
            "the preview asking for a100",
            30,
        )
        assert not screen.errors, screen.errors
