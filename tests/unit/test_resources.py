"""Resource telemetry summaries (ddp_tui.resources) from hand-written sampler lines with
hand-computed answers, and a property test of the statistics against random lines."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddp_tui.resources import (
    IDLE_AFTER_SEC,
    MAX_POINTS,
    MODE_BIN_MIB,
    RESOURCE_TABLE_HEADER,
    ResourceAccumulator,
    empty_reason,
    idle_devices,
    parse_lines,
    resources_table,
    summarize_samples,
)
from tests.helpers.telemetry_lines import T0, gpu, host


def test_host_and_gpu_statistics() -> None:
    lines = [host(0, 100, cpu_pct=None), host(5, 200, cpu_pct=150.0), host(10, 300, cpu_pct=250.0)]
    lines += [gpu(0, 1000, util=50.0, power_w=100.0), gpu(5, 3000, util=70.0, power_w=300.0)]
    s = summarize_samples(lines)
    (h,) = s.hosts
    assert (h.memory.count, h.memory.peak, h.memory.mean) == (3, 300.0, 200.0)
    assert h.cpu_avg == 200.0  # the first sample has no CPU figure yet
    assert (h.load_peak, h.mem_total_mib, h.cpus, h.ranks) == (1.5, 64000.0, 8, "0-1")
    (d,) = s.devices
    assert (d.memory.count, d.memory.peak, d.memory.mean) == (2, 3000.0, 2000.0)
    assert (d.util_avg, d.power_avg, d.power_peak) == (60.0, 200.0, 300.0)
    assert (d.name, d.total_mib, d.host, d.index) == ("NVIDIA A100", 81920.0, "n1", 0)
    assert s.samples == 5 and not s.empty
    assert (s.first_t, s.last_t) == (T0, T0 + 10)
    assert s.attempts == ("7",)
    assert (s.gpu_mem_peak_mib, s.host_mem_peak_mib, s.gpu_util_avg) == (3000.0, 300.0, 60.0)


def test_mode_is_the_mean_of_the_most_populated_64_mib_bin() -> None:
    # Bin 0 holds 10 and 20; bin 1 (64..128) holds 100, 110 and 120.
    s = summarize_samples([host(i, v) for i, v in enumerate([10, 20, 100, 110, 120])])
    assert s.hosts[0].memory.mode == 110.0
    assert MODE_BIN_MIB == 64


def test_mode_ties_go_to_the_higher_bin() -> None:
    s = summarize_samples([host(i, v) for i, v in enumerate([10, 20, 100, 110])])
    assert s.hosts[0].memory.mode == 105.0


def test_compare_figures_are_the_max_over_devices_and_nodes() -> None:
    lines = [gpu(0, 1000, index=0), gpu(0, 5000, index=1), gpu(5, 1010, index=0)]
    lines += [gpu(5, 5020, index=1, util=None)]
    lines += [host(0, 700, node=0), host(0, 900, node=1, on="n2")]
    s = summarize_samples(lines)
    assert [(d.node, d.index) for d in s.devices] == [(0, 0), (0, 1)]
    assert s.gpu_mem_peak_mib == 5020.0
    assert s.gpu_mem_mode_mib == 5010.0  # device 1's both samples fall in one bin
    assert s.host_mem_peak_mib == 900.0
    assert s.gpu_util_avg == 90.0  # over the three samples that have a value
    assert [h.host for h in s.hosts] == ["n1", "n2"]


def test_a_cpu_run_has_no_gpu_figures() -> None:
    s = summarize_samples([host(0, 500), host(5, 600)])
    assert s.devices == ()
    assert (s.gpu_mem_peak_mib, s.gpu_mem_mode_mib, s.gpu_util_avg) == (None, None, None)
    assert s.host_mem_peak_mib == 600.0


def test_series_merge_pairs_within_the_bound_and_keep_the_peak() -> None:
    acc = ResourceAccumulator()
    n = 5000
    for i in range(n):
        used = 99_999.0 if i == 3333 else 1000.0 + (i % 7)
        acc.add(gpu(5.0 * i, used, util=40.0 if i % 2 else 60.0))
        acc.add(host(5.0 * i, 500.0))
    (mem,) = acc.gpu_memory_series()
    (util,) = acc.gpu_util_series()
    (rss,) = acc.host_memory_series()
    for series in (mem, util, rss):
        assert 0 < len(series.x) <= MAX_POINTS
        assert len(series.x) == len(series.y)
        assert list(series.x) == sorted(series.x)
        assert series.x[0] < 1.0  # minutes from the first sample
        assert series.x[-1] <= 5.0 * (n - 1) / 60.0
    assert max(mem.y) == 99_999.0  # memory merges by max: the spike survives
    assert statistics.fmean(util.y) == 50.0  # utilisation merges by mean
    assert mem.label == "n1 gpu0" and rss.label == "n1"
    assert acc.summary().devices[0].memory.count == n  # statistics see every sample


def test_idle_is_the_time_since_utilisation_last_rose_above_the_threshold() -> None:
    lines = [gpu(t, 1000, util=80.0) for t in range(0, 101, 5)]
    lines += [gpu(t, 1000, util=0.0) for t in range(105, 401, 5)]
    lines += [gpu(t, 1000, index=1, util=80.0) for t in range(0, 401, 5)]
    lines += [gpu(t, 1000, index=2, util=None) for t in range(0, 401, 5)]
    acc = ResourceAccumulator()
    acc.add_all(lines)
    d0, d1, d2 = acc.summary().devices
    assert d0.idle_sec == 295.0 >= IDLE_AFTER_SEC
    assert d1.idle_sec == 0.0
    assert d2.idle_sec == 0.0  # no utilisation figure: not called idle
    running = acc.view(telemetry_sec=5, state="RUNNING")
    assert running.running and running.empty_reason is None
    assert [d.index for d in idle_devices(running)] == [0]
    assert idle_devices(acc.view(telemetry_sec=5, state="COMPLETED")) == []


def test_a_short_idle_spell_is_not_flagged() -> None:
    lines = [gpu(t, 1000, util=80.0) for t in range(0, 101, 5)]
    lines += [gpu(t, 1000, util=2.0) for t in range(105, 201, 5)]
    acc = ResourceAccumulator()
    acc.add_all(lines)
    assert acc.summary().devices[0].idle_sec == 95.0
    assert idle_devices(acc.view(telemetry_sec=5, state="RUNNING")) == []


def test_malformed_lines_are_skipped() -> None:
    good = [host(0, 100), gpu(0, 1000)]
    bad: list[Any] = [
        host(1, float("nan")),
        host(1, float("inf")),
        host(1, "100"),
        host(1, True),
        host(1, -5.0),
        host(1, 100, node=True),
        host(1, 100, node=-1),
        host(1, 100, cpus=2.5),
        {**host(1, 100), "t": "soon"},
        {**host(1, 100), "t": float("nan")},
        host(1, 100, host=None),
        {k: v for k, v in host(1, 100).items() if k != "rss_mib"},
        {k: v for k, v in host(1, 100).items() if k != "t"},
        gpu(1, 1000, index=False),
        gpu(1, 1000, util="busy"),
        gpu(1, 10**400),
        gpu(1, 1000, restart="x"),
        {k: v for k, v in gpu(1, 1000).items() if k != "index"},
        {"t": T0, "kind": "sample", "host": "n1", "node": 0},
        {"t": T0, "kind": "start", "host": "n1", "node": 0},  # no gpu_source
        {"t": T0, "kind": "note", "host": "n1", "node": 0, "message": 3},
        ["not", "a", "mapping"],
        None,
        "text",
    ]
    acc = ResourceAccumulator()
    acc.add_all(bad + good)
    s = acc.summary()
    assert s.samples == 2
    assert s.hosts[0].memory.peak == 100.0 and s.devices[0].memory.peak == 1000.0
    assert s.notes == () and s.gpu_sources == ()


def test_parse_lines_skips_broken_lines() -> None:
    text = "\n".join(
        [json.dumps(host(0, 1)), "", "{not json", "[1, 2]", "NaN", json.dumps(gpu(0, 2))]
    )
    lines = parse_lines(text + '\n{"t": 1, "kind": "ho')  # a line cut short at the end
    assert [line["kind"] for line in lines] == ["host", "gpu"]
    assert parse_lines("") == []


def test_a_requeued_attempt_continues_on_the_same_axis_with_a_gap() -> None:
    first = [gpu(t, 1000) for t in range(0, 101, 5)] + [host(t, 500) for t in range(0, 101, 5)]
    again = [
        {**line, "restart": 1}
        for line in [gpu(t, 2000) for t in range(1000, 1101, 5)]
        + [host(t, 600) for t in range(1000, 1101, 5)]
    ]
    node1 = [host(t, 50, node=1, on="n2") for t in range(30, 101, 5)]
    acc = ResourceAccumulator()
    acc.add_all(node1 + first + again)  # files in any order: the origin is the earliest t
    s = acc.summary()
    assert s.attempts == ("7", "7.1")
    assert len(s.devices) == 1 and s.devices[0].memory.count == 42
    (mem,) = acc.gpu_memory_series()
    assert mem.x[0] == 0.0 and mem.x[-1] == pytest.approx(1100 / 60)
    gap = [b - a for a, b in zip(mem.x, mem.x[1:], strict=False)]
    assert max(gap) == pytest.approx((1000 - 100) / 60)
    assert mem.y[0] == 1000.0 and mem.y[-1] == 2000.0
    rss_n1, rss_n2 = acc.host_memory_series()
    assert rss_n2.label == "n2" and rss_n2.x[0] == pytest.approx(
        0.5
    )  # 30 s after the run's first sample
    assert rss_n1.x[-1] == pytest.approx(1100 / 60)


def test_idle_does_not_span_a_requeue() -> None:
    lines = [gpu(t, 1000, util=0.0) for t in range(0, 301, 5)]
    lines += [{**gpu(t, 1000, util=0.0), "job": "8"} for t in range(1000, 1061, 5)]
    s = summarize_samples(lines)
    assert s.devices[0].idle_sec == 60.0
    assert s.attempts == ("7", "8")


def test_notes_and_gpu_sources_are_host_prefixed_and_deduped() -> None:
    start = {"t": T0, "kind": "start", "host": "n1", "node": 0, "ranks": "", "job": "7"}
    note = {"t": T0 + 1, "kind": "note", "host": "n1", "node": 0, "job": "7"}
    lines = [
        {**start, "interval": 5.0, "gpu_source": "none", "pid": 42},
        {**note, "message": "nvidia-smi failed: not found"},
        {**note, "message": "nvidia-smi failed: not found"},
        {**start, "host": "n2", "node": 1, "interval": 5.0, "gpu_source": "nvml", "pid": 43},
        {**start, "interval": 5.0, "gpu_source": "none", "pid": 44},
    ]
    s = summarize_samples(lines)
    assert s.notes == ("n1: nvidia-smi failed: not found",)
    assert s.gpu_sources == ("n1: none", "n2: nvml")
    assert s.empty and s.samples == 0 and s.first_t is None


def test_empty_reasons() -> None:
    empty = summarize_samples([])
    assert "off" in (empty_reason(telemetry_sec=0, state="RUNNING", summary=empty) or "")
    assert "not started" in (empty_reason(telemetry_sec=5, state="PENDING", summary=None) or "")
    assert empty_reason(telemetry_sec=5, state="RUNNING", summary=empty) == (
        "no samples yet: the first comes about 5 s after the job starts"
    )
    assert empty_reason(telemetry_sec=5, state="COMPLETED", summary=None) == (
        "this run wrote no telemetry: it was submitted before telemetry existed, "
        "or its sampler could not start"
    )
    note = {"t": T0, "kind": "note", "host": "n1", "node": 0, "message": "cannot read /proc"}
    failed = empty_reason(telemetry_sec=5, state="FAILED", summary=summarize_samples([note]))
    assert failed is not None and failed.endswith("n1: cannot read /proc")
    some = summarize_samples([host(0, 1)])
    assert empty_reason(telemetry_sec=5, state="RUNNING", summary=some) is None


def test_table_rows_per_node_then_its_devices() -> None:
    lines = [host(0, 512, cpu_pct=180.0), gpu(0, 1000, index=1), gpu(0, 2000, index=0)]
    lines += [host(0, 256, node=1, on="n2")]
    rows = resources_table(summarize_samples(lines))
    assert all(len(r) == len(RESOURCE_TABLE_HEADER) for r in rows)
    assert [(r[0], r[1]) for r in rows] == [
        ("host RSS", "n1"),
        ("gpu0 NVIDIA A100", "n1"),
        ("gpu1 NVIDIA A100", "n1"),
        ("host RSS", "n2"),
    ]
    assert rows[0][3:] == ("512", "512", "512", "64000", "", "", "180")
    assert rows[1][3:] == ("2000", "2000", "2000", "81920", "90.0", "200", "")


# -- the statistics against random lines -----------------------------------------------

_MEMORY = st.floats(min_value=0.0, max_value=200_000.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    rss=st.lists(_MEMORY, min_size=1, max_size=60),
    used=st.lists(_MEMORY, min_size=1, max_size=60),
    utils=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=60),
)
def test_statistics_match_the_samples(
    rss: list[float], used: list[float], utils: list[float]
) -> None:
    lines = [host(float(i), v) for i, v in enumerate(rss)]
    lines += [gpu(float(i), v, util=utils[i % len(utils)]) for i, v in enumerate(used)]
    s = summarize_samples(lines)
    assert s.samples == len(rss) + len(used)
    for stats, values in ((s.hosts[0].memory, rss), (s.devices[0].memory, used)):
        assert stats.count == len(values)
        assert stats.peak == max(values)
        assert stats.mean is not None and math.isclose(
            stats.mean, statistics.fmean(values), rel_tol=1e-9, abs_tol=1e-9
        )
        bins = Counter(int(v // MODE_BIN_MIB) for v in values)
        assert stats.mode is not None
        mode_bin = int(stats.mode // MODE_BIN_MIB)
        assert bins[mode_bin] == max(bins.values())
    util_values = [utils[i % len(utils)] for i in range(len(used))]
    assert s.gpu_util_avg is not None
    assert math.isclose(s.gpu_util_avg, statistics.fmean(util_values), rel_tol=1e-9, abs_tol=1e-9)
