"""An iteration loop with no epochs (nanoGPT's idiom) on the Slurm test cluster, with the
defaults a user types: rows by step windows, progress by steps, and a green verify."""

from __future__ import annotations

import pytest

from ddp_tui.remote.cluster import Cluster
from tests.integration.step_runs import check_step_run, iter_loop_spec

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_an_iteration_loop_on_the_slurm_cluster_gets_step_windows_and_verifies(
    slurm_facade: Cluster,
) -> None:
    view = slurm_facade.submit(slurm_facade.plan(iter_loop_spec(partition="debug")))
    check_step_run(slurm_facade, view.run_id, view.run_dir)
