"""Users' scripts in each framework's idiom on 2 nodes of the real Slurm test cluster, under
both launchers: torchrun on each node, and srun with one task per rank. Only the defaults; every
script gets its rows, its throughput and its metrics, and the group its ranks formed across the
nodes, and verify is green."""

from __future__ import annotations

import pytest

from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.verification import SYNC_CHECK
from tests.integration.frameworks import CASES, Case, check_framework_run, ended, framework_spec
from tests.integration.story import run_json
from tests.integration.test_frameworks_local import check_trained_alone

pytestmark = [pytest.mark.slurm, pytest.mark.torch]
pytest.importorskip("pytorch_lightning")
pytest.importorskip("accelerate")
pytest.importorskip("transformers")


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    return slurm_facade


@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
@pytest.mark.parametrize("case", CASES)
def test_a_framework_script_on_two_nodes_verifies(
    cluster: Cluster, case: Case, launcher: str
) -> None:
    spec = framework_spec(
        case.script, partition="debug", nodes=2, gpus_per_node=1, launcher=launcher
    )
    view = cluster.submit(cluster.plan(spec))
    check_framework_run(cluster, view.run_id, view.run_dir, case, nodes=2)


def test_a_group_across_two_nodes_that_never_syncs_its_gradients_fails_verify(
    cluster: Cluster,
) -> None:
    spec = framework_spec(
        "group_without_ddp.py",
        script_args="--max-iters 30",
        partition="debug",
        nodes=2,
        gpus_per_node=1,
    )
    view = cluster.submit(cluster.plan(spec))
    ended(cluster, view.run_id)
    observed = run_json(view.run_dir)["observed"]
    assert observed["group"] == "formed" and len(observed["hosts"]) == 2, observed
    assert observed["sync"]["state"] == "never" and observed["divergence"]["diverged"], observed
    checks = {c.name: c for c in cluster.verify(view.run_id)}
    assert checks[SYNC_CHECK].ok is False, checks[SYNC_CHECK]
    why = cluster.diagnose(view.run_id)
    assert why is not None and why.code == "no-grad-sync", why


def test_an_iteration_loop_on_two_nodes_whose_ranks_never_form_a_group_trained_alone(
    cluster: Cluster,
) -> None:
    spec = framework_spec(
        "iterations_no_group.py",
        script_args="--max-iters 30",
        partition="debug",
        nodes=2,
        gpus_per_node=1,
    )
    check_trained_alone(cluster, cluster.submit(cluster.plan(spec)))
