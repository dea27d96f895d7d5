"""Users' scripts in each framework's idiom on 2 nodes of the real Slurm test cluster, under
both launchers: torchrun on each node, and srun with one task per rank. Only the defaults; every
script gets its rows, its throughput and its metrics, and the group its ranks formed across the
nodes, and verify is green."""

from __future__ import annotations

import pytest

from ddp_tui.remote.cluster import Cluster
from tests.integration.frameworks import CASES, Case, check_framework_run, framework_spec

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
