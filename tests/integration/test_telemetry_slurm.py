"""Resource telemetry of a real 2-node run on the real Slurm test cluster, and of its requeue.

The trainer runs under torchrun on two nodes (one CPU process each), sampled every second by
one sampler per node (the job script's telemetry shim in front of each node's torchrun). Held
after its first epoch (tests/helpers/hold.py), each node's sampler writes its own file:
``node-0.jsonl`` from n1 and ``node-1.jsonl`` from n2, each counting only its own node's
processes (the test nodes share one pid namespace). Then ``scontrol requeue``: the next
attempt of the same job, held the same way by a second hold file (after epoch 2, and only
where ``SLURM_RESTART_COUNT`` is 1: :func:`held_again` says why), appends ``restart: 1`` lines
to the same files after the first attempt's, and the summary lists both attempts.

A job that must be running at some point is held there by construction; the timeouts only
bound a hang.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.spec import ExperimentSpec
from tests.helpers.hold import Hold
from tests.integration.story import tiny_spec, wait_for, wait_state
from tests.integration.test_diagnosis_slurm import ENDED
from tests.integration.test_telemetry_local import (
    assert_contract,
    node_file,
    of_kind,
    read_lines,
)

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

NODES = 2


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    """The facade for held specs: the pre-queue Python check would run the hold lines."""
    slurm_facade.profile = dataclasses.replace(slurm_facade.profile, check_python=False)
    return slurm_facade


def held_again(spec: ExperimentSpec, again: Hold) -> ExperimentSpec:
    """``spec``, its first requeued attempt (``SLURM_RESTART_COUNT`` 1) held on ``again``'s
    file after epoch 2, the way :meth:`Hold.after_epochs` (whose line exports the rest) holds
    the first attempt after epoch 1.

    After epoch 2, not at once: the gate waits at the first forward pass once enough epochs
    are done, and a resumed trainer's first forward is rank 0's alone (its FLOPs count,
    before training): rank 0 would wait there while rank 1 waits for rank 0. The first
    attempt stops in epoch 2 on the requeue's signal, so the next one resumes inside epoch 2
    and both ranks reach the gate together at the first step of epoch 3.
    """
    file = shlex.quote(str(again.file))
    line = (
        'if [ "${SLURM_RESTART_COUNT:-0}" = 1 ]; then '
        f"export DDP_TUI_TEST_HOLD={file} DDP_TUI_TEST_HOLD_AFTER=2; fi"
    )
    return spec.replace(env_setup=(*spec.env_setup, line))


def host_lines_since(run: RunView, node: int, since: float, restart: int) -> list[dict[str, Any]]:
    return [
        h
        for h in of_kind(read_lines(node_file(run, node)), "host")
        if h["t"] >= since and h["restart"] == restart
    ]


def wait_samples(
    cluster: Cluster, run: RunView, since: float, restart: int, what: str
) -> list[list[dict[str, Any]]]:
    """Until every node's file has two host lines of attempt ``restart`` taken since ``since``
    (this machine's clock: the test nodes are namespaces of it); every node's lines then."""
    got = wait_for(
        cluster,
        run.run_id,
        lambda v: (
            all(len(host_lines_since(run, k, since, restart)) >= 2 for k in range(NODES))
            or v.state in ENDED
        ),
        what,
        180,
    )
    assert got.state not in ENDED, f"the run ended ({got.state.value}) before {what}"
    return [read_lines(node_file(run, k)) for k in range(NODES)]


def test_each_node_writes_its_own_file_and_a_requeued_attempt_appends(
    cluster: Cluster, slurm_cluster: Any, hold: Hold, tmp_path: Path
) -> None:
    with Hold.create(tmp_path / "hold-again") as again:
        spec = tiny_spec(
            name="sampled",
            partition="debug",
            nodes=NODES,
            gpus_per_node=1,
            launcher="torchrun",
            telemetry_sec=1,
            epochs=3,
        )
        run = cluster.submit(cluster.plan(held_again(hold.after_epochs(spec, 1), again)))
        job = run.job_id
        assert job is not None
        parked = wait_for(
            cluster,
            run.run_id,
            lambda v: (hold.waiting(0) and hold.waiting(1)) or v.state in ENDED,
            "both ranks at the hold",
            240,
        )
        assert parked.state is JobState.RUNNING, parked.state
        first = wait_samples(cluster, run, time.time(), 0, "two samples of each held node")

        # One file per node, from its own host, counting its own rank only.
        for k, (lines, host) in enumerate(zip(first, ("n1", "n2"), strict=True)):
            assert_contract(lines, job=job, node=k)
            assert {line["host"] for line in lines} == {host}, (k, lines[:2])
            assert {line["restart"] for line in lines} == {0}
            (start,) = of_kind(lines, "start")
            assert start["gpu_source"] == "none"  # the test nodes have no GPU
            held = host_lines_since(run, k, 0.0, 0)[-2:]
            assert all(h["ranks"] == str(k) and h["rss_mib"] > 0 for h in held), held
            # torchrun and its rank: the other node's processes are not this node's.
            assert all(h["procs"] >= 2 for h in held), held
        summary = cluster.resources(run.run_id)
        assert [(h.host, h.node, h.ranks) for h in summary.hosts] == [
            ("n1", 0, "0"),
            ("n2", 1, "1"),
        ]
        assert summary.attempts == (job,)

        # Requeue: the first attempt's hold ends on its signal; the next one waits on `again`.
        # Not released early with StartTime=now (that races the old credential's revocation,
        # test_slurm_story.py): the test cluster starts it again by itself in about 12 s.
        cluster.scheduler.requeue(job)
        slurm_cluster.wait_job(job, ["PENDING", "REQUEUED", "RUNNING"], timeout=60)
        back = wait_for(
            cluster,
            run.run_id,
            lambda v: (again.waiting(0) and again.waiting(1)) or v.state in ENDED,
            "both ranks of the requeued attempt at its hold",
            240,
        )
        assert back.state is JobState.RUNNING and back.job_id == job, back.state
        after = wait_samples(cluster, run, 0.0, 1, "two samples of each requeued node")

        for k, (before, now) in enumerate(zip(first, after, strict=True)):
            assert now[: len(before)] == before, k  # appended to, not replaced
            assert_contract(now, job=job, node=k)
            restarts = [line["restart"] for line in now]
            cut = restarts.index(1)
            assert set(restarts[:cut]) == {0} and set(restarts[cut:]) == {1}, (k, restarts)
            assert [s["restart"] for s in of_kind(now, "start")] == [0, 1], k
            assert now[cut]["kind"] == "start", now[cut]
        summary = cluster.resources(run.run_id)
        assert summary.attempts == (job, f"{job}.1")
        assert [(h.host, h.node) for h in summary.hosts] == [("n1", 0), ("n2", 1)]
        assert summary.samples >= 4 * NODES

        again.release()
        done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
        assert done.state is JobState.COMPLETED, cluster.follow(run.run_id).err_lines[-30:]
