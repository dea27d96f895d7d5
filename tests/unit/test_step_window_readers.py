"""The readers of metrics.csv on a script with no epochs: its step windows are the points of
Run detail's plots, Compare's summaries and its overlay plot, at their steps."""

from __future__ import annotations

from typing import Any

from ddp_tui.remote.store.tail import PlotSample, parse_metrics_csv
from ddp_tui.reports.outcomes import Member, outcome_table
from ddp_tui.reports.results import RunData, summarize
from ddp_tui.spec import ExperimentSpec
from ddp_tui.tui.overlay_plot import overlay_lines, overlay_x

WINDOWS = parse_metrics_csv(
    "epoch,step,train_loss,throughput_samples_per_sec,tokens_per_sec,world_size\n"
    ",0,3.5,,,2\n"
    ",10,3.0,400,6400,2\n"
    ",20,2.5,420,6720,2\n"
    ",30,2.0,410,6560,2\n"
)
EPOCHS = parse_metrics_csv("epoch,step,train_loss,world_size\n1,,1.0,2\n2,,0.5,2\n")


def run(run_id: str, rows: Any, **spec: Any) -> RunData:
    doc = ExperimentSpec(name=run_id, entry="script", script="t.py", epochs=None, **spec)
    return RunData(run_id=run_id, spec=doc.to_dict(), metrics=rows, group="g")


def test_a_runs_summary_reads_its_windows_but_counts_no_epochs() -> None:
    summary = summarize(run("a", WINDOWS))
    assert summary.epochs_done == 0 and summary.epochs_total is None
    assert summary.final_train_loss == 2.0
    assert summary.throughput == 410  # the steady median: the windows after the first


def test_run_details_plot_places_windows_at_their_steps() -> None:
    sample = PlotSample(("train_loss",))
    sample.add_all(WINDOWS)
    xs, ys = sample.series()["train_loss"]
    assert xs == (0.0, 10.0, 20.0, 30.0) and ys == (3.5, 3.0, 2.5, 2.0)


def test_the_overlay_plot_draws_windows_per_step_and_epochs_per_epoch() -> None:
    windows = outcome_table("g", [Member(run("a", WINDOWS)), Member(run("b", WINDOWS, seed=1))])
    assert overlay_x(windows) == "step"
    (points, _) = overlay_lines(windows, "train_loss").values()
    assert points == [(0.0, 3.5), (10.0, 3.0), (20.0, 2.5), (30.0, 2.0)]
    epochs = outcome_table("g", [Member(run("c", EPOCHS)), Member(run("d", EPOCHS, seed=1))])
    assert overlay_x(epochs) == "epoch"
