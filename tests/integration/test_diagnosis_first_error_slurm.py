"""Diagnoses from the first real error, on the real multi-node Slurm test cluster.

The project (tests/integration/test_diagnosis_first_error_local.py makes it) lists ``data/`` in
``.gitignore``; its script opens ``data/train.bin`` on every rank of a 2-node run (torchrun
on each node). The snapshot leaves the file out, every rank fails, and the diagnosis is
``left-out-of-snapshot`` with the fix, not "fix the error at train.py".

And tests/helpers/user_scripts/spawn_ranks.py at 2 processes per node: ``spawn-collision``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import diagnosed, tiny_script_spec, wait_state
from tests.integration.test_diagnosis_first_error_local import (
    check_left_out,
    free_port,
    project_with_ignored_data,
)
from tests.integration.test_diagnosis_slurm import ENDED

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_a_gitignored_data_file_is_named_on_two_nodes(
    slurm_facade: Cluster, tmp_path: Path
) -> None:
    script = project_with_ignored_data(tmp_path / "proj")
    spec = tiny_script_spec(
        script,
        name="ignored-data",
        script_args="",
        partition="debug",
        nodes=2,
        gpus_per_node=1,
        launcher="torchrun",
    )
    run = slurm_facade.submit(slurm_facade.plan(spec))
    check_left_out(slurm_facade, run.run_id)


def test_a_spawning_script_at_two_processes_per_node_is_a_spawn_collision(
    slurm_facade: Cluster,
) -> None:
    spec = tiny_script_spec(
        "spawn_ranks.py",
        name="spawns",
        script_args=f"--multiprocessing-distributed --dist-url tcp://127.0.0.1:{free_port()}",
        partition="debug",
        nodes=1,
        gpus_per_node=2,
        launcher="torchrun",  # it sets LOCAL_WORLD_SIZE, which the script's markers count
    )
    run = slurm_facade.submit(slurm_facade.plan(spec))
    done = wait_state(slurm_facade, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.FAILED
    found = diagnosed(slurm_facade, done, "spawn-collision")
    assert "EADDRINUSE" in found.cause and "2 launcher processes per node" in found.cause
    assert "--gpus-per-node 1" in found.advice
