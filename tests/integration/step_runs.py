"""An iteration loop with no epochs (tests/helpers/user_scripts/iter_loop_ddp.py, nanoGPT's
idiom) run with the defaults a user types, and what it must show once it has run through
ddp-tui: a row per logged window with its step, loss and throughput, progress by steps of the
budget read from its arguments, and a verify that checks the windows, not epochs."""

from __future__ import annotations

from pathlib import Path

from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.verification import WINDOWS_CHECK
from ddp_tui.spec import ExperimentSpec, check_form
from tests.integration.frameworks import ended
from tests.integration.story import USER_SCRIPTS, run_json, tiny_script_spec

#: The script's budget (its nanoGPT-style ``--max_iters=N`` override), its log and eval spacing.
MAX_ITERS = 60
LOGGED_STEPS = [0, 10, 20, 30, 40, 50, 60]  # iter 0..50 every 10, and the evaluation at 60


def iter_loop_spec(**size: str) -> ExperimentSpec:
    """The spec the command line makes of ``--script iter_loop_ddp.py
    --script-args=--max_iters=60`` and the size: no --epochs, no --metrics."""
    machine = tiny_script_spec("iter_loop_ddp.py")  # this machine's python, CPU, gloo
    form = {
        "name": "iter-loop",
        "entry": "script",
        "script": str(USER_SCRIPTS / "iter_loop_ddp.py"),
        "script_args": f"--max_iters={MAX_ITERS}",
        "device": "cpu",
        "backend": "gloo",
        "cpus_per_task": "2",
        "time_limit": "00:10:00",
        "python": machine.python,
        "nodes": "1",
        "gpus_per_node": "2",
        **size,
    }
    spec, errors = check_form(form)
    assert spec is not None, errors
    assert spec.epochs is None and spec.metrics == "auto", spec
    return spec


def check_step_run(cluster: Cluster, run_id: str, run_dir: str | Path) -> None:
    ended(cluster, run_id)
    rows = cluster.follow(run_id).metrics
    assert [r["step"] for r in rows] == [float(s) for s in LOGGED_STEPS], rows
    assert all(r["epoch"] is None for r in rows), rows
    for row in rows:
        assert row["train_loss"] is not None and row["world_size"] == 2.0, row
    # The windows after the first hold training steps: the journal's counters give their rates
    # (the first is the evaluation before any step).
    for row in rows[1:]:
        assert row["throughput_samples_per_sec"] and row["throughput_samples_per_sec"] > 0, row
        assert row["tokens_per_sec"] and row["tokens_per_sec"] > 0, row
        assert row["lr"] is not None, row
    evaluated = [int(r["step"] or 0) for r in rows if r["val_loss"] is not None]
    assert evaluated == [0, 20, 40, 60], rows
    assert rows[-1]["train_loss"] < rows[0]["train_loss"], rows  # it learned

    info = run_json(run_dir)
    assert info["epochs"] is None and info["epochs_completed"] == 0, info
    assert (info["max_steps"], info["steps_completed"]) == (MAX_ITERS, MAX_ITERS), info
    assert info["step_windows"] == len(LOGGED_STEPS), info
    assert info["observed"]["group"] == "formed", info["observed"]
    # The script's own line gives the loss; the journal the rates and the window's time.
    sources = info["metric_sources"]
    assert sources["train_loss"] == "stdout", sources
    assert sources["throughput_samples_per_sec"] == sources["epoch_time_sec"] == "observed", sources

    (view,) = [v for v in cluster.refresh().runs if v.run_id == run_id]
    assert view.epoch_label == f"{MAX_ITERS}/{MAX_ITERS} it", view.epoch_label
    checks = {c.name: c for c in cluster.verify(run_id)}
    assert all(c.ok for c in checks.values()), [(c.name, c.detail) for c in checks.values()]
    window = checks[WINDOWS_CHECK]
    assert window.detail == f"7/7 logged windows; {MAX_ITERS}/{MAX_ITERS} steps", window
    assert not any(name.startswith("every epoch") for name in checks), checks
