"""The pure parts of durable job history, the sacct chunking and the preflight summary."""

from __future__ import annotations

from ddp_tui.preflight_report import format_bytes, summarize
from ddp_tui.remote.backends import slurm
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.history import (
    MissingJobs,
    end_record,
    lost_status,
    split_job_lines,
    status_of_end,
)


def test_split_separates_attempts_from_ends_and_first_real_end_wins() -> None:
    lines = [
        {"job_id": "1", "attempt": 1},
        {"event": "end", "job_id": "1", "state": "LOST", "scope": "slurm:a"},
        {"event": "end", "job_id": "1", "state": "FAILED"},
        {"event": "end", "job_id": "1", "state": "COMPLETED"},  # a second instance's copy
        {"job_id": "2", "attempt": 2, "retry_of": "1"},
        {"event": "end", "state": "COMPLETED"},  # no job id: ignored
    ]
    attempts, ends = split_job_lines(lines)
    assert [a["job_id"] for a in attempts] == ["1", "2"]
    assert list(ends) == ["1"] and ends["1"]["state"] == "FAILED"


def test_end_record_round_trips_and_lost_binds_only_its_scope() -> None:
    status = JobStatus(
        job_id="7",
        state=JobState.TIMEOUT,
        raw_state="TIMEOUT",
        node_list="n[1-2]",
        elapsed_sec=61.0,
        exit_code=0,
        start="2026-01-01T00:00:00",
        end="2026-01-01T00:01:01",
    )
    back = status_of_end(end_record(status), scope="")
    assert back is not None
    assert (back.state, back.node_list, back.elapsed_sec, back.exit_code, back.end) == (
        JobState.TIMEOUT,
        "n[1-2]",
        61.0,
        0,
        "2026-01-01T00:01:01",
    )
    lost = end_record(lost_status("8"), scope="slurm:a")
    assert status_of_end(lost, scope="slurm:a") is not None
    assert status_of_end(lost, scope="slurm:b") is None
    # An end record must name a final state; anything else is not trusted.
    assert status_of_end({"event": "end", "job_id": "9", "state": "RUNNING"}, scope="") is None
    assert status_of_end({"event": "end", "job_id": "9", "state": "BOGUS"}, scope="") is None


def test_missing_jobs_need_the_whole_grace_period() -> None:
    running = JobStatus(job_id="1", state=JobState.RUNNING)
    missing = MissingJobs(grace_sec=60.0)
    assert missing.observe(["1", "2"], {"1": running}, now=100.0) == []
    assert missing.observe(["1", "2"], {"1": running}, now=159.0) == []
    assert missing.observe(["1", "2"], {}, now=160.0) == ["2"]
    # Seen again before the grace ran out: the clock starts over.
    assert missing.observe(["1"], {"1": running}, now=170.0) == []
    assert missing.observe(["1"], {}, now=200.0) == []
    assert missing.observe(["1"], {}, now=259.0) == []
    assert missing.observe(["1"], {}, now=260.0) == ["1"]


def test_sacct_is_chunked_and_the_answers_merged() -> None:
    ids = [str(n) for n in range(1, 451)]
    sched = slurm.SlurmScheduler(executor=None)  # type: ignore[arg-type]  # argv only
    cmds = sched.poll_commands(ids)
    assert cmds[0] == slurm.squeue_argv()
    sacct_ids = [c[-1].removeprefix("--jobs=").split(",") for c in cmds[1:]]
    assert [len(chunk) for chunk in sacct_ids] == [200, 200, 50]
    assert [j for chunk in sacct_ids for j in chunk] == ids

    def row(job_id: str) -> str:
        fields = [""] * len(slurm.SACCT_FIELDS)
        fields[slurm.SACCT_FIELDS.index("JobID")] = job_id
        fields[slurm.SACCT_FIELDS.index("State")] = "COMPLETED"
        return slurm.SEP.join(fields)

    answers = [CommandResult(cmds[0], 0, "", "")] + [
        CommandResult(c, 0, "\n".join(row(j) for j in chunk) + "\n", "")
        for c, chunk in zip(cmds[1:], sacct_ids, strict=True)
    ]
    statuses = sched.parse_poll(ids, answers)
    assert len(statuses) == 450 and statuses["450"].state is JobState.COMPLETED


def test_preflight_summary() -> None:
    doc = {
        "ok": True,
        "world_size": 4,
        "backend": "gloo",
        "hosts": ["n1", "n1", "n2", "n2"],
        "bandwidth": [
            {"bytes": 1024, "busbw_gbps": 0.01},
            {"bytes": 2**28, "busbw_gbps": 1.5},
            {"bytes": 2**20, "busbw_gbps": 0.9},
        ],
        "failed_ranks": [],
        "error": None,
    }
    pf = summarize(doc)
    assert pf.ok is True and pf.world_size == 4 and pf.bandwidth_rows == 3
    assert pf.largest_bytes == 2**28 and pf.busbw_gbps == 1.5
    assert pf.describe() == "preflight passed, world size 4, busbw 1.5 GB/s at 256 MiB"
    failed = summarize({"ok": False, "world_size": 2, "error": "rank 1 timed out"})
    assert failed.label == "FAILED" and "rank 1 timed out" in failed.describe()
    assert summarize(None).ok is None and summarize(None).label == "-"
    assert format_bytes(1024) == "1 KiB" and format_bytes(1000) == "1000 B"
