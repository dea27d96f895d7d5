"""Real failures on the real multi-node Slurm test cluster, and what the diagnosis says of them.

Each test makes the failure happen with real parts (the trainer, torchrun, srun, slurmctld's
own time limit, ``scontrol``) and then asks the facade: ``Cluster.diagnose``, the view's
``diagnosis`` and ``reason_label``.

- a 2-node rendezvous where the second node's task never starts (its Python waits on a hold
  file before the interpreter starts, tests/helpers/held_python.py), with a short rendezvous
  timeout: torchrun's own c10d timeout, and the trainer's own under ``srun``;
- a 1-minute time limit reached while the trainer is held after its first epoch: TIMEOUT,
  with the epoch's checkpoint on disk;
- ``scontrol requeue`` of a held job: pending again, then running again; never a fault;
- a job pending behind a whole-cluster job (``Resources``), one held by its user
  (``JobHeldUser``), and one whose time limit an admin raised past the partition's
  (``PartitionTimeLimit``): the reason in words;
- a cancel of a running job by the user: ``cancelled``, nothing to fix.

Not produced here: the host OOM killer under a memory limit. The test cluster cannot enforce
one: ``TaskPlugin=task/none`` (no cgroup confinement, so no ``ConstrainRAMSpace``, no
``oom_kill`` event for slurmstepd to report, no OUT_OF_MEMORY state) and no
``JobAcctGatherParams=OverMemoryKill``; the only OOM killer left is this machine's own, and a
test must not starve the machine that runs the suite. tests/diagnosis has the recorded text.

A job that must be running (or pending) at some point is kept there by construction (a hold
file, a held job, a job that fills the cluster); the timeouts below only bound a hang.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.diagnosis.pending import pending_reason
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from tests.helpers.held_python import python_held_on
from tests.helpers.hold import Hold
from tests.integration.story import diagnosed, logs, tiny_spec, wait_for, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

ENDED = (
    JobState.COMPLETED,
    JobState.FAILED,
    JobState.CANCELLED,
    JobState.TIMEOUT,
    JobState.NODE_FAIL,
    JobState.OUT_OF_MEMORY,
)


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    """The facade for held specs: the pre-queue Python check runs the spec's set-up lines as
    the job does, so it would wait on a hold line too (or make the hold's claim directory
    outside any run): it is off here. The rendezvous test keeps it on."""
    slurm_facade.profile = dataclasses.replace(slurm_facade.profile, check_python=False)
    return slurm_facade


def slurm_spec(**changes: object) -> Any:
    return tiny_spec(partition="debug", **changes)


def ended(cluster: Cluster, run_id: str, timeout: float = 240.0) -> RunView:
    return wait_state(cluster, run_id, *ENDED, timeout=timeout)


def wait_pending_reason(
    cluster: Cluster, run_id: str, reasons: tuple[str, ...], timeout: float = 120.0
) -> RunView:
    """Refresh until the run is PENDING for one of ``reasons`` (Slurm says "None" until its
    scheduler has looked at the job)."""
    return wait_for(
        cluster,
        run_id,
        lambda v: v.state is JobState.PENDING and v.reason in reasons,
        f"PENDING with a reason in {reasons}",
        timeout,
    )


def assert_in_words(run: RunView, code: str) -> None:
    """The Jobs reason is the pending reason in words, not Slurm's code."""
    assert run.reason == code
    label = run.reason_label
    assert label == pending_reason(code), label
    assert label and label != code and len(label) <= 40, label


# -- rendezvous --------------------------------------------------------------------------


# n2's Python is held for as long as the test runs, so no timeout is ever long enough: 8 s
# only bounds how long n1 waits for it (counted from n1's own rendezvous, after its imports).
RENDEZVOUS = [
    # torchrun's c10d rendezvous on the first node; join_timeout through torchrun's own
    # environment variable for --rdzv-conf (PET_RDZV_CONF), as a user would set it.
    pytest.param(
        "torchrun",
        {"env_setup": ("export PET_RDZV_CONF=join_timeout=8",)},
        id="torchrun",
    ),
    # One srun task per rank, the trainer's own process-group timeout (--timeout-sec).
    pytest.param("srun", {"extra_trainer_args": ("--timeout-sec", "8")}, id="srun"),
]


@pytest.mark.parametrize(("launcher", "changes"), RENDEZVOUS)
def test_a_rendezvous_a_node_never_joins_is_a_rendezvous_timeout(
    slurm_facade: Cluster, hold: Hold, tmp_path: Path, launcher: str, changes: dict[str, Any]
) -> None:
    # n2's Python never starts while the hold file exists; n1's waits for it at the rendezvous.
    python = python_held_on("n2", hold, tmp_path / "bin")
    spec = slurm_spec(
        name=f"rdzv-{launcher}", nodes=2, launcher=launcher, python=str(python), **changes
    )
    # The pre-queue Python check runs the wrapper on this host (not n2): it passes.
    cluster = slurm_facade
    run = cluster.submit(cluster.plan(spec))
    done = ended(cluster, run.run_id, timeout=300)
    assert done.state is JobState.FAILED, done.state
    out, err = logs(done)
    assert hold.held  # n2 never started: the failure is the rendezvous, not a release
    assert "[test hold] python on n2 waits" in err
    port = 20000 + int(done.job_id or 0) % 10000
    address = f"n1:{port}"
    assert f"rendezvous={address}" in out  # where the job script said it would meet
    if launcher == "torchrun":
        assert "RendezvousTimeoutError" in err, err[-3000:]
    else:
        assert "rendezvous failed: rank 0 of 2 on n1" in err, err[-3000:]

    diagnosis = diagnosed(cluster, done, "rendezvous-timeout")
    assert diagnosis.needs_fix
    assert address in diagnosis.cause, diagnosis.cause
    assert any(e.file == f"slurm-{done.job_id}.err" for e in diagnosis.evidence)
    if launcher == "srun":  # the store counted its clients: how many never came
        assert "1 of 2 ranks joined" in diagnosis.cause, diagnosis.cause


# -- time limit --------------------------------------------------------------------------


@pytest.mark.slow(
    reason="Slurm's shortest time limit is one minute (it counts in minutes), and the test "
    "waits for Slurm itself to end the job at it"
)
def test_a_one_minute_time_limit_is_a_timeout_with_its_checkpoint(
    cluster: Cluster, hold: Hold
) -> None:
    # One process, held after its first epoch (whose checkpoint it has saved) until Slurm's
    # own time limit ends the job. No early signal and no requeue: the limit itself ends it.
    spec = hold.after_epochs(
        slurm_spec(name="limit", epochs=3, time_limit="00:01:00", signal_lead_sec=0, requeue=False),
        1,
    )
    run = cluster.submit(cluster.plan(spec))
    done = ended(cluster, run.run_id, timeout=300)
    assert done.state is JobState.TIMEOUT, done.state
    _out, err = logs(done)
    assert "DUE TO TIME LIMIT" in err, err[-3000:]
    parked = hold.waiting(0)  # the trainer reached the hold: epoch 1 and its checkpoint done
    checkpoint = Path(done.run_dir) / "checkpoints" / "latest.pt"
    if parked:
        assert checkpoint.exists()

    diagnosis = diagnosed(cluster, done, "time-limit")
    assert diagnosis.needs_fix
    assert any(e.file == "scheduler" or "TIME LIMIT" in e.text for e in diagnosis.evidence)
    if checkpoint.exists():
        assert "checkpoint" in diagnosis.cause.lower(), diagnosis.cause
        assert "resume" in diagnosis.advice.lower(), diagnosis.advice


# -- requeue -----------------------------------------------------------------------------


def test_a_requeued_job_is_pending_again_and_not_a_fault(
    cluster: Cluster, slurm_cluster: Any, hold: Hold
) -> None:
    run = cluster.submit(cluster.plan(hold.running(slurm_spec(name="requeued"))))
    wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    assert run.job_id is not None
    cluster.scheduler.requeue(run.job_id)
    # Slurm holds a requeued job back (BeginTime) before it may start again.
    slurm_cluster.wait_job(run.job_id, ["PENDING", "REQUEUED"], timeout=60)
    again = wait_for(
        cluster,
        run.run_id,
        lambda v: v.state in (JobState.PENDING, JobState.REQUEUED, JobState.RUNNING),
        "the requeued job back in the queue",
        60,
    )
    assert again.diagnosis is None or not again.diagnosis.needs_fix, again.diagnosis
    if again.state is JobState.PENDING and again.reason not in ("", "None"):
        assert again.reason_label == pending_reason(again.reason)
    # Running again, held as before: still nothing to diagnose.
    back = wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    assert back.job_id == run.job_id  # the same job, requeued in place
    assert back.diagnosis is None and back.stall is None
    assert cluster.diagnose(run.run_id) is None

    cluster.cancel(run.run_id)
    done = wait_state(cluster, run.run_id, JobState.CANCELLED, timeout=90)
    diagnosis = diagnosed(cluster, done, "cancelled")
    assert diagnosis.severity == "info" and not diagnosis.needs_fix


# -- cancel ------------------------------------------------------------------------------


def test_a_cancel_is_cancelled_and_nothing_to_fix(cluster: Cluster, hold: Hold) -> None:
    run = cluster.submit(cluster.plan(hold.running(slurm_spec(name="cancelled"))))
    wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    cluster.cancel(run.run_id)
    done = wait_state(cluster, run.run_id, JobState.CANCELLED, timeout=90)
    diagnosis = diagnosed(cluster, done, "cancelled")
    assert diagnosis.severity == "info" and not diagnosis.needs_fix
    assert done.reason_label == diagnosis.short


# -- pending -----------------------------------------------------------------------------


def test_a_job_behind_a_whole_cluster_job_waits_for_resources_in_words(
    cluster: Cluster, slurm_cluster: Any, hold: Hold
) -> None:
    # Every node, exclusively, held running: nothing else can start until it ends.
    nodes = len(slurm_cluster.nodes)
    big = hold.running(
        slurm_spec(name="fills", nodes=nodes, launcher="srun", extra_sbatch=("--exclusive",))
    )
    first = cluster.submit(cluster.plan(big))
    wait_state(cluster, first.run_id, JobState.RUNNING, timeout=120)
    second = cluster.submit(cluster.plan(slurm_spec(name="waits")))
    waiting = wait_pending_reason(cluster, second.run_id, ("Resources", "Priority"))
    assert_in_words(waiting, waiting.reason)
    assert waiting.diagnosis is None
    # On demand only: the real `squeue --start` for this one job. Slurm has an estimate
    # once its backfill pass reached the job, which no test can time: either answer is
    # right, a malformed command or answer is not (it raises, or fails the pattern).
    start = cluster.estimated_start(second.run_id)
    assert start == "" or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d( \(\w+\))?", start), start


def test_a_job_held_by_its_user_then_by_an_admin_says_so_in_words(
    cluster: Cluster, slurm_cluster: Any
) -> None:
    run = cluster.submit(cluster.plan(slurm_spec(name="held", extra_sbatch=("--hold",))))
    held = wait_pending_reason(cluster, run.run_id, ("JobHeldUser",))
    assert_in_words(held, "JobHeldUser")
    assert held.diagnosis is None
    assert run.job_id is not None
    # An admin's hold on top of the user's (root is the cluster's admin here).
    res = slurm_cluster.run(["scontrol", "hold", run.job_id])
    assert res.returncode == 0, res.stderr
    admin = wait_pending_reason(cluster, run.run_id, ("JobHeldAdmin",))
    assert_in_words(admin, "JobHeldAdmin")


def test_a_job_waiting_on_another_says_dependency_in_words(cluster: Cluster, hold: Hold) -> None:
    first = cluster.submit(cluster.plan(hold.running(slurm_spec(name="first"))))
    wait_state(cluster, first.run_id, JobState.RUNNING, timeout=120)
    after = f"--dependency=afterok:{first.job_id}"
    second = cluster.submit(cluster.plan(slurm_spec(name="after", extra_sbatch=(after,))))
    waiting = wait_pending_reason(cluster, second.run_id, ("Dependency",))
    assert_in_words(waiting, "Dependency")


@pytest.fixture
def maintenance(slurm_cluster: Any) -> Iterator[str]:
    """A maintenance reservation on every node, from now for an hour; deleted at the end."""
    name = "ddp-tui-test-maint"
    res = slurm_cluster.run(
        [
            "scontrol", "create", "reservation", f"ReservationName={name}", "StartTime=now",
            "Duration=60", "Nodes=ALL", "Users=root", "Flags=MAINT,IGNORE_JOBS",
        ]
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    try:
        yield name
    finally:
        slurm_cluster.run(["scontrol", "delete", f"ReservationName={name}"])


def test_a_job_kept_off_nodes_by_maintenance_says_so_in_words(
    cluster: Cluster, maintenance: str
) -> None:
    run = cluster.submit(cluster.plan(slurm_spec(name="maint")))
    waiting = wait_for(
        cluster,
        run.run_id,
        lambda v: v.state is JobState.PENDING and v.reason.startswith("ReqNodeNotAvail"),
        "PENDING for ReqNodeNotAvail",
        120,
    )
    label = waiting.reason_label
    assert label == pending_reason(waiting.reason), label
    assert label and not label.startswith("ReqNodeNotAvail") and len(label) <= 40, label
