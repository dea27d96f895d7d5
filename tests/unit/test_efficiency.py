"""The usage report's rules, as pure functions: steps that overlap add up on a node and steps
one after the other do not, ddp-tui's telemetry before sacct, each end's suggestion, the
rounding, and "not measured" (None) for every figure without a source."""

from __future__ import annotations

import pytest

from ddp_tui.reports.accounting import JobAccounting, MemoryRequest, StepUsage, node_peaks
from ddp_tui.reports.efficiency import Asked, spec_asked, usage_report, value_text
from ddp_tui.reports.rightsizing import (
    UsedResources,
    right_size,
    round_mem_mib,
    round_time_min,
)
from ddp_tui.resources import summarize_samples
from ddp_tui.spec import ExperimentSpec
from tests.helpers.telemetry_lines import gpu, host


def step(
    name: str, start: str, end: str, mib: float, *, nodes: tuple[str, ...] = ("n1",)
) -> StepUsage:
    """A step of one task per node, every node at ``mib``."""
    return StepUsage(
        name,
        "COMPLETED",
        start,
        end,
        nodes=nodes,
        tasks=len(nodes),
        cpus=len(nodes),
        cpu_sec=1.0,
        usage_max={"mem": mib},
        usage_max_node={"mem": nodes[-1]},
        usage_min={"mem": mib},
        usage_min_node={"mem": nodes[0]},
    )


def test_steps_at_the_same_time_add_up_and_steps_in_turn_do_not() -> None:
    batch = step("batch", "2026-01-01T10:00:00", "2026-01-01T10:10:00", 10.0)
    first = step("0", "2026-01-01T10:00:01", "2026-01-01T10:05:00", 300.0, nodes=("n1", "n2"))
    # starts the second the first ends: in turn, not at once
    second = step("1", "2026-01-01T10:05:00", "2026-01-01T10:09:00", 500.0, nodes=("n1", "n2"))
    peaks = {n.node: n for n in node_peaks([batch, first, second])}
    assert peaks["n1"].peak_mib == 510.0  # the batch script beside step 1
    assert peaks["n1"].bound == "at most" and "2 steps at once" in peaks["n1"].how
    assert peaks["n2"].peak_mib == 500.0 and peaks["n2"].bound == "exact"


def test_tasks_that_peaked_alike_are_exact_on_every_node() -> None:
    # Two tasks, one per node, at the same peak: Slurm names the first node for both ends
    # (it moves them only on a strictly smaller or larger task), as the suite's cluster did.
    alike = step("0", "2026-01-01T10:00:01", "2026-01-01T10:05:00", 210.3, nodes=("n1", "n2"))
    alike = StepUsage(**{**alike.__dict__, "usage_min_node": {"mem": "n2"}})
    peaks = {n.node: n for n in node_peaks([alike])}
    assert {node: (n.peak_mib, n.bound) for node, n in peaks.items()} == {
        "n1": (210.3, "exact"),
        "n2": (210.3, "exact"),
    }


def test_a_step_with_no_sample_counts_for_nothing_not_zero() -> None:
    quiet = StepUsage("0", "COMPLETED", nodes=("n1",), tasks=1, usage_tot={})
    assert node_peaks([quiet]) == ()
    acct = JobAccounting("9", "COMPLETED", "sacct", elapsed_sec=60.0, cpus=1, steps=(quiet,))
    report = usage_report(acct, ended=True)
    for name in report.FIGURES:
        fig = report.figure(name)
        if name in ("cpu_efficiency", "time_used_fraction", "gpu_hours_allocated"):
            continue
        assert fig.value is None, name
        assert value_text(name, fig.value) == "not measured"


def test_telemetry_comes_before_sacct_and_prices_the_busy_gpu_hours() -> None:
    lines = [host(t, 900.0 + t, on="n1") for t in range(0, 60, 10)]
    lines += [host(t, 700.0, node=1, on="n2") for t in range(0, 60, 10)]
    lines += [
        gpu(t, 4000.0, index=i, util=80.0 if i == 0 else 2.0) for t in (0, 30) for i in (0, 1)
    ]
    lines += [
        gpu(t, 4000.0, index=i, node=1, on="n2", util=80.0 if i == 0 else 1.0)
        for t in (0, 30)
        for i in (0, 1)
    ]
    summary = summarize_samples(lines)
    sacct_step = step("0", "", "", 100.0, nodes=("n1", "n2"))
    acct = JobAccounting(
        "7",
        "COMPLETED",
        "sacct",
        elapsed_sec=3600.0,
        time_limit_sec=7200.0,
        node_count=2,
        nodes=("n1", "n2"),
        cpus=8,
        gpus=4,
        memory=MemoryRequest(4096.0, "job", "ReqTRES"),
        steps=(sacct_step,),
    )
    spec = ExperimentSpec(nodes=2, gpus_per_node=2, cpus_per_task=4)
    report = usage_report(acct, ended=True, telemetry=summary, asked=spec_asked(spec))
    assert report.max_rss_mib_per_node.value == 950.0  # n1's telemetry peak, not sacct's 100
    assert report.max_rss_mib_per_node.source == "ddp-tui telemetry"
    assert report.mem_efficiency.value == pytest.approx(950 / 2048)
    assert report.gpu_util_avg.value == pytest.approx((80 + 2 + 80 + 1) / 4)
    assert report.gpu_hours_allocated.value == 4.0
    assert report.gpu_hours_busy.value == pytest.approx(4.0 * report.gpu_util_avg.value / 100)
    gpus = report.suggestion.gpus_per_node
    assert gpus.value == 1 and gpus.current == 2  # one GPU of each node sat idle
    assert report.suggestion.spec_changes()["gpus_per_node"] == 1
    assert report.suggestion.mem.value == "1536M"  # 950 + 20 % = 1140, up in 512M steps


def test_the_local_scheduler_gives_time_and_telemetry_the_rest_not_measured() -> None:
    """A ddp-tui run on the local scheduler, which keeps no accounting: its record's
    elapsed time, its spec's limit and cores, and its telemetry's CPU and memory."""
    lines = [host(t, 500.0, cpu_pct=150.0) for t in range(0, 50, 10)]
    acct = JobAccounting("3", "COMPLETED", "local scheduler", elapsed_sec=600.0)
    spec = ExperimentSpec(device="cpu", gpus_per_node=2, cpus_per_task=2, time_limit="00:30:00")
    report = usage_report(
        acct, ended=True, telemetry=summarize_samples(lines), asked=spec_asked(spec)
    )
    assert report.time_used_fraction.value == pytest.approx(600 / 1800)
    assert report.cpu_efficiency.value == pytest.approx(1.5 / 2)  # 1 torchrun task x 2 cores
    assert report.cpu_efficiency.source == "ddp-tui telemetry"
    assert report.max_rss_mib_per_node.value == 500.0
    assert report.mem_efficiency.value is None  # the spec asked the cluster's default
    assert report.gpus == 0 and report.gpu_util_avg.value is None
    assert report.gpu_hours_allocated.value == 0.0  # a CPU run holds no GPUs: truly 0
    assert report.suggestion.time_limit.value == "00:15:00"  # 10 min + 20 %, 5 min steps
    assert report.suggestion.cpus_per_task.value == 2  # kept 1.5 of 2 busy: keep 2


@pytest.mark.parametrize(
    ("state", "mem", "time", "cpus"),
    [
        ("COMPLETED", "640M", "00:15:00", 1),
        ("TIMEOUT", "640M", None, 1),
        ("OUT_OF_MEMORY", None, None, None),
        ("FAILED", None, None, None),
        ("CANCELLED", None, None, None),
    ],
)
def test_each_end_suggests_what_its_use_can_say(
    state: str, mem: str | None, time: str | None, cpus: int | None
) -> None:
    used = UsedResources(
        state=state,
        ended=True,
        peak_mib_per_node=500.0,
        mem_per_node_mib=4000.0,
        mem_asked="4000M",
        elapsed_sec=600.0,
        time_limit_sec=3600.0,
        cores_used_per_task=0.4,
        cpus_per_task=4,
    )
    sizing = right_size(used, time_limit_asked="01:00:00")
    assert (sizing.mem.value, sizing.time_limit.value, sizing.cpus_per_task.value) == (
        mem,
        time,
        cpus,
    )
    for s in sizing.all():
        assert s.reason  # a reason for a value, and for its absence
    if state == "TIMEOUT":
        assert "ran out of time" in sizing.time_limit.reason
    if state == "OUT_OF_MEMORY":
        assert "ran out of memory with 4000 MiB per node" in sizing.mem.reason


def test_rounding_steps() -> None:
    assert round_mem_mib(1.0) == (128, "128M")
    assert round_mem_mib(1025.0) == (1536, "512M")
    assert round_mem_mib(20000.0) == (20480, "1G")
    assert round_time_min(4.0) == (5, "5 min")
    assert round_time_min(61 * 60) == (75, "15 min")
    assert round_time_min(7 * 3600 + 1) == (480, "1 h")


def test_a_foreign_job_is_sized_from_its_own_accounting() -> None:
    main = step("0", "", "", 1000.0, nodes=("n1", "n2"))
    main = StepUsage(**{**main.__dict__, "cpus": 16, "tasks": 2, "cpu_sec": 2 * 3600.0})
    acct = JobAccounting(
        "5",
        "COMPLETED",
        "sacct",
        elapsed_sec=3600.0,
        time_limit_sec=4 * 3600.0,
        node_count=2,
        nodes=("n1", "n2"),
        cpus=16,
        memory=MemoryRequest(16384.0, "job", "AllocTRES"),
        steps=(main,),
    )
    report = usage_report(acct, ended=True, asked=Asked())
    sizing = report.suggestion
    assert sizing.cpus_per_task.current == 8 and sizing.cpus_per_task.value == 2  # 1 core busy
    assert sizing.mem.current == "8G" and sizing.mem.value == "1536M"
    assert sizing.time_limit.current == "04:00:00" and sizing.time_limit.value == "01:15:00"
    assert report.cpu_efficiency.value == pytest.approx(2 * 3600 / (3600 * 16))
