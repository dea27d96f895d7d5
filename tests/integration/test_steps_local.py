"""An iteration loop with no epochs (nanoGPT's idiom) on the embedded local scheduler, with the
defaults a user types: rows by step windows, ``60/60 it`` in ``ls``, and a green verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from tests.integration.step_runs import MAX_ITERS, check_step_run, iter_loop_spec
from tests.integration.test_script_story import ls_row

pytestmark = pytest.mark.torch


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    # Where `ddp-tui ls` (test_cli.cli) looks for the local scheduler's state.
    return Cluster.open(profile, local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"))


def test_an_iteration_loop_gets_step_windows_progress_by_steps_and_verifies(
    cluster: Cluster, tmp_path: Path
) -> None:
    view = cluster.submit(cluster.plan(iter_loop_spec()))
    check_step_run(cluster, view.run_id, view.run_dir)
    assert ls_row(tmp_path, view.run_id)["EPOCH"] == f"{MAX_ITERS}/{MAX_ITERS} it"
