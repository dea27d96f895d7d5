"""A preflight run through the facade, with the real preflight under torchrun: it shows
as a preflight (passed, world size, bus bandwidth) and verifies green on its own checks,
on the local scheduler and as a 2-node job on the real Slurm test cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from tests.integration.story import tiny_spec, wait_for

pytestmark = pytest.mark.torch


def check_preflight(cluster: Cluster, view: RunView, nodes: int, world: int) -> None:
    assert view.kind == "preflight"
    done = wait_for(
        cluster,
        view.run_id,
        lambda v: v.state.is_terminal and v.preflight is not None and v.preflight.ok is not None,
        "the preflight's end and its preflight.json",
        300,
    )
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    pf = done.preflight
    assert pf is not None and pf.ok is True and pf.world_size == world
    assert pf.bandwidth_rows > 0 and pf.busbw_gbps is not None and pf.busbw_gbps > 0
    assert done.epoch_label == "passed"
    report = json.loads((Path(view.run_dir) / "preflight.json").read_text())
    assert len(report["hosts"]) == world and len(set(report["hosts"])) == nodes
    checks = cluster.verify(view.run_id)
    assert [c.name for c in checks] == [
        "job completed",
        "every rank answered",
        "bandwidth rows are present",
        "nodes used match the request",
        "accounting summary saved to sacct.txt",
    ]
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]


def test_local_preflight_verifies_green(tmp_path: Path) -> None:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    cluster = Cluster.open(profile, local_state_dir=str(tmp_path / "state"))
    view = cluster.submit(
        cluster.plan(tiny_spec(name="pf-local", gpus_per_node=2), kind="preflight")
    )
    check_preflight(cluster, view, nodes=1, world=2)


@pytest.fixture
def slurm(slurm_cluster: Any, tmp_path: Path) -> Iterator[Cluster]:
    profile = Profile(scheduler="slurm", runs_root=str(tmp_path / "runs"), partition="debug")
    c = Cluster.open(profile)
    yield c
    for v in c.refresh().runs:
        if v.state.is_active:
            c.cancel(v.run_id)
    c.close()


@pytest.mark.slurm
def test_two_node_slurm_preflight_verifies_green(slurm: Cluster) -> None:
    view = slurm.submit(
        slurm.plan(tiny_spec(name="pf-slurm", partition="debug", nodes=2), kind="preflight")
    )
    check_preflight(slurm, view, nodes=2, world=2)
