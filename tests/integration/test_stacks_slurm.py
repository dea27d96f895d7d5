"""Every rank's stack of a hung 2-node run on the real Slurm test cluster (docs/stacks.md).

The same held script as the local story (tests/helpers/user_scripts/hang_ddp.py), one rank on
each of two nodes (torchrun on each): rank 1 waits in ``slow_step`` on n2 until the test
creates a file, rank 0 waits in all_reduce on n1. ``ddp-tui stacks`` reaches each node with
``srun --jobid --overlap --nodelist`` and shows both.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import tiny_script_spec, wait_state
from tests.integration.test_stacks_local import stacks_when_rank0_waits, wait_file

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_stacks_of_a_hung_two_node_script_show_both_ranks_on_their_nodes(
    slurm_facade: Cluster, tmp_path: Path
) -> None:
    cluster = slurm_facade
    release = tmp_path / "release"
    spec = tiny_script_spec(
        "hang_ddp.py",
        name="hang-2node",
        script_args=f"--release {release}",
        epochs=1,
        metrics="auto",
        partition="debug",
        nodes=2,
        gpus_per_node=1,
        launcher="torchrun",
    )
    view = cluster.submit(cluster.plan(spec))
    try:
        wait_file(Path(f"{release}.entered"), cluster, view.run_id, timeout=240)
        t0 = time.monotonic()
        taken = stacks_when_rank0_waits(cluster, view.run_id)
        print(f"stacks on 2 Slurm nodes: {taken.seconds:.2f} s ({time.monotonic() - t0:.2f} s)")
        print(taken.text())
        by_rank = {p.rank: p for p in taken.processes}
        assert set(by_rank) == {0, 1}, [p.summary for p in taken.processes]
        assert {by_rank[0].host, by_rank[1].host} == {"n1", "n2"}
        assert by_rank[0].top is not None and by_rank[0].top.function == "all_reduce", by_rank[
            0
        ].text
        assert by_rank[1].top is not None and by_rank[1].top.function == "slow_step", by_rank[
            1
        ].text
        assert [r.rank for r in taken.stuck if r.behind] == [1]
        assert taken.saved and all(Path(p).exists() for p in taken.saved)
    finally:
        release.write_text("")
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
