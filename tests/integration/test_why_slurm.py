"""Why a job waits, on the real Slurm test cluster: ``Cluster.why_waiting`` and
``ddp-tui why RUN|JOBID``.

Every job is held where the test needs it by construction, never by timing: ``sbatch --hold``
(held), ``--dependency=afterok:`` on that held job (dependency), and ``--reservation=`` to a
reservation on n1 that begins an hour later (reservation). Slurm labels a job's reason in its
next scheduling pass (``sched_interval=2``); the setup waits for those labels, bounded. The
jobs and the reservation are made once for the module and removed at its end, pass or fail.

What sprio and sshare say depends on the cluster's priority plugin, read from ``scontrol show
config``: the suite's cluster runs priority/basic, where sprio refuses every job; the tests
hold the explanation to what this cluster really answers. The answers of a multifactor
cluster with enforced limits are recorded in tests/remote/data/wait.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.cli.entry import main
from ddp_tui.config import Profile
from ddp_tui.diagnosis.pending import WaitCategory
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import tiny_spec, wait_for

pytestmark = pytest.mark.slurm

RESERVATION = "ddp-tui-why-later"


@dataclass(frozen=True)
class Waiting:
    """The module's pending jobs, by what holds each."""

    held: str
    dependent: str
    reserved: str
    priority_type: str


def _sbatch(slurm_cluster: Any, *args: str) -> str:
    res = slurm_cluster.run(
        ["sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null", *args, "--wrap", "sleep 60"]
    )
    assert res.returncode == 0, res.stderr
    return str(res.stdout.strip())


def _reason(slurm_cluster: Any, job_id: str) -> str:
    res = slurm_cluster.run(["scontrol", "--oneliner", "show", "job", job_id])
    fields = dict(t.split("=", 1) for t in str(res.stdout).split() if "=" in t)
    return fields.get("Reason", "")


def _wait_reason(slurm_cluster: Any, job_id: str, reason: str, timeout: float = 30.0) -> None:
    """Until Slurm's scheduling pass labels the job (it is held there by construction)."""
    deadline = time.monotonic() + timeout
    while _reason(slurm_cluster, job_id) != reason:
        assert time.monotonic() < deadline, f"job {job_id}: {_reason(slurm_cluster, job_id)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def waiting(slurm_cluster: Any) -> Iterator[Waiting]:
    jobs: list[str] = []
    made = slurm_cluster.run(
        [
            "scontrol", "create", "reservation", f"ReservationName={RESERVATION}",
            "StartTime=now+1hour", "Duration=30", "Nodes=n1", "Users=root",
        ]
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        jobs.append(_sbatch(slurm_cluster, "--hold"))
        jobs.append(_sbatch(slurm_cluster, f"--dependency=afterok:{jobs[0]}"))
        jobs.append(_sbatch(slurm_cluster, f"--reservation={RESERVATION}"))
        _wait_reason(slurm_cluster, jobs[0], "JobHeldUser")
        _wait_reason(slurm_cluster, jobs[1], "Dependency")
        _wait_reason(slurm_cluster, jobs[2], "Reservation")
        config = slurm_cluster.run(["scontrol", "show", "config"]).stdout
        (ptype,) = [
            ln.split("=", 1)[1].strip()
            for ln in config.splitlines()
            if ln.startswith("PriorityType ")
        ]
        held, dependent, reserved = jobs
        yield Waiting(held, dependent, reserved, priority_type=ptype)
    finally:
        if jobs:
            slurm_cluster.run(["scancel", *jobs])
        slurm_cluster.run(["scontrol", "delete", f"ReservationName={RESERVATION}"])


@pytest.fixture(scope="module")
def cluster(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("why") / "runs"
    # check_python off: a held run never starts, so its Python need not be checked first.
    profile = Profile(scheduler="slurm", runs_root=str(root), partition="debug", check_python=False)
    c = Cluster.open(profile)
    yield c
    for v in c.refresh().runs:
        if v.state.is_active:
            c.cancel(v.run_id)
    c.close()


def _as_this_cluster_says(w: Any, priority_type: str) -> None:
    """sprio and sshare as this cluster's priority plugin answers them."""
    gone = {u.part: u.reason for u in w.unavailable}
    if priority_type == "priority/basic":
        assert "priority/basic" in gone["priority"], gone
        assert gone["fair_share"].startswith("not used under priority/basic (sshare says"), gone
        assert w.priority == () and w.fair_share == ()
    else:
        assert w.fair_share, gone


def test_a_job_on_a_held_job_waits_for_its_dependency(cluster: Cluster, waiting: Waiting) -> None:
    w = cluster.why_waiting(waiting.dependent)
    assert (w.state, w.category, w.reason) == ("PENDING", WaitCategory.DEPENDENCY, "Dependency")
    assert w.run_id is None and w.scheduler == "slurm"
    (dep,) = w.dependencies
    assert (dep.job_id, dep.kind, dep.status) == (waiting.held, "afterok", "unfulfilled")
    assert (dep.state, dep.reason) == ("PENDING", "JobHeldUser")
    _as_this_cluster_says(w, waiting.priority_type)


def test_a_job_behind_a_reservation_names_it(cluster: Cluster, waiting: Waiting) -> None:
    w = cluster.why_waiting(waiting.reserved)
    assert w.category is WaitCategory.RESERVATION and w.reservation == RESERVATION
    (resv,) = w.reservations
    assert (resv.name, resv.state, resv.nodes) == (RESERVATION, "INACTIVE", "n1")
    assert resv.start < resv.end


def test_a_held_job_is_held_and_says_how_to_release_it(cluster: Cluster, waiting: Waiting) -> None:
    w = cluster.why_waiting(waiting.held)
    assert w.category is WaitCategory.HELD and w.needs_action
    assert f"scontrol release {waiting.held}" in w.advice
    assert w.estimated_start == ""  # squeue --start says N/A for a held job
    _as_this_cluster_says(w, waiting.priority_type)


def test_why_prints_a_foreign_job_and_its_json(
    cluster: Cluster, waiting: Waiting, capsys: pytest.CaptureFixture[str]
) -> None:
    root = cluster.store.root
    args = ["--runs-root", root, "--scheduler", "slurm", "why"]
    assert main([*args, waiting.dependent, "--json"]) == 0  # waiting alone will do
    doc = json.loads(capsys.readouterr().out)
    assert (doc["job_id"], doc["category"], doc["run_id"]) == (
        waiting.dependent,
        "dependency",
        None,
    )
    assert doc["dependencies"][0]["job_id"] == waiting.held
    assert main([*args, waiting.held]) == 1  # held: the person must release it
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        f"job {waiting.held}: PENDING",
        "waits for: held",
        "reason: held by you (release it to run) [JobHeldUser]",
        f"what to do: Release it to let it start: scontrol release {waiting.held}.",
    ]


def test_a_held_run_says_why_in_the_facade_and_the_cli(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tiny_spec(name="why-held", partition="debug", extra_sbatch=("--hold",))
    run = cluster.submit(cluster.plan(spec))
    wait_for(cluster, run.run_id, lambda v: v.reason == "JobHeldUser", "JobHeldUser", 30)
    w = cluster.why_waiting(run.run_id)
    assert (w.run_id, w.job_id, w.category) == (run.run_id, run.job_id, WaitCategory.HELD)
    code = main(["--runs-root", cluster.store.root, "--scheduler", "slurm", "why", run.run_id])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1 and lines[:2] == [
        f"{run.run_id} (job {run.job_id}): PENDING",
        "waits for: held",
    ]


def test_a_missing_command_is_named_and_the_rest_stands(
    waiting: Waiting, slurm_cluster: Any, tmp_path: Path
) -> None:
    # A PATH with Slurm's clients but no sprio (the real "command not found").
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("env", "scontrol", "squeue", "sshare"):
        which = shutil.which(tool)
        assert which is not None
        os.symlink(which, bindir / tool)
    scheduler = SlurmScheduler(LocalExecutor(), env={"PATH": str(bindir), **slurm_cluster.env})
    w = scheduler.why_waiting(waiting.dependent)
    assert w.category is WaitCategory.DEPENDENCY and w.dependencies
    gone = {u.part: u.reason for u in w.unavailable}
    assert gone["priority"] == "sprio: command not found (is Slurm installed, or a module loaded?)"
