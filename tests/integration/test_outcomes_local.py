"""Compare's outcome table, ``diff`` and GPU-hours on real runs (issue 23): three tiny MLP
runs of the real trainer on the embedded local scheduler, one group, differing only in the
learning rate. Then, as a user would, the installed ``ddp-tui``:

- ``compare GROUP`` has an ``lr`` column, marks best the run whose final ``val_acc`` (read
  here from its ``metrics.csv``) is highest, and shows no scaling table (the size is the
  same); ``--sort lr`` orders by lr, ``--sort`` of an unknown column exits 2 naming it;
- ``diff A B`` names ``lr`` with both values, and both runs' epochs;
- ``ls`` has a GPU-h column holding CPU-hours for these CPU runs, ``ls --json`` the keys.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import ExperimentSpec
from tests.helpers.advisor_sweep import open_local
from tests.integration.test_cli import cli

pytestmark = pytest.mark.torch

GROUP = "lr-trial"
#: A rate that learns the synthetic task in two epochs, one that barely moves, one between.
RATES = (0.2, 0.02, 1e-5)


def tiny_spec(lr: float, i: int) -> ExperimentSpec:
    return ExperimentSpec(
        name=f"lr{i}",
        model="mlp",
        dataset="synthetic",
        synthetic_shape="1,8,8",
        synthetic_samples=512,
        synthetic_val_samples=128,
        num_classes=4,
        device="cpu",
        backend="gloo",
        cpus_per_task=1,
        epochs=2,
        batch_per_gpu=32,
        lr=lr,
        schedule="none",
        workers=0,
        time_limit="00:10:00",
        python=sys.executable,
        # The easy synthetic task (the default's noise is 9): the rates must end far apart.
        extra_trainer_args=("--synthetic-noise", "1.5"),
    )


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outcomes")


@pytest.fixture(scope="module")
def runs(tmp: Path) -> Iterator[dict[float, str]]:
    """lr -> run id, every run completed."""
    cluster: Cluster = open_local(tmp)
    try:
        views = {
            lr: cluster.submit(cluster.plan(tiny_spec(lr, i), group=GROUP))
            for i, lr in enumerate(RATES)
        }
        ids = {v.run_id for v in views.values()}
        deadline = time.monotonic() + 300
        while True:
            now = {v.run_id: v for v in cluster.refresh().runs if v.run_id in ids}
            if len(now) == len(ids) and all(v.state.is_terminal for v in now.values()):
                break
            assert time.monotonic() < deadline, {r: v.state for r, v in now.items()}
            time.sleep(0.5)
        bad = {
            r: cluster.follow(r).err_lines[-20:]
            for r, v in now.items()
            if v.state is not JobState.COMPLETED
        }
        assert not bad, bad
        yield {lr: v.run_id for lr, v in views.items()}
    finally:
        cluster.close()


def final_val_acc(tmp: Path, run_id: str) -> float:
    with open(tmp / "runs" / run_id / "metrics.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("val_acc")]
    return float(rows[-1]["val_acc"])


def table_rows(text: str) -> dict[str, dict[str, str]]:
    """The outcome table's rows by run id (the first Markdown table of the output)."""
    lines = [line for line in text.split("\n\n# ")[0].splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return {
        cells[0]: dict(zip(header, cells, strict=True))
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    }


def test_compare_shows_lr_and_marks_the_best_run(tmp: Path, runs: dict[float, str]) -> None:
    finals = {run_id: final_val_acc(tmp, run_id) for run_id in runs.values()}
    best = max(finals, key=lambda r: finals[r])
    assert sorted(finals.values())[-2] < finals[best], f"no single best run: {finals}"
    out = cli(tmp, "compare", GROUP).stdout
    rows = table_rows(out)
    assert set(rows) == set(runs.values()), out
    assert {rows[run_id]["lr"] for run_id in runs.values()} == {"0.2", "0.02", "1e-05"}, out
    assert [r for r, row in rows.items() if row["best"] == "best"] == [best], out
    assert all(float(rows[r]["final_val"]) == pytest.approx(finals[r], abs=1e-4) for r in rows)
    assert all(float(rows[r]["cpu_hours"]) > 0 for r in rows), out  # CPU runs: CPU-hours
    assert "Differs: lr." in out and "CPU-hours over 3 runs" in out, out
    assert "speedup" not in out, out  # one size: no scaling table


def test_compare_sorts_by_a_column_and_refuses_an_unknown_one(
    tmp: Path, runs: dict[float, str]
) -> None:
    out = cli(tmp, "compare", runs[0.02], "--sort", "lr").stdout  # a run names its group
    assert list(table_rows(out)) == [runs[1e-5], runs[0.02], runs[0.2]], out
    bad = cli(tmp, "compare", GROUP, "--sort", "accuracy", check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--sort" in bad.stderr and "'accuracy'" in bad.stderr and "final_val" in bad.stderr


def test_diff_names_lr_and_sets_the_epochs_side_by_side(tmp: Path, runs: dict[float, str]) -> None:
    a, b = runs[0.2], runs[1e-5]
    text = cli(tmp, "diff", a, b[:22]).stdout  # a prefix finds a run, as elsewhere
    assert f"A: {a}" in text and f"B: {b}" in text
    (lr_row,) = [line for line in text.splitlines() if line.startswith("| lr ")]
    assert "0.2" in lr_row and "1e-05" in lr_row
    assert "val_acc A" in text and "val_acc B" in text
    doc = json.loads(cli(tmp, "diff", a, b, "--json").stdout)
    assert doc["fields"] == {"lr": {"a": 0.2, "b": 1e-5}}
    assert [e["epoch"] for e in doc["epochs"]] == [1, 2]
    assert doc["outcomes"]["final_val"]["a"] == pytest.approx(final_val_acc(tmp, a), abs=1e-6)
    same = cli(tmp, "diff", a, a, check=False)
    assert same.returncode == 2 and "two different runs" in same.stderr


def test_ls_shows_the_hours(tmp: Path, runs: dict[float, str]) -> None:
    header, *lines = cli(tmp, "ls").stdout.splitlines()
    names = header.split("\t")
    rows = [dict(zip(names, line.split("\t"), strict=True)) for line in lines if "\t" in line]
    assert {r["RUN"] for r in rows} == set(runs.values())
    assert all(r["GPU-H"].endswith(" CPU") and float(r["GPU-H"].split()[0]) > 0 for r in rows)
    docs = json.loads(cli(tmp, "ls", "--json").stdout)
    assert all(d["gpu_hours"] is None and d["cpu_hours"] > 0 for d in docs), docs
