"""Compare's outcome table, ``diff`` and GPU-hours, from hand-built runs with hand-computed
answers (the pure ``ddp_tui.reports.outcomes`` and ``ddp_tui.reports.usage``), and the export
that carries them (``remote.comparison`` on a real run store)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.groups.comparison import export_comparison
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.reports.outcomes import (
    OUTCOME_COLUMNS,
    Member,
    differing_fields,
    metric_direction,
    outcome_table,
    outcomes_markdown,
    run_diff,
    sort_outcomes,
)
from ddp_tui.reports.results import RunData
from ddp_tui.reports.usage import hours_text, resource_hours
from ddp_tui.spec import ExperimentSpec

BASE = ExperimentSpec(name="base", device="cuda", nodes=1, gpus_per_node=2, epochs=3)


def member(
    run_id: str,
    values: list[float | None],
    *,
    metric: str = "val_acc",
    elapsed: float = 1800.0,
    state: str | None = "COMPLETED",
    **fields: object,
) -> Member:
    """A run of BASE with ``fields`` changed, its ``metric`` per epoch (None: not written)."""
    rows: list[dict[str, float | None]] = [
        {"epoch": float(i + 1), metric: v, "train_loss": 1.0 / (i + 1)}
        for i, v in enumerate(values)
    ]
    spec = BASE.replace(name=run_id, **fields).to_dict()
    return Member(RunData(run_id, spec, rows), elapsed_sec=elapsed, state=state)


# -- differing fields --------------------------------------------------------------------


def test_differing_fields_are_in_spec_order_and_ignore_the_name() -> None:
    specs = [
        BASE.replace(name="a", lr=0.1, batch_per_gpu=32).to_dict(),
        BASE.replace(name="b", lr=0.01, batch_per_gpu=32).to_dict(),
        BASE.replace(name="c", lr=0.1, batch_per_gpu=64, telemetry_sec=1).to_dict(),
    ]
    # Declared order: batch_per_gpu comes before lr in the spec; name and telemetry_sec are
    # labels and never count.
    assert differing_fields(specs) == ["batch_per_gpu", "lr"]


def test_size_fields_count_when_they_differ() -> None:
    specs = [BASE.replace(gpus_per_node=1), BASE.replace(gpus_per_node=2, nodes=2)]
    assert differing_fields(specs) == ["nodes", "gpus_per_node"]


def test_a_spec_json_spelling_is_the_same_value() -> None:
    # An int where the field is a float, a list where the spec holds a tuple, and a field the
    # older spec.json does not have at all (its default): none of these is a difference.
    full = BASE.replace(lr=1.0, extra_trainer_args=("--x",)).to_dict()
    short = {**full, "lr": 1, "extra_trainer_args": ["--x"]}
    del short["telemetry_sec"], short["mem"]
    assert differing_fields([full, short]) == []
    assert differing_fields([full]) == []


# -- direction and the best run ----------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "direction"),
    [
        ("val_acc", 1),
        ("val_accuracy", 1),
        ("f1", 1),
        ("val_auc", 1),
        ("val_loss", -1),
        ("val_mae", -1),
        ("val_rmse", -1),
        ("Val MSE", -1),
        ("perplexity", -1),
        ("test_error", -1),
    ],
)
def test_metric_direction_by_name(metric: str, direction: int) -> None:
    assert metric_direction(metric) == direction


def test_the_best_accuracy_is_the_highest_final_value() -> None:
    out = outcome_table(
        "g",
        [
            member("a", [0.5, 0.9, 0.7], lr=0.1),  # the best value, but not at the end
            member("b", [0.5, 0.8], lr=0.01),
            member("c", [], lr=0.001),  # no epoch yet: never the best
        ],
    )
    assert (out.metric, out.direction, out.best) == ("val_acc", 1, "b")
    assert out.frame["best"].tolist() == [run_id == "b" for run_id in out.frame.index]
    assert out.frame.loc["a", "best_val"] == 0.9 and out.frame.loc["a", "final_val"] == 0.7
    assert math.isnan(out.frame.loc["c", "final_val"])


def test_the_best_loss_is_the_lowest_final_value() -> None:
    out = outcome_table(
        "g",
        [
            member("a", [0.9, 0.4], metric="val_rmse", lr=0.1),
            member("b", [0.8, 0.6], metric="val_rmse", lr=0.01),
        ],
    )
    assert (out.metric, out.direction, out.best) == ("val_rmse", -1, "a")
    assert out.frame.loc["b", "best_val"] == 0.6  # the lowest, for a metric that counts down


def test_a_tie_goes_to_the_better_best_value() -> None:
    out = outcome_table("g", [member("a", [0.6, 0.8], lr=0.1), member("b", [0.9, 0.8], lr=0.2)])
    assert out.best == "b"


def test_no_run_with_a_value_has_no_best() -> None:
    out = outcome_table("g", [member("a", [None], lr=0.1), member("b", [], lr=0.2)])
    assert out.best is None and not out.frame["best"].any()


# -- the table ---------------------------------------------------------------------------


def test_the_frame_has_the_fields_then_the_outcomes_in_grid_order() -> None:
    runs = [
        member("r4", [0.4], lr=0.01, batch_per_gpu=64),
        member("r1", [0.1], lr=0.1, batch_per_gpu=32),
        member("r3", [0.3], lr=0.01, batch_per_gpu=32),
        member("r2", [0.2], lr=0.1, batch_per_gpu=64),
    ]
    out = outcome_table("g", runs)
    assert out.fields == ("batch_per_gpu", "lr")
    assert list(out.frame.columns) == ["batch_per_gpu", "lr", *OUTCOME_COLUMNS, "best", "state"]
    # By the first differing field, then the next: a grid read row by row.
    assert list(out.frame.index) == ["r3", "r1", "r4", "r2"]
    assert out.labels["r2"] == "batch_per_gpu=64 lr=0.1"
    assert out.series["r2"]["val_acc"] == ((1, 0.2),)
    assert out.series["r2"]["train_loss"] == ((1, 1.0),)


def test_a_group_of_one_configuration_has_no_fields_and_shows_its_scaling() -> None:
    out = outcome_table("g", [member("a", [0.5]), member("b", [0.6], gpus_per_node=4)])
    assert out.fields == ("gpus_per_node",) and out.shows_scaling
    one = outcome_table("g", [member("a", [0.5])])
    assert one.fields == () and one.shows_scaling and one.labels == {"a": "a"}
    lr = outcome_table("g", [member("a", [0.5], lr=0.1), member("b", [0.6], lr=0.2)])
    assert not lr.shows_scaling


def test_the_markdown_marks_the_best_and_shows_a_default_as_default() -> None:
    out = outcome_table("g", [member("a", [0.5], lr=0.1), member("b", [0.6], lr=None)])
    md = outcomes_markdown(out)
    (row_b,) = [line for line in md.splitlines() if line.startswith("| b ")]
    assert "| default |" in row_b and "| best |" in row_b
    assert "Metric: val_acc (higher is better)" in md
    assert "Total: 2 GPU-hours over 2 runs" in md  # 2 GPUs x 30 min each


# -- sorting -----------------------------------------------------------------------------


def test_sort_by_a_metric_puts_the_best_first_and_missing_last() -> None:
    runs = [
        member("a", [0.7], lr=0.1),
        member("b", [], lr=0.2),
        member("c", [0.9], lr=0.3),
        member("d", [0.8], lr=0.4),
    ]
    out = outcome_table("g", runs)
    assert list(sort_outcomes(out, "final_val").frame.index) == ["c", "d", "a", "b"]
    ascending = sort_outcomes(out, "final_val", descending=False)
    assert list(ascending.frame.index) == ["a", "d", "c", "b"]  # still missing last
    losses = outcome_table("g", [member(r, v, metric="val_mae", lr=i) for i, (r, v) in enumerate(
        [("a", [0.7]), ("b", [0.2]), ("c", [])]
    )])  # fmt: skip
    assert list(sort_outcomes(losses, "best_val").frame.index) == ["b", "a", "c"]


def test_sort_by_a_field_or_the_hours_ascends() -> None:
    runs = [
        member("a", [0.7], lr=0.3, elapsed=100),
        member("b", [0.5], lr=None, elapsed=300),
        member("c", [0.9], lr=0.1, elapsed=200),
    ]
    out = outcome_table("g", runs)
    assert list(sort_outcomes(out, "lr").frame.index) == ["c", "a", "b"]  # the default last
    assert list(sort_outcomes(out, "gpu_hours").frame.index) == ["a", "c", "b"]
    assert list(sort_outcomes(out, "cpu_hours").frame.index) == ["a", "c", "b"]
    sorted_out = sort_outcomes(out, "wall_sec", descending=True)
    assert list(sorted_out.frame.index) == ["b", "c", "a"]
    assert sorted_out.best == "c" and sorted_out.frame.attrs["hours_unit"] == "GPU"


def test_sort_by_an_unknown_column_names_it_and_the_allowed_ones() -> None:
    out = outcome_table("g", [member("a", [0.5], lr=0.1), member("b", [0.6], lr=0.2)])
    with pytest.raises(ValueError, match="'accuracy'") as err:
        sort_outcomes(out, "accuracy")
    assert "lr, final_val, best_val, epochs_done, wall_sec, gpu_hours, throughput" in str(err.value)
    with pytest.raises(ValueError, match="'batch_per_gpu'"):
        sort_outcomes(out, "batch_per_gpu")  # a field, but it does not differ here


# -- hours -------------------------------------------------------------------------------


def test_gpu_hours_are_the_allocated_gpus_times_the_elapsed_time() -> None:
    spec = BASE.replace(nodes=2, gpus_per_node=4)
    assert resource_hours(spec, 1800) == (4.0, "GPU")  # 8 GPUs x half an hour
    assert resource_hours(spec.to_dict(), 1800) == (4.0, "GPU")  # spec.json works alike
    assert resource_hours(spec, -5) == (0.0, "GPU") and resource_hours(spec, math.nan)[0] == 0


def test_cpu_hours_are_the_allocated_cores() -> None:
    # torchrun: one task per node, its cpus_per_task cores shared by the processes.
    torchrun = BASE.replace(device="cpu", nodes=2, gpus_per_node=4, cpus_per_task=3)
    assert resource_hours(torchrun, 3600) == (6.0, "CPU")
    # srun: one task per process, each with cpus_per_task cores.
    srun = torchrun.replace(launcher="srun")
    assert resource_hours(srun, 3600) == (24.0, "CPU")
    assert hours_text(6.0, "CPU") == "6 CPU" and hours_text(0.01234, "GPU") == "0.0123"
    assert hours_text(1234.5, "GPU") == "1234" and hours_text(999.4, "GPU") == "999"


def test_a_mixed_group_says_both_units() -> None:
    out = outcome_table(
        "g",
        [
            member("a", [0.5], elapsed=3600),  # 2 GPUs: 2 GPU-hours
            member("b", [0.6], elapsed=3600, device="cpu", cpus_per_task=4),  # 4 CPU-hours
        ],
    )
    assert out.fields == ("device",)
    assert out.frame.attrs["hours_unit"] == "GPU/CPU" and out.total_hours == 6.0
    assert out.frame["gpu_hours"].to_dict() == {"a": 2.0, "b": 4.0}  # each in its own unit


# -- diff ----------------------------------------------------------------------------------


def test_diff_sets_fields_outcomes_and_epochs_side_by_side() -> None:
    a = member("a", [0.5, 0.6], lr=0.1, elapsed=3600)
    b = member("b", [0.4, 0.7, 0.8], lr=0.01, elapsed=7200, state="FAILED")
    d = run_diff(a, b)
    assert (d.run_a, d.run_b, d.metric) == ("a", "b", "val_acc")
    assert d.fields == (("lr", 0.1, 0.01),)
    summary = {name: (x, y) for name, x, y in d.summary}
    assert summary["final_val"] == (0.6, 0.8)
    assert summary["epochs_done"] == (2, 3)
    assert summary["gpu_hours"] == (2.0, 4.0)
    assert summary["state"] == ("COMPLETED", "FAILED")
    assert list(d.metrics.index) == [1, 2, 3]
    assert list(d.metrics["val_acc_a"].fillna(-1)) == [0.5, 0.6, -1]
    assert list(d.metrics["val_acc_b"]) == [0.4, 0.7, 0.8]
    assert list(d.metrics.columns[:2]) == ["val_acc_a", "val_acc_b"]  # the metric first


def test_diff_of_a_run_with_itself_is_refused() -> None:
    with pytest.raises(ValueError, match="two different runs"):
        run_diff(member("a", [0.5]), member("a", [0.5]))


# -- the export ----------------------------------------------------------------------------


def test_the_export_carries_the_outcomes_and_the_total_hours(tmp_path: Path) -> None:
    store = RunStore(LocalExecutor(), str(tmp_path / "runs"))
    header = "epoch,val_acc,epoch_time_sec,throughput_samples_per_sec\n"
    for lr, rows, elapsed in (
        (0.1, "1,0.5,10,90\n2,0.6,9,100\n", 3600),
        (0.01, "1,0.7,10,90\n", 0),
    ):
        spec = BASE.replace(name=f"lr{lr}", lr=lr).to_dict()
        ref = store.create_run(spec, f"lr{lr}", "#!/bin/bash\n", group="lr sweep")
        Path(ref.path, "metrics.csv").write_text(header + rows)
        jobs = [{"job_id": "7", "scheduler": "local", "attempt": 1}]
        if elapsed:  # the other run has no recorded end: 0 s as far as the export knows
            jobs.append(
                {"event": "end", "job_id": "7", "state": "COMPLETED", "elapsed_sec": elapsed}
            )
        Path(ref.path, "jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs))

    md_path, csv_path = export_comparison(store, "lr sweep")
    md = Path(md_path).read_text()
    assert md.startswith("# Scaling comparison: lr sweep\n")
    # One table, a row per run: the field that differs first, the outcomes, then scaling.
    header = next(line for line in md.splitlines() if line.startswith("| run_id"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells[:3] == ["run_id", "lr", "final_val"] and "speedup" in cells
    rows = [line for line in md.splitlines() if line.startswith("| 2")]  # run ids: dates
    (best_row,) = [line for line in rows if "| best |" in line]
    assert "| 0.01 |" in best_row  # 0.7 beats 0.6
    assert "Differs: lr." in md and "Total: 2 GPU-hours over 2 runs" in md
    df = pd.read_csv(csv_path, index_col="run_id")
    assert {"speedup", "lr", "final_val", "gpu_hours", "best", "state"} <= set(df.columns)
    assert sorted(df["gpu_hours"]) == [0.0, 2.0]
    assert df.loc[df["lr"] == 0.01, "best"].item()
