"""Users' scripts in each framework's idiom, on the embedded local scheduler (2 processes).

With only ``--script``, ``--script-args``, ``--epochs`` and the size, every script gets one row
per epoch with its own time and throughput and the metrics it reports, and verify is green. A
job whose ranks trained alone (a script that never forms a group; Accelerate told not to use the
CPU; an iteration loop with no DataLoader) fails verify, and ``why`` names the cause and the
framework's fix; so does a group whose ranks never synchronise their gradients, with the ranks'
diverged weights as evidence. ``--observe off`` leaves the script to its output alone.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.verification import SYNC_CHECK
from ddp_tui.remote.model.views import RunView
from tests.integration.frameworks import (
    CASES,
    Case,
    check_framework_run,
    ended,
    framework_spec,
)
from tests.integration.story import run_json
from tests.integration.test_script_story import ls_row

pytestmark = pytest.mark.torch
pytest.importorskip("pytorch_lightning")
pytest.importorskip("accelerate")
pytest.importorskip("transformers")


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    # Where `ddp-tui ls` (test_cli.cli) looks for the local scheduler's state.
    return Cluster.open(profile, local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"))


@pytest.mark.parametrize("case", CASES)
def test_a_framework_script_runs_with_the_defaults_and_verifies(
    cluster: Cluster, case: Case
) -> None:
    view = cluster.submit(cluster.plan(framework_spec(case.script)))
    check_framework_run(cluster, view.run_id, view.run_dir, case, nodes=1)


@pytest.mark.parametrize(
    ("script", "env_setup", "framework_words"),
    [
        # Never calls init_process_group: each process trains on all the data.
        pytest.param("no_group.py", (), "init_process_group", id="no-group"),
        # Accelerate told not to use the CPU: it forms a group but runs each process alone.
        pytest.param(
            "accelerate_loop.py",
            ("export ACCELERATE_USE_CPU=0",),
            "ACCELERATE_USE_CPU=1",
            id="accelerate-no-cpu",
        ),
    ],
)
def test_ranks_that_trained_alone_fail_verify_and_why_says_so(
    cluster: Cluster, script: str, env_setup: tuple[str, ...], framework_words: str
) -> None:
    view = cluster.submit(cluster.plan(framework_spec(script, env_setup=env_setup)))
    ended(cluster, view.run_id)  # exit 0: the scheduler sees nothing wrong
    observed = run_json(view.run_dir)["observed"]
    assert observed["group"] in ("none", "alone"), observed

    checks = {c.name: c for c in cluster.verify(view.run_id)}
    group = checks["the ranks trained in one process group"]
    assert group.ok is False and group.detail == observed["reason"]

    why = cluster.diagnose(view.run_id)
    assert why is not None and why.code == "trained-alone", why
    assert "did not train together" in why.cause and framework_words in why.advice


def test_an_iteration_loop_whose_ranks_never_form_a_group_trained_alone(cluster: Cluster) -> None:
    # No DataLoader, so no epoch ever closes: the ranks' optimizer steps alone show they trained.
    spec = framework_spec("iterations_no_group.py", script_args="--max-iters 30")
    check_trained_alone(cluster, cluster.submit(cluster.plan(spec)))


def check_trained_alone(cluster: Cluster, view: RunView, ranks: int = 2) -> None:
    """Every rank stepped its own optimizer and none formed a group: verify fails, and why
    says so."""
    ended(cluster, view.run_id)
    observed = run_json(view.run_dir)["observed"]
    assert observed["group"] == "none" and observed["trained_alone"] == ranks, observed
    checks = {c.name: c for c in cluster.verify(view.run_id)}
    assert checks["the ranks trained in one process group"].ok is False
    why = cluster.diagnose(view.run_id)
    assert why is not None and why.code == "trained-alone", why


def test_a_group_that_never_syncs_its_gradients_fails_verify_and_why_shows_the_divergence(
    cluster: Cluster,
) -> None:
    spec = framework_spec("group_without_ddp.py", script_args="--max-iters 30")
    view = cluster.submit(cluster.plan(spec))
    ended(cluster, view.run_id)
    observed = run_json(view.run_dir)["observed"]
    assert observed["group"] == "formed" and observed["sync"]["state"] == "never", observed
    assert observed["divergence"]["diverged"] is True, observed

    checks = {c.name: c for c in cluster.verify(view.run_id)}
    assert checks["the ranks trained in one process group"].ok is True  # the group is real
    sync = checks[SYNC_CHECK]
    assert sync.ok is False and "parameter checksums differ" in sync.detail, sync

    why = cluster.diagnose(view.run_id)
    assert why is not None and why.code == "no-grad-sync", why
    assert "never synchronised their gradients" in why.cause and "diverged" in why.cause
    assert "DistributedDataParallel" in why.advice
    assert any("observed.divergence" in e.text for e in why.evidence), why.evidence


def test_observe_off_reads_only_the_output(cluster: Cluster) -> None:
    view = cluster.submit(cluster.plan(framework_spec("tqdm_loop.py", observe="off")))
    ended(cluster, view.run_id)
    run_dir = Path(view.run_dir)
    assert not (run_dir / "observe").exists()
    info = run_json(run_dir)
    assert "observed" not in info
    rows = cluster.follow(view.run_id).metrics
    # The bars still give the epochs and the loss, but no data wait (only observing sees it).
    assert [r["epoch"] for r in rows] == [1.0, 2.0, 3.0]
    assert all(r["train_loss"] is not None and r["data_load_time_sec"] is None for r in rows)
    world = next(c for c in cluster.verify(view.run_id) if c.name.startswith("world size"))
    assert world.ok and "as launched (not observed)" in world.detail


def test_when_no_epoch_is_recognised_every_view_says_so_and_the_hint_works(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Not observed, the tutorials' "[GPU0] Epoch 0 | Batchsize: 32 | Steps: 8" matches no preset.
    view = cluster.submit(cluster.plan(framework_spec("plain_ddp.py", observe="off")))
    ended(cluster, view.run_id)
    why = cluster.diagnose(view.run_id)
    assert why is not None and why.code == "no-epochs", why
    assert why.evidence and "Steps: 8" in why.evidence[-1].text  # the last lines of output
    quoted = why.advice.split("--metrics ", 1)[1].split(" (from the log", 1)[0]
    (hint,) = shlex.split(quoted)  # one shell word, as the user pastes it
    assert hint.startswith("regex:"), why.advice
    epoch_check = next(c for c in cluster.verify(view.run_id) if c.name.startswith("every epoch"))
    assert epoch_check.ok is False and "no epochs were recognised" in epoch_check.detail
    row = ls_row(tmp_path, view.run_id)
    assert row["EPOCH"] == "0/3" and row["REASON"] == "no epochs recognised", row

    # The suggested regex, as it stands, finds the epochs.
    spec = framework_spec("plain_ddp.py", observe="off", metrics=hint, name="fw-hinted")
    again = cluster.submit(cluster.plan(spec))
    ended(cluster, again.run_id)
    assert [r["epoch"] for r in cluster.follow(again.run_id).metrics] == [1.0, 2.0, 3.0]
