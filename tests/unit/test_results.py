"""Summaries and the scaling comparison, from hand-built metrics with hand-computed answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.groups.comparison import export_comparison
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.reports.results import (
    SCALING_COLUMNS,
    RunData,
    scaling_table,
    summarize,
    to_csv,
    to_markdown,
)


def row(epoch: int, thr: float, secs: float, **kw: float | None) -> dict[str, float | None]:
    r: dict[str, float | None] = {
        "epoch": float(epoch),
        "train_loss": None,
        "val_acc": None,
        "val_rmse": None,
        "epoch_time_sec": secs,
        "throughput_samples_per_sec": thr,
        "gpu_mem_peak_mib": None,
        "world_size": None,
    }
    r.update(kw)
    return r


def spec(nodes: int, gpus: int, batch: int = 32) -> dict[str, object]:
    return {"nodes": nodes, "gpus_per_node": gpus, "batch_size": batch, "epochs": 3}


RUN_1 = RunData(
    "r1",
    spec(1, 1),
    [
        row(1, 80, 12, train_loss=2.0, val_acc=0.5, gpu_mem_peak_mib=1000),
        row(2, 100, 10, train_loss=1.0, val_acc=0.6, gpu_mem_peak_mib=1200),
        row(3, 110, 9, train_loss=0.5, val_acc=0.7, gpu_mem_peak_mib=1100),
    ],
    {"world_size": 1, "state": "completed", "hosts": ["n1"]},
)
RUN_2 = RunData(
    "r2",
    spec(1, 2),
    [
        row(1, 150, 7, train_loss=2.0, val_acc=0.5),
        row(2, 50, 30, train_loss=9.0),  # an attempt that was cut off, then redone:
        row(2, 190, 5.5, train_loss=1.1, val_acc=0.6),
        row(3, 200, 5, train_loss=0.9, val_acc=0.65),
        row(4, 210, 4, train_loss=0.8, val_acc=0.66),
    ],
    {"world_size": 2},
)
RUN_4 = RunData("r4", spec(2, 2), [row(1, 300, 3.5, val_acc=0.4)], None)  # one epoch only
RUN_8 = RunData("r8", spec(2, 4), [], None)  # failed before its first epoch


def test_summary_of_one_run() -> None:
    s = summarize(RUN_1)
    assert s.epochs_done == 3
    assert s.epochs_total == 3
    assert s.final_train_loss == 0.5
    assert (s.final_val_metric, s.val_metric_name) == (0.7, "val_acc")
    assert s.throughput == 105.0  # median(100, 110): the first epoch is warm-up
    assert s.epoch_time == 9.5  # median(10, 9)
    assert s.peak_mem_mib == 1200
    assert (s.world_size, s.nodes, s.gpus_per_node, s.global_batch) == (1, 1, 1, 32)
    assert s.state == "completed"


def test_a_redone_epoch_counts_once_with_its_last_row() -> None:
    s = summarize(RUN_2)
    assert s.epochs_done == 4
    assert s.throughput == 200.0  # median(190, 200, 210), not the cut-off 50
    assert s.final_train_loss == 0.8
    assert s.peak_mem_mib is None  # CPU run: no GPU memory column values


def test_regression_runs_report_val_rmse_and_world_size_falls_back_to_the_spec() -> None:
    run = RunData(
        "reg",
        {"nodes": 2, "gpus_per_node": 3, "batch_size": 10, "grad_accum": 2},
        [row(1, 10, 1, val_rmse=0.9), row(2, 20, 1, val_rmse=0.4)],
    )
    s = summarize(run)
    assert (s.final_val_metric, s.val_metric_name) == (0.4, "val_rmse")
    assert s.world_size == 6
    assert s.global_batch == 10 * 6 * 2
    assert s.throughput == 20.0


def test_scaling_table_against_hand_computed_speedup_and_efficiency() -> None:
    df = scaling_table([RUN_8, RUN_4, RUN_2, RUN_1])  # any order in
    assert list(df.columns) == SCALING_COLUMNS
    assert list(df.index) == ["r1", "r2", "r4", "r8"]  # smallest world size first
    assert df.attrs["baseline"] == "r1"
    assert df.attrs["val_metric"] == "val_acc"
    assert list(df["world_size"]) == [1, 2, 4, 8]
    assert list(df["global_batch"]) == [32, 64, 128, 256]
    assert list(df["ideal_speedup"]) == [1.0, 2.0, 4.0, 8.0]

    assert df.loc["r1", "speedup"] == 1.0
    assert df.loc["r1", "efficiency"] == 1.0
    assert df.loc["r2", "speedup"] == pytest.approx(200 / 105)  # 1.9048
    assert df.loc["r2", "efficiency"] == pytest.approx(200 / 105 / 2)  # 0.9524
    assert df.loc["r4", "throughput"] == 300.0  # its only epoch
    assert df.loc["r4", "speedup"] == pytest.approx(300 / 105)  # 2.8571
    assert df.loc["r4", "efficiency"] == pytest.approx(300 / 105 / 4)  # 0.7143
    assert df.loc["r4", "epoch_time"] == 3.5
    assert df["throughput"].isna().tolist() == [False, False, False, True]
    assert df["speedup"].isna().tolist() == [False, False, False, True]
    assert df.loc["r1", "peak_mem_mib"] == 1200.0
    assert df.loc["r2", "final_val_metric"] == 0.66


def test_baseline_is_the_smallest_world_size_with_a_throughput() -> None:
    df = scaling_table([RunData("empty1", spec(1, 1), []), RUN_2, RUN_4])
    assert df.attrs["baseline"] == "r2"
    assert df.loc["r4", "speedup"] == pytest.approx(300 / 200)
    assert df.loc["r4", "ideal_speedup"] == 2.0


def test_to_markdown_formats_aligns_and_leaves_missing_cells_empty() -> None:
    df = scaling_table([RUN_1, RUN_2, RUN_8])
    md = to_markdown(df[["world_size", "throughput", "efficiency"]])
    assert md.splitlines() == [
        "| run_id | world_size | throughput | efficiency |",
        "| ------ | ---------: | ---------: | ---------: |",
        "| r1     |          1 |      105.0 |     100.0% |",
        "| r2     |          2 |      200.0 |      95.2% |",
        "| r8     |          8 |            |            |",
    ]


def test_to_markdown_escapes_pipes_in_text() -> None:
    df = pd.DataFrame({"name": ["a|b"], "x": [1.23456]})
    assert to_markdown(df, index=False).splitlines()[2] == "| a\\|b | 1.235 |"


def test_csv_round_trips_full_precision() -> None:
    df = scaling_table([RUN_1, RUN_2])
    back = pd.read_csv(io.StringIO(to_csv(df)), index_col="run_id")
    assert back.loc["r2", "speedup"] == pytest.approx(200 / 105, rel=1e-12)
    assert list(back.columns) == SCALING_COLUMNS


def test_export_comparison_writes_markdown_and_csv_next_to_the_runs(tmp_path: Path) -> None:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True)
    (code / "__init__.py").write_text("")
    store = RunStore(LocalExecutor(), str(tmp_path / "runs"), code_source=code)
    header = "epoch,train_loss,val_acc,epoch_time_sec,throughput_samples_per_sec\n"
    for gpus, rows in (
        (1, "1,2,0.5,10,90\n2,1,0.6,9,100\n"),
        (2, "1,2,0.5,6,150\n2,1,0.6,5,180\n"),
    ):
        run = store.create_run(spec(1, gpus), f"g{gpus}", "#!/bin/bash\n", group="mnist sweep")
        (Path(run.path) / "metrics.csv").write_text(header + rows)
        (Path(run.path) / "run.json").write_text(json.dumps({"world_size": gpus}))
    store.create_run(spec(1, 4), "other", "#!/bin/bash\n", group="another group")

    md_path, csv_path = export_comparison(store, "mnist sweep")
    assert md_path == str(tmp_path / "runs" / "comparisons" / "mnist_sweep" / "comparison.md")
    md = Path(md_path).read_text()
    assert md.startswith("# Scaling comparison: mnist sweep\n")
    assert "val_acc" in md
    df = pd.read_csv(csv_path, index_col="run_id")
    assert list(df["world_size"]) == [1, 2]  # the other group's run is not in it
    assert list(df["speedup"]) == pytest.approx([1.0, 1.8])  # 180 / 100
    assert list(df["efficiency"]) == pytest.approx([1.0, 0.9])
    # The comparisons folder is not mistaken for a run.
    assert len(store.list_runs()) == 3


def _script_run(run_id: str, gpus: int, secs: list[float]) -> RunData:
    # A user's script that prints no sample counts: epoch times only, no throughput.
    rows = [
        {"epoch": float(i + 1), "epoch_time_sec": t, "throughput_samples_per_sec": None}
        for i, t in enumerate(secs)
    ]
    spec_dict = {"entry": "script", "nodes": 1, "gpus_per_node": gpus, "batch_per_gpu": 64}
    return RunData(run_id, spec_dict, rows, {"world_size": gpus})


def test_a_script_without_throughput_is_compared_by_epoch_time() -> None:
    # Steady epoch time (the median after the first): 10 s on 1 process, 4 s on 2.
    df = scaling_table([_script_run("a", 1, [30, 10, 10]), _script_run("b", 2, [20, 4, 4])])
    assert df.attrs["speedup_from"] == "epoch_time"
    assert df.attrs["baseline"] == "a"
    assert df.loc["b", "speedup"] == pytest.approx(10 / 4)
    assert df.loc["b", "efficiency"] == pytest.approx(10 / 4 / 2)
    assert df["throughput"].isna().all()
    # The spec's batch per GPU is the built-in trainer's: a script's global batch is unknown.
    assert df["global_batch"].isna().all()


def test_runs_with_throughput_still_compare_by_throughput() -> None:
    df = scaling_table([RUN_1, RUN_2])
    assert df.attrs["speedup_from"] == "throughput"
