"""The telemetry columns of the scaling comparison, from hand-written sampler lines: the
summaries (results.summarize, scaling_table), the facade's cached read of ``telemetry/node-K.jsonl``
and the Markdown/CSV exports that carry them."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ddp_tui.jobfiles import telemetry_file
from ddp_tui.remote.backends.executor import Batch, BatchResult, LocalExecutor
from ddp_tui.remote.groups.comparison import export_comparison, load_run
from ddp_tui.remote.observe.followers import TELEMETRY_RUNS_KEPT, TelemetryCache
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.reports.results import (
    SCALING_COLUMNS,
    ResourceSummary,
    RunData,
    scaling_table,
    summarize,
    summarize_samples,
    to_csv,
    to_markdown,
)
from tests.helpers.telemetry_lines import gpu, host

RESOURCE_COLUMNS = ["gpu_mem_peak_mib", "gpu_mem_mode_mib", "host_mem_peak_mib", "gpu_util_avg"]


def spec(nodes: int, gpus: int) -> dict[str, object]:
    return {"nodes": nodes, "gpus_per_node": gpus, "batch_size": 32, "epochs": 2}


def metrics(thr: float) -> list[dict[str, float | None]]:
    return [
        {"epoch": 1.0, "epoch_time_sec": 10.0, "throughput_samples_per_sec": thr},
        {"epoch": 2.0, "epoch_time_sec": 9.0, "throughput_samples_per_sec": thr},
    ]


GPU_RUN = RunData(
    "g1",
    spec(1, 2),
    metrics(100),
    {"world_size": 2},
    resources=summarize_samples(
        [
            gpu(0, 1000, util=40.0),
            gpu(5, 1100, util=60.0),
            gpu(0, 4000, index=1, util=80.0),
            host(0, 700),
            host(5, 900),
        ]
    ),
)
CPU_RUN = RunData(
    "c1", spec(1, 1), metrics(50), {"world_size": 1}, resources=summarize_samples([host(0, 300)])
)
OLD_RUN = RunData("o1", spec(1, 4), metrics(150), {"world_size": 4})  # before telemetry


def test_the_resource_columns_follow_peak_mem_mib() -> None:
    at = SCALING_COLUMNS.index("peak_mem_mib")
    assert SCALING_COLUMNS[at + 1 : at + 5] == RESOURCE_COLUMNS
    assert isinstance(GPU_RUN.resources, ResourceSummary)


def test_summary_takes_the_telemetry_figures() -> None:
    s = summarize(GPU_RUN)
    assert (s.gpu_mem_peak_mib, s.gpu_mem_mode_mib) == (4000.0, 4000.0)
    assert s.host_mem_peak_mib == 900.0
    assert s.gpu_util_avg == 60.0
    cpu = summarize(CPU_RUN)
    assert (cpu.gpu_mem_peak_mib, cpu.gpu_mem_mode_mib, cpu.gpu_util_avg) == (None, None, None)
    assert cpu.host_mem_peak_mib == 300.0
    old = summarize(OLD_RUN)
    assert (old.gpu_mem_peak_mib, old.host_mem_peak_mib) == (None, None)


def test_scaling_table_columns_are_float_and_nan_where_missing() -> None:
    df = scaling_table([OLD_RUN, GPU_RUN, CPU_RUN])
    assert list(df.index) == ["c1", "g1", "o1"]
    for col in RESOURCE_COLUMNS:
        assert df[col].dtype == "float64"
    assert list(df.loc["g1", RESOURCE_COLUMNS]) == [4000.0, 4000.0, 900.0, 60.0]
    assert pd.isna(df.loc["c1", "gpu_mem_peak_mib"]) and pd.isna(df.loc["c1", "gpu_util_avg"])
    assert df.loc["c1", "host_mem_peak_mib"] == 300.0
    assert df.loc["o1", RESOURCE_COLUMNS].isna().all()


def test_markdown_and_csv_carry_the_resource_columns() -> None:
    df = scaling_table([GPU_RUN, CPU_RUN])
    header, _rule, c1, g1 = to_markdown(df[RESOURCE_COLUMNS]).splitlines()
    assert header.split("|")[2:6] == [f" {c} " for c in RESOURCE_COLUMNS]
    assert [c.strip() for c in g1.split("|")[2:6]] == ["4000", "4000", "900", "60.0"]
    assert [c.strip() for c in c1.split("|")[2:6]] == ["", "", "300", ""]
    back = pd.read_csv(io.StringIO(to_csv(df)), index_col="run_id")
    assert list(back.loc["g1", RESOURCE_COLUMNS]) == [4000.0, 4000.0, 900.0, 60.0]
    assert back.loc["c1", "host_mem_peak_mib"] == 300.0
    assert pd.isna(back.loc["c1", "gpu_mem_peak_mib"])


class CountingExecutor(LocalExecutor):
    """The real local executor, counting its batches (a spy: every answer is the real one)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[Batch] = []

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        self.batches.append(batch)
        return super().run_batch(batch, timeout=timeout)


def _store(tmp_path: Path, executor: LocalExecutor) -> RunStore:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True, exist_ok=True)
    (code / "__init__.py").write_text("")
    return RunStore(executor, str(tmp_path / "runs"), code_source=code)


def _write(path: Path, lines: list[dict[str, Any]], tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)


def test_the_telemetry_cache_reads_every_node_file_in_one_batch_then_only_new_bytes(
    tmp_path: Path,
) -> None:
    executor = CountingExecutor()
    store = _store(tmp_path, executor)
    ref = store.create_run(spec(3, 1), "three", "#!/bin/bash\n")
    run_dir = Path(ref.path)
    _write(run_dir / telemetry_file(0), [host(0, 100), gpu(0, 1000)], tail='{"t": 1, "ki')
    # Node 1 has no file (its sampler never started); node 2 has one line.
    _write(run_dir / telemetry_file(2), [host(3, 200, node=2, on="n3")])
    cache = TelemetryCache(executor)
    executor.batches.clear()
    summary = cache.readers(ref, 3).accumulator.summary()
    assert len(executor.batches) == 1
    assert [r.path for r in executor.batches[0].reads] == [
        ref.file(f"telemetry/node-{k}.jsonl") for k in range(3)
    ]
    assert [(h.node, h.memory.peak) for h in summary.hosts] == [(0, 100), (2, 200)]
    assert [(d.node, d.memory.peak) for d in summary.devices] == [(0, 1000)]
    # The next call asks each file from where the last one stopped (the held-back partial
    # line included), and counts the new line once.
    offsets = [r.offset for r in executor.batches[0].reads]
    with (run_dir / telemetry_file(2)).open("a") as f:
        f.write(json.dumps(host(8, 300, node=2, on="n3")) + "\n")
    executor.batches.clear()
    summary = cache.readers(ref, 3).accumulator.summary()
    assert len(executor.batches) == 1
    assert [r.offset for r in executor.batches[0].reads][2] > offsets[2]
    assert [(h.node, h.memory.count, h.memory.peak) for h in summary.hosts] == [
        (0, 1, 100),
        (2, 2, 300),
    ]
    empty = store.create_run(spec(1, 1), "none", "#!/bin/bash\n")
    assert cache.readers(empty, 1).accumulator.summary().empty


def test_the_telemetry_cache_keeps_a_bounded_number_of_runs(tmp_path: Path) -> None:
    cache = TelemetryCache(LocalExecutor())
    # Runs without files: what is kept is the readers, read or not.
    refs = [RunRef(f"r{i}", str(tmp_path / f"r{i}")) for i in range(TELEMETRY_RUNS_KEPT + 1)]
    first = cache.readers(refs[0], 1)
    assert cache.readers(refs[0], 1) is first  # kept while there is room
    for ref in refs[1:]:
        cache.readers(ref, 1)
    # refs[0] was the least recently used when the cache overflowed: its state was dropped.
    assert cache.readers(refs[0], 1) is not first
    assert len(cache._runs) == TELEMETRY_RUNS_KEPT


def test_a_truncated_telemetry_file_restarts_the_totals_from_every_file_once(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, LocalExecutor())
    ref = store.create_run(spec(2, 1), "two", "#!/bin/bash\n")
    run_dir = Path(ref.path)
    _write(run_dir / telemetry_file(0), [host(0, 100), host(5, 150)])
    _write(run_dir / telemetry_file(1), [host(0, 200, node=1, on="n2")])
    cache = TelemetryCache(store.executor)
    assert cache.readers(ref, 2).accumulator.summary().samples == 3
    # Node 0's file replaced by a shorter one (a file system restored, a hand edit): its old
    # lines must not count, and node 1's must count once, not twice.
    _write(run_dir / telemetry_file(0), [host(9, 120)])
    summary = cache.readers(ref, 2).accumulator.summary()
    assert [(h.node, h.memory.count, h.memory.peak) for h in summary.hosts] == [
        (0, 1, 120),
        (1, 1, 200),
    ]
    # And it settles: the next call reads nothing new and changes nothing.
    assert cache.readers(ref, 2).accumulator.summary() == summary


def test_load_run_and_the_exported_comparison_carry_the_telemetry(tmp_path: Path) -> None:
    store = _store(tmp_path, LocalExecutor())
    header = "epoch,epoch_time_sec,throughput_samples_per_sec\n"
    refs = {}
    for name, nodes in (("one", 1), ("two", 2)):
        ref = refs[name] = store.create_run(spec(nodes, 1), name, "#!/bin/bash\n", group="sweep")
        (Path(ref.path) / "metrics.csv").write_text(header + "1,10,90\n2,9,100\n")
    _write(Path(refs["two"].path) / telemetry_file(0), [host(0, 400)])
    _write(Path(refs["two"].path) / telemetry_file(1), [host(0, 1500, node=1, on="n2")])

    data = {d.run_id: d for d in (load_run(store, r) for r in refs.values())}
    assert data[refs["one"].run_id].resources is None  # no telemetry lines
    two = data[refs["two"].run_id].resources
    assert two is not None and two.host_mem_peak_mib == 1500.0  # node 1's file was read

    md_path, csv_path = export_comparison(store, "sweep")
    df = pd.read_csv(csv_path, index_col="run_id")
    assert df.loc[refs["two"].run_id, "host_mem_peak_mib"] == 1500.0
    assert math.isnan(df.loc[refs["one"].run_id, "host_mem_peak_mib"])
    md = Path(md_path).read_text()
    assert "host_mem_peak_mib" in md
    (row,) = [line for line in md.splitlines() if refs["two"].run_id in line]
    assert " 1500 |" in row


@pytest.mark.parametrize("nodes", [None, 0, "2", True])
def test_a_spec_without_a_sane_node_count_reads_node_0(tmp_path: Path, nodes: object) -> None:
    store = _store(tmp_path, LocalExecutor())
    ref = store.create_run({"nodes": nodes, "epochs": 1}, "odd", "#!/bin/bash\n")
    _write(Path(ref.path) / telemetry_file(0), [host(0, 42)])
    run = load_run(store, ref)
    assert run.resources is not None and run.resources.host_mem_peak_mib == 42.0
