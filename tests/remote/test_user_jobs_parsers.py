"""Every job of the user, from what Slurm really prints (tests/remote/data/README.md: jobs sent
with plain sbatch on the test cluster, Slurm 22.05.8): the squeue and sacct of the listing,
``scontrol show job``'s paths, sbatch's filename patterns, ``--since`` and a log read by offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import FileRead, FileStat, ReadResult
from ddp_tui.remote.backends.slurm.commands import SEP
from ddp_tui.remote.backends.slurm.parsers import parse_show_job, tres_gpus
from ddp_tui.remote.backends.slurm.usage_query import USAGE_FIELDS, parse_usages
from ddp_tui.remote.backends.slurm.user_jobs import (
    SACCT_STDIO,
    USER_SACCT_FIELDS,
    default_stdio,
    parse_user_sacct,
    parse_user_squeue,
    sacct_fields,
    sacct_has_stdio,
    show_job_paths,
    user_sacct_argv,
    user_squeue_argv,
)
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.stdio_paths import NO_TASK, PatternValues, expand_stdio_path
from ddp_tui.remote.backends.user_jobs import DEFAULT_SINCE, Since, parse_since
from ddp_tui.remote.store.tail import chunk_request, log_chunk
from ddp_tui.reports.efficiency import usage_report

DATA = Path(__file__).parent / "data"
WD = "/tmp/uj_explore/w2"
#: The format ``user_sacct.txt`` was asked in: the jobs alone (``--allocations``), before the
#: listing asked for their steps and what they used (data/README.md).
ALLOCATIONS = USER_SACCT_FIELDS


def data(name: str) -> str:
    return (DATA / name).read_text()


# --------------------------------------------------------------------------- the argv


def test_squeue_asks_for_every_queued_job_one_line_per_task_name_last() -> None:
    argv = user_squeue_argv()
    assert argv[0] == "env" and "squeue" in argv
    assert {"--me", "--array", "--noheader"} <= set(argv)
    fmt = next(a for a in argv if a.startswith("--Format="))
    fields = fmt.removeprefix("--Format=").split(",")
    assert fields[-1] == "Name:0"  # free text last, no separator after it
    assert all(f.endswith(f":0{SEP}") for f in fields[:-1])
    assert "tres-alloc:0" + SEP in fields and "STDOUT:0" + SEP in fields


def test_sacct_asks_for_the_window_and_stdio_only_where_slurm_has_it() -> None:
    argv = user_sacct_argv(DEFAULT_SINCE)
    # Every step, and what each job used: an ended job's efficiency comes with the listing.
    assert "--allocations" not in argv and f"--delimiter={SEP}" in argv
    assert "--starttime=now-604800seconds" in argv
    fields = next(a for a in argv if a.startswith("--format=")).split("=", 1)[1].split(",")
    assert fields == list(sacct_fields(stdio=False)) and fields[-1] == "JobName"
    assert set(USER_SACCT_FIELDS) | set(USAGE_FIELDS) == set(fields)
    assert len(fields) == len(set(fields))  # each once
    with_stdio = user_sacct_argv(parse_since("2026-11-20"), stdio=True)
    assert "--starttime=2026-11-20" in with_stdio
    fmt = next(a for a in with_stdio if a.startswith("--format="))
    assert fmt.endswith(",StdOut,StdErr,JobName")
    assert sacct_has_stdio("Slurm 24.05.1") and sacct_has_stdio("Slurm 25.11.0")
    assert not sacct_has_stdio("Slurm 22.05.8") and not sacct_has_stdio("Slurm 23.11.4")
    assert not sacct_has_stdio("?")


# --------------------------------------------------------------------------- squeue


def test_squeue_rows_of_the_real_queue() -> None:
    jobs = {j.job_id: j for j in parse_user_squeue(data("user_squeue.txt"))}
    assert list(jobs) == ["8", "7_0", "7_1", "7_2", "6", "4"]
    held = jobs["6"]
    assert held.state is JobState.PENDING and held.reason == "JobHeldUser"
    assert (held.nodes, held.gpus, held.time_limit_sec) == (1, 1, 3600)
    assert held.array_job_id is None and held.array_task_id is None
    assert held.submit_time == "2026-11-28T04:28:11" and held.start_time == ""
    # -o %x-%j-%u.out worked out; -e .../err-%A_%a-%N.err needs the node it has not got yet.
    assert held.stdout == f"{WD}/exp1-6-root.out" and held.stderr is None
    task = jobs["7_1"]
    assert (task.array_job_id, task.array_task_id) == ("7", 1)
    assert (task.nodes, task.gpus, task.time_limit_sec) == (2, 3, 300)  # --gpus=3: per job
    # squeue 22.05 prints slurm-7.out for "none given": an array task's is slurm-%A_%a.out.
    assert task.stdout == task.stderr == f"{WD}/slurm-7_1.out"
    running = jobs["4"]
    assert running.state is JobState.RUNNING and running.reason == ""
    assert (running.nodes, running.node_list, running.gpus) == (2, "n[2-3]", 4)
    assert running.elapsed_sec == 3 and running.start_time == "2026-11-28T04:28:12"
    assert running.end_time == ""  # the expected end is no end
    assert running.stdout == f"{WD}/r-4-n2.out"  # %N: the batch host, the first node
    assert running.name == "run name" and running.user == "root" and running.source == "squeue"


def test_squeue_keeps_an_odd_name_whole() -> None:
    odd = next(j for j in parse_user_squeue(data("user_squeue.txt")) if j.job_id == "8")
    assert odd.name == f"odd | name{SEP}x"
    assert odd.time_limit_sec == 86400 and odd.gpus == 0


def test_squeue_nothing_queued() -> None:
    assert parse_user_squeue("") == [] and parse_user_squeue("\n") == []


# --------------------------------------------------------------------------- sacct


def test_sacct_rows_of_the_real_window() -> None:
    jobs = {j.job_id: j for j in parse_user_sacct(data("user_sacct.txt"), ALLOCATIONS)}
    assert set(jobs) == {"1", "2", "4", "5", "3_0", "3_1"}
    assert jobs["1"].state is JobState.COMPLETED and jobs["1"].exit_code == 0
    assert jobs["2"].state is JobState.FAILED and jobs["2"].exit_code == 3
    cancelled = jobs["5"]
    assert cancelled.state is JobState.CANCELLED and cancelled.raw_state == "CANCELLED by 0"
    assert cancelled.end_time == "2026-11-28T04:28:13" and cancelled.node_list == "n2"
    assert jobs["4"].state is JobState.RUNNING and jobs["4"].exit_code is None
    assert jobs["4"].gpus == 4 and jobs["4"].nodes == 2  # AllocTRES
    assert (jobs["3_0"].array_job_id, jobs["3_0"].array_task_id) == ("3", 0)
    assert jobs["1"].time_limit_sec == 3600 and jobs["1"].gpus == 0
    # 22.05's sacct keeps no paths: not known (the log reader asks scontrol, or guesses).
    assert jobs["1"].stdout is None and jobs["1"].source == "sacct"


def test_sacct_a_record_of_tasks_that_never_started_gives_a_row_per_task() -> None:
    # Made from the real line of task 3_1: sacct prints a throttled array's waiting tasks as
    # one record (3_[2-4]); a task's own record wins over the group's.
    line = next(ln for ln in data("user_sacct.txt").splitlines() if ln.startswith("3_1" + SEP))
    group = line.replace("3_1" + SEP + "3", "3_[1-4%2]" + SEP + "3", 1).replace(
        "COMPLETED", "PENDING", 1
    )
    jobs = {j.job_id: j for j in parse_user_sacct(f"{line}\n{group}\n", ALLOCATIONS)}
    assert list(jobs) == ["3_1", "3_2", "3_3", "3_4"]
    assert jobs["3_1"].state is JobState.COMPLETED
    assert jobs["3_3"].state is JobState.PENDING and jobs["3_3"].array_task_id == 3


def test_sacct_with_the_paths_of_slurm_24_05() -> None:
    # Constructed (this cluster is 22.05): the real line of task 3_0 with StdOut and StdErr
    # as 24.05's sacct prints them without --expand-patterns, the patterns given to sbatch.
    line = next(ln for ln in data("user_sacct.txt").splitlines() if ln.startswith("3_0" + SEP))
    head, _, name = line.rpartition(SEP)
    text = f"{head}{SEP}out-%A_%a-%j.log{SEP}{SEP}{name}\n"
    job = parse_user_sacct(text, (*ALLOCATIONS[:-1], *SACCT_STDIO, ALLOCATIONS[-1]))[0]
    assert job.stdout == f"{WD}/out-3_0-9.log"  # %j: the task's own number, JobIDRaw
    assert job.stderr is None  # none recorded: not known


# --------------------------------------------------------------------------- efficiency

#: sacct's own figures of job 1 in user_sacct_steps.txt (data/README.md).
TOTAL_CPU, ELAPSED, ALLOC_CPUS = 2.416, 9, 2
MAX_RSS_MIB = 218552 / 1024  # step 1.0, on n1; the smallest task 218536K on n2
MEM_PER_NODE = 500  # --mem=500M; ReqTRES mem=1000M for the job's 2 nodes


def test_an_ended_jobs_efficiency_comes_with_the_listing_from_its_steps() -> None:
    rows = parse_user_sacct(data("user_sacct_steps.txt"))
    jobs = {j.job_id: j for j in rows}
    assert list(jobs) == ["1", "2"]  # the steps are no rows of their own
    done, live = jobs["1"], jobs["2"]
    assert (done.state, done.nodes, done.node_list, done.name) == (
        JobState.COMPLETED, 2, "n[1-2]", "eff-2node",
    )  # fmt: skip
    # sacct's TotalCPU / (Elapsed x AllocCPUS), up to the millisecond it rounds each step to.
    assert done.cpu_efficiency == pytest.approx(TOTAL_CPU / (ELAPSED * ALLOC_CPUS), abs=0.002 / 18)
    assert done.mem_efficiency == pytest.approx(MAX_RSS_MIB / MEM_PER_NODE)
    # Running: its steps' CPU time counts when they end, so nothing is measured yet.
    assert live.state is JobState.RUNNING
    assert live.cpu_efficiency is None and live.mem_efficiency is None
    doc = done.to_dict()
    assert doc["cpu_efficiency"] == done.cpu_efficiency and live.to_dict()["mem_efficiency"] is None


def test_the_listings_efficiency_is_the_usage_reports() -> None:
    # One reader of an allocation and its steps: the listing's figures are `ddp-tui usage`'s.
    listed = {j.job_id: j for j in parse_user_sacct(data("user_sacct_steps.txt"))}["1"]
    acct = parse_usages(data("usage_two_jobs.txt"), ["1", "2"])["1"]
    report = usage_report(acct, ended=True)
    assert listed.cpu_efficiency == report.cpu_efficiency.value
    assert listed.mem_efficiency == report.mem_efficiency.value


def test_an_ended_job_whose_steps_accounting_has_not_yet_is_not_measured_not_zero() -> None:
    # The real allocation line of job 1 alone: accounting lags the controller with the steps.
    line = data("user_sacct_steps.txt").splitlines()[0]
    assert line.startswith("1" + SEP)
    (job,) = parse_user_sacct(line + "\n")
    assert job.mem_efficiency is None  # no step sampled: not measured
    assert job.cpu_efficiency == pytest.approx(TOTAL_CPU / (ELAPSED * ALLOC_CPUS))  # its own


def test_an_answer_without_the_usage_fields_gives_no_efficiency() -> None:
    jobs = {j.job_id: j for j in parse_user_sacct(data("user_sacct.txt"), ALLOCATIONS)}
    assert jobs["1"].state is JobState.COMPLETED and jobs["1"].cpu_efficiency is None


# --------------------------------------------------------------------------- paths


def test_scontrol_paths_with_what_it_leaves_worked_out() -> None:
    def paths(name: str) -> tuple[str | None, str | None]:
        return show_job_paths(parse_show_job(data(name))[0])

    assert paths("show_job_user_done.txt") == (f"{WD}/slurm-1.out", f"{WD}/slurm-1.out")
    assert paths("show_job_user_running_2n.txt") == (f"{WD}/r-4-n2.out", f"{WD}/r-4-n2.out")
    assert paths("show_job_user_held.txt") == (f"{WD}/exp1-6-root.out", None)


def test_default_name_of_a_job_whose_paths_accounting_lost() -> None:
    jobs = {j.job_id: j for j in parse_user_sacct(data("user_sacct.txt"), ALLOCATIONS)}
    assert default_stdio(jobs["1"]) == f"{WD}/slurm-1.out"
    assert default_stdio(jobs["3_0"]) == f"{WD}/slurm-3_0.out"  # as the files really are


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # Slurm's own examples (print_fields.c): a batch script's %J is the job id alone.
        ("job%J.out", "/w/job128.out"),
        ("job%4j.out", "/w/job0128.out"),
        ("%x-%u-%N-%n-%t-%s.out", "/w/train-ann-n1-0-0-batch.out"),
        ("/abs/%A_%a.out", "/abs/128_4294967294.out"),  # no array task: NO_VAL, as written
        ("100%%-%j.out", "/w/100%-128.out"),
        ("%q-%3q.out", "/w/%q-%3q.out"),  # no pattern: kept as written
        ("a\\%j.out", "/w/a%j.out"),  # a backslash: taken literally
        ("%j%", "/w/128"),  # a lone % at the end: dropped
        ("%20j.out", "/w/0000000128.out"),  # padding stops at 10
    ],
)
def test_patterns_as_slurmstepd_works_them_out(pattern: str, expected: str) -> None:
    values = PatternValues(job_id="128", name="train", user="ann", node="n1", work_dir="/w")
    assert expand_stdio_path(pattern, values) == expected


def test_patterns_of_an_array_task_and_what_is_not_known_yet() -> None:
    task = PatternValues(job_id="130", array_job_id="128", array_task_id=12, work_dir="/w/")
    assert expand_stdio_path("s-%A_%a-%j-%b.out", task) == "/w/s-128_12-130-2.out"
    waiting = PatternValues(job_id=None, array_job_id="128", array_task_id=12)
    assert expand_stdio_path("slurm-%A_%a.out", waiting) == "slurm-128_12.out"
    assert expand_stdio_path("slurm-%j.out", waiting) is None  # no number of its own yet
    assert expand_stdio_path("n-%N.out", PatternValues(job_id="1")) is None
    assert expand_stdio_path("", PatternValues(job_id="1")) is None
    assert NO_TASK == 4294967294


def test_gpus_of_a_tres_list() -> None:
    assert tres_gpus("cpu=2,mem=8000M,node=2,billing=2,gres/gpu=3") == 3
    assert tres_gpus("cpu=8,gres/gpu=8,gres/gpu:a100=8") == 8  # the typed count repeats it
    assert tres_gpus("cpu=8,gres/gpu:a100=4,gres/gpu:v100=2") == 6
    assert tres_gpus("cpu=1,mem=4000M,node=1") == 0
    assert tres_gpus("") is None and tres_gpus("N/A") is None


# --------------------------------------------------------------------------- --since


@pytest.mark.parametrize(
    ("text", "seconds", "at"),
    [
        ("7d", 604800, None),
        ("12h", 43200, None),
        ("30m", 1800, None),
        ("2w", 1209600, None),
        ("90s", 90, None),
        ("2026-11-20", None, "2026-11-20"),
        ("2026-11-20T08:00", None, "2026-11-20T08:00"),
        ("2026-11-20T08:00:30", None, "2026-11-20T08:00:30"),
    ],
)
def test_since_forms(text: str, seconds: int | None, at: str | None) -> None:
    since = parse_since(text)
    assert (since.seconds, since.at) == (seconds, at)
    assert str(since) == text


@pytest.mark.parametrize("text", ["", "7", "7 days", "-7d", "yesterday", "2026-13-01", "20261120"])
def test_since_refuses_what_it_cannot_read_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a time: give .*7d.*2026-11-20"):
        parse_since(text)


def test_since_as_a_moment() -> None:
    assert Since(seconds=60).timestamp(now=1000.0) == 940.0
    assert Since(seconds=60).sacct_starttime() == "now-60seconds"
    assert parse_since("1970-01-02").timestamp() > 0


# --------------------------------------------------------------------------- a log by offset


def _answer(path: str, offset: int | None, max_bytes: int, content: bytes) -> ReadResult:
    req = chunk_request(path, offset, max_bytes)
    start = max(0, len(content) + req.offset) if req.offset < 0 else req.offset
    size = req.max_bytes or len(content)
    data = content[start : start + size] if start <= len(content) else b""
    return ReadResult(req, data, FileStat(len(content), 0.0, False, 7))


def test_log_tail_drops_the_cut_first_line_and_holds_back_a_partial_last() -> None:
    content = b"one\ntwo\nthree\nfour\nbar 50%"
    chunk = log_chunk(_answer("/x.out", None, 12, content))
    assert chunk.lines == ("four",) and chunk.partial == "bar 50%"
    assert chunk.offset == content.index(b"bar") and chunk.size == len(content)
    more = content + b" 100%\nfive\n"
    again = log_chunk(_answer("/x.out", chunk.offset, 1024, more))
    assert again.lines == ("bar 50% 100%", "five") and again.partial == ""
    assert again.offset == len(more) and not again.behind


def test_log_read_from_the_start_and_in_pieces() -> None:
    content = b"a\nb\nc\n"
    first = log_chunk(_answer("/x.out", 0, 4, content))
    assert first.lines == ("a", "b") and first.offset == 4 and first.behind
    rest = log_chunk(_answer("/x.out", first.offset, 4, content))
    assert rest.lines == ("c",) and rest.offset == 6
    long = b"x" * 10
    piece = log_chunk(_answer("/x.out", 0, 4, long))  # one line longer than a read
    assert piece.lines == ("xxxx",) and piece.offset == 4


def test_log_cut_below_the_offset_or_missing() -> None:
    shorter = log_chunk(_answer("/x.out", 100, 64, b"new\n"))
    assert shorter.restarted and shorter.offset == 0
    req = FileRead("/nope.out", 0, 64)
    gone = log_chunk(ReadResult(req, b"", None))
    assert gone.size is None and gone.lines == () and not gone.restarted
