"""A container job in real podman on two nodes of the real Slurm test cluster: the Slurm form
of sbatch_templates/podman.py, and ddp-tui's cancel of it (remote/live/containers.py).

The test nodes are ``slurmd`` processes in network namespaces of their own, sharing this
machine's mounts and pids, so ``podman run --network host`` on a node joins that node's
network and the one image store serves every node. Each srun task starts its node's container
itself (``bash -c 'exec podman run --name "ddptui-$SLURM_JOB_ID-$SLURM_NODEID-0" ...'``): a
name expanded in the batch shell would be node 0's on both nodes (measured: the second
container is refused).

podman moves its containers out of the job: measured here, a plain ``scancel`` left both
nodes' containers, and the ranks in them, running. ``ddp-tui cancel`` stops them first.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.fixtures.podman_image import PodmanImage
from tests.helpers.hold import Hold
from tests.integration.story import tiny_spec, wait_state
from tests.integration.test_podman_local import containers

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_two_nodes_train_in_their_own_containers_and_cancel_stops_both(
    slurm_facade: Cluster, podman_image: PodmanImage, hold: Hold
) -> None:
    """Held by construction after epoch 1 (both ranks wait on the hold file, mounted into
    the containers): each node runs its own container under its own name, each node's
    sampler writes its file from inside, and ``ddp-tui cancel`` leaves no container."""
    cluster = slurm_facade
    # The hold's module wraps the model: the pre-queue check runs no job script to find it.
    cluster.profile = dataclasses.replace(cluster.profile, check_python=False)
    spec = hold.after_epochs(tiny_spec(nodes=2, gpus_per_node=1, epochs=3, telemetry_sec=1), 1)
    spec = spec.replace(
        environment="container",
        container_runtime="podman",
        container_image=podman_image.name,
        container_mounts=(*podman_image.mounts, f"{hold.directory}:{hold.directory}"),
    )
    view = cluster.submit(cluster.plan(spec))
    run_dir = Path(view.run_dir)
    deadline = time.monotonic() + 120
    while not (hold.waiting(0) and hold.waiting(1)):
        assert time.monotonic() < deadline, cluster.follow(view.run_id).err_lines[-20:]
        time.sleep(0.3)
    job = view.job_id
    assert sorted(containers(run_dir)) == [f"ddptui-{job}-0-0", f"ddptui-{job}-1-0"]
    for node in (0, 1):  # each node's sampler runs inside that node's container
        assert (run_dir / "telemetry" / f"node-{node}.jsonl").read_text().strip()
    t0 = time.monotonic()
    cluster.cancel(view.run_id)
    print(f"ddp-tui cancel (containers stopped, then scancel): {time.monotonic() - t0:.2f} s")
    assert containers(run_dir) == []  # stopped before the scancel
    done = wait_state(cluster, view.run_id, JobState.CANCELLED, JobState.FAILED, timeout=60)
    assert done.state is JobState.CANCELLED
    assert containers(run_dir) == []
