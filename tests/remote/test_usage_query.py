"""sacct's record of what a job used, read from real answers of the test cluster.

Each file in ``data/`` is the exact answer to :func:`usage_argv` of a job described in
``data/README.md`` (Slurm 22.05.8); the figures asserted are worked out by hand from that
text, so a parser that misreads a field fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.slurm.commands import SACCT_CHUNK, SEP
from ddp_tui.remote.backends.slurm.parsers import parse_tres
from ddp_tui.remote.backends.slurm.usage_query import (
    parse_cpu_time,
    parse_usage,
    parse_usages,
    usage_argv,
    usage_argvs,
)
from ddp_tui.reports.accounting import MemoryRequest, memory_per_node_mib, size_mib
from ddp_tui.reports.efficiency import usage_report

DATA = Path(__file__).parent / "data"
KIB = 1 / 1024  # MiB per KiB


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_usage_argv_asks_every_step_and_attempt_in_the_projects_format() -> None:
    argv = usage_argv("1234_5")
    assert argv[0] == "env" and "SACCT_FORMAT" in argv and "SLURM_TIME_FORMAT=standard" in argv
    sacct = argv[argv.index("sacct") :]
    assert "--duplicates" in sacct and "--parsable2" in sacct and "--noheader" in sacct
    assert f"--delimiter={SEP}" in sacct and "--jobs=1234_5" in sacct
    assert "--allocations" not in sacct  # the steps are the point
    fields = next(a for a in sacct if a.startswith("--format=")).split("=", 1)[1].split(",")
    assert fields[-1] == "JobName"  # free text last
    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        usage_argv("1234,--all")


def test_two_nodes_one_task_each_gives_each_nodes_peak_and_sacct_cpu() -> None:
    acct = parse_usage(read("usage_2node.txt"), "1")
    assert acct is not None
    assert (acct.job_id, acct.state, acct.name, acct.attempts) == ("1", "COMPLETED", "hold-200m", 1)
    assert acct.nodes == ("n1", "n2") and acct.cpus == 2 and acct.gpus is None
    assert acct.time_limit_sec == 300 and acct.elapsed_sec == 5
    # No memory in AllocTRES (memory is not consumable there): ReqTRES, the job's total.
    assert acct.memory == MemoryRequest(8000.0, "job", "ReqTRES")
    assert memory_per_node_mib(acct) == 4000
    assert [s.step for s in acct.steps] == ["batch", "0"]
    step = acct.steps[1]
    assert step.tasks == 2 and step.nodes == ("n1", "n2") and step.cpu_sec == pytest.approx(2.234)
    assert step.usage_max["mem"] == pytest.approx(214884 * KIB)
    assert step.usage_max_node["mem"] == "n2" and step.usage_min_node["mem"] == "n1"
    assert acct.steps[0].usage_max == {}  # the batch step was never sampled: nothing, not 0

    report = usage_report(acct, ended=True)
    by_node = {n.node: n for n in report.per_node}
    assert by_node["n1"].peak_mib == pytest.approx(214780 * KIB)
    assert by_node["n2"].peak_mib == pytest.approx(214884 * KIB)
    assert {n.bound for n in report.per_node} == {"exact"}
    assert report.max_rss_mib_per_node.value == pytest.approx(214884 * KIB)
    assert report.mem_efficiency.value == pytest.approx(214884 * KIB / 4000)
    # sacct's own: the allocation's TotalCPU / (ElapsedRaw x AllocCPUS) = 2.244 / (5 x 2);
    # the report sums the steps' (0.009 + 2.234), equal to the millisecond sacct rounds to.
    assert report.cpu_efficiency.value == pytest.approx(2.244 / 10, abs=0.002 / 10)
    assert report.time_used_fraction.value == pytest.approx(5 / 300)
    for name in ("gpu_util_avg", "gpu_mem_peak_mib", "gpu_hours_allocated", "gpu_hours_busy"):
        assert report.figure(name).value is None
    doc = report.to_json()
    assert doc["gpu_util_avg"] is None and doc["max_rss_mib_per_node"] > 200
    assert doc["suggestion"]["mem"] == "256M"  # 210 MiB + 20 %, rounded up to 128M
    assert doc["suggestion"]["time_limit"] == "00:05:00"
    assert doc["suggestion"]["cpus_per_task"] == 1
    assert json.loads(json.dumps(doc)) == doc


def test_several_tasks_on_a_node_give_an_upper_bound() -> None:
    acct = parse_usage(read("usage_2pernode.txt"), "2")
    assert acct is not None
    assert acct.gpus == 2 and acct.cpus == 4
    assert acct.memory == MemoryRequest(400.0, "job", "ReqTRES")  # 4 CPUs x 100M
    report = usage_report(acct, ended=True)
    top = report.max_rss_mib_per_node.value
    biggest, smallest, total = 214816 * KIB, 214788 * KIB, 859220 * KIB
    # Two tasks per node hold about 2 x 210 MiB; the bound cannot know the split, so it is
    # the least of Tot less one task on the other node and 3 tasks at the largest peak.
    assert top == pytest.approx(min(total - smallest, 3 * biggest))
    assert top >= 2 * smallest
    assert {n.bound for n in report.per_node} == {"at most"}
    assert "if spread evenly" in report.per_node[0].how
    assert report.gpu_hours_allocated.value == pytest.approx(2 * 8 / 3600)
    assert report.suggestion.gpus_per_node.value is None  # no per-GPU utilisation here
    assert report.suggestion.mem.reason.startswith(f"peak at most {top:.0f} MiB per node")


def test_a_job_never_sampled_says_not_measured_never_zero() -> None:
    from ddp_tui.reports.usage_text import usage_text

    acct = parse_usage(read("usage_unsampled.txt"), "3")
    assert acct is not None and all(s.usage_max == {} for s in acct.steps)
    report = usage_report(acct, ended=True)
    assert report.max_rss_mib_per_node.value is None
    assert report.mem_efficiency.value is None
    assert "JobAcctGatherFrequency" in report.max_rss_mib_per_node.note
    assert report.suggestion.mem.value is None
    assert report.cpu_efficiency.value is not None  # TotalCPU is the kernel's, always there
    text = usage_text(report)
    assert "peak memory per node  not measured" in text
    assert " 0 MiB" not in text and "0.0 %" not in text
    assert report.to_json()["max_rss_mib_per_node"] is None


def test_a_requeued_job_reports_its_last_attempt_with_its_own_steps() -> None:
    acct = parse_usage(read("usage_requeued.txt"), "5")
    assert acct is not None
    assert acct.attempts == 2 and acct.state == "COMPLETED"
    # The first attempt's batch step was CANCELLED by the requeue; the last ran .0 and .1.
    assert [(s.step, s.state) for s in acct.steps] == [
        ("batch", "COMPLETED"),
        ("0", "COMPLETED"),
        ("1", "COMPLETED"),
    ]
    assert acct.cpu_sec == pytest.approx(0.020)
    report = usage_report(acct, ended=True)
    assert any("2 attempts" in n for n in report.notes)


def test_a_running_job_reports_what_is_known_and_no_suggestion_yet() -> None:
    acct = parse_usage(read("usage_running_live.txt"), "1")
    assert acct is not None and acct.state == "RUNNING"
    running = acct.steps[-1]
    assert (running.step, running.state, running.end) == ("1", "RUNNING", "")
    report = usage_report(acct, ended=False)
    assert report.time_used_fraction.value == pytest.approx(5 / 300)
    assert report.cpu_efficiency.value is None
    assert "when the step ends" in report.cpu_efficiency.note
    assert report.max_rss_mib_per_node.value is None
    assert all(s.value is None for s in report.suggestion.all())
    assert all(s.reason == "suggested once the job has ended" for s in report.suggestion.all())


def test_no_record_is_none() -> None:
    assert parse_usage("", "99999") is None


def test_legacy_per_node_and_per_cpu_memory() -> None:
    """FAKE ``ReqMem`` suffixes of Slurm before 21.08, which the test cluster (22.05) cannot
    print: the real record with ``ReqTRES``'s memory dropped and ``ReqMem`` rewritten."""
    line = read("usage_2node.txt").splitlines()[0].split(SEP)
    for req, per, expect in (("500Mn", "node", 500.0), ("100Mc", "cpu", 100.0)):
        fields = list(line)
        fields[7] = "billing=2,cpu=2,node=2"  # ReqTRES without mem
        fields[8] = req
        acct = parse_usage(SEP.join(fields) + "\n", "1")
        assert acct is not None and acct.memory == MemoryRequest(expect, per, "ReqMem")  # type: ignore[arg-type]
    # per CPU: 100 MiB x 2 CPUs over 2 nodes
    assert memory_per_node_mib(acct) == 100.0


def test_sizes_times_and_tres() -> None:
    assert size_mib("213516K") == pytest.approx(213516 / 1024)
    assert size_mib("208.5M") == 208.5 and size_mib("4G") == 4096 and size_mib("8000") == 8000
    assert size_mib("1048576", bare="") == 1.0
    assert size_mib("16?") is None and size_mib("") is None
    assert parse_cpu_time("00:02.244") == pytest.approx(2.244)
    assert parse_cpu_time("01:02:03") == 3723
    assert parse_cpu_time("2-01:00:00") == 2 * 86400 + 3600
    assert parse_cpu_time("") is None and parse_cpu_time("junk") is None
    assert parse_tres("cpu=4,mem=8000M,gres/gpu=2") == {
        "cpu": "4",
        "mem": "8000M",
        "gres/gpu": "2",
    }
    assert parse_tres("") == {}


def test_one_query_for_many_jobs_read_job_by_job() -> None:
    # usage_argv("1", "2"): a COMPLETED 2-node job and a RUNNING one (data/README.md).
    text = read("usage_two_jobs.txt")
    found = parse_usages(text, ["1", "2", "3"])
    assert set(found) == {"1", "2"}  # 3: no record, left out
    assert found["1"] == parse_usage(text, "1") and found["2"] == parse_usage(text, "2")
    assert [s.step for s in found["1"].steps] == ["batch", "0"]
    assert [s.step for s in found["2"].steps] == ["batch", "0", "1"]
    assert (found["1"].state, found["2"].state) == ("COMPLETED", "RUNNING")
    assert parse_usages(text, ["2"]).keys() == {"2"}


def test_many_jobs_are_asked_in_chunks_each_once() -> None:
    ids = [str(i) for i in range(1, SACCT_CHUNK + 6)] + ["1"]
    argvs = usage_argvs(ids)
    assert len(argvs) == 2
    asked = [
        a.removeprefix("--jobs=").split(",")
        for argv in argvs
        for a in argv
        if a.startswith("--jobs=")
    ]
    assert [len(chunk) for chunk in asked] == [SACCT_CHUNK, 5]
    assert [j for chunk in asked for j in chunk] == ids[:-1]
    assert usage_argvs([]) == []
