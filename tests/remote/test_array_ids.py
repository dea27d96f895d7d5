"""Slurm job-array ids (``1234_5``, ``1234_[2-5%2]``) through the ids, the parsers and a poll.

The captured files of ``data/`` (Slurm 22.05.8) hold one array, job 22, whose pending
tasks squeue and sacct print as ``22_[1-2]``. Other rows are synthesized in the same
format (fields split by ``SEP``, as ``squeue --array``/``sacct --parsable2`` print them)
for what that capture lacks: throttled arrays, step and bitmap index lists, task steps,
a cut index list.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddp_tui.remote.backends import slurm
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor
from ddp_tui.remote.backends.job_ids import (
    array_index,
    array_master,
    covered_ids,
    expand_array_id,
    is_collapsed,
    job_id_sort_key,
    masters,
    task_id,
    task_ranges,
)
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.slurm import SEP, SlurmScheduler
from ddp_tui.remote.backends.slurm.commands import accounting_ids
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.history import MissingJobs

DATA = Path(__file__).parent / "data"
ARRAY = json.loads((DATA / "jobs.json").read_text())["array"]


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def squeue_row(job_id: str, state: str, reason: str = "None", nodes: str = "n1") -> str:
    """One line as ``squeue_argv`` prints it (see data/squeue.txt)."""
    start = "2026-11-21T09:50:36" if state == "RUNNING" else "N/A"
    node_list = nodes if state == "RUNNING" else ""
    fields = [job_id, state, reason, "1", node_list, "0:04", start, "N/A", "debug", "sweep"]
    return SEP.join(fields)


def sacct_row(job_id: str, state: str, exit_code: str = "0:0", elapsed: str = "0") -> str:
    """One line as ``sacct_argv`` prints it (see data/sacct.txt)."""
    ran = state not in ("PENDING",)
    fields = [
        job_id, state, exit_code, elapsed, "1", "n1" if ran else "None assigned",
        "2026-11-21T09:50:36" if ran else "Unknown", "Unknown", "debug", "None", "sweep",
    ]  # fmt: skip
    return SEP.join(fields)


def text(*rows: str) -> str:
    return "".join(r + "\n" for r in rows)


def answer(argv: list[str], stdout: str, rc: int = 0) -> CommandResult:
    return CommandResult(tuple(argv), rc, stdout, "")


# --------------------------------------------------------------------------- the ids


@pytest.mark.parametrize(
    ("printed", "ids"),
    [
        ("1234_[2-5%2]", ["1234_2", "1234_3", "1234_4", "1234_5"]),  # %2: the throttle
        ("1234_[1,3,5-7]", ["1234_1", "1234_3", "1234_5", "1234_6", "1234_7"]),
        ("1234_[1-21:5%3]", ["1234_1", "1234_6", "1234_11", "1234_16", "1234_21"]),
        ("1234_[4]", ["1234_4"]),
        ("1234_[3-4,4]", ["1234_3", "1234_4"]),
        # Cut by SLURM_BITSTR_LEN: "1-1..." may have been "1-19": only what is sure.
        ("1234_[0,2,4,1-1...]", ["1234_0", "1234_2", "1234_4"]),
        ("1234_[0,2,4,...]", ["1234_0", "1234_2", "1234_4"]),
        ("1234_5", ["1234_5"]),
        ("1234", ["1234"]),
        ("1234_5.batch", ["1234_5.batch"]),
        (" 1234_[0-1] ", ["1234_0", "1234_1"]),
    ],
)
def test_expand_array_id(printed: str, ids: list[str]) -> None:
    assert expand_array_id(printed) == ids


@pytest.mark.parametrize("bad", ["1234_[a-b]", "1234_[5-2]", "1234_[1-9:0]", "1234_[]"])
def test_an_index_list_that_does_not_parse_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match=r"job array indices .* is not N, A-B|empty item"):
        expand_array_id(bad)


def test_master_index_and_task_id() -> None:
    assert [array_master(j) for j in ("1234_5", "1234_5.batch", "1234_[2-5%2]", "77")] == [
        "1234",
        "1234",
        "1234",
        "77",
    ]
    assert array_master("local-3") == "local-3"  # another scheduler's id, as it is
    assert [array_index(j) for j in ("1234_5", "1234_10", "1234", "1234_5.0", "1234_[1]")] == [
        5,
        10,
        None,
        None,
        None,
    ]
    assert task_id("1234", 5) == "1234_5"
    with pytest.raises(ValueError, match="array master id"):
        task_id("1234_1", 5)
    with pytest.raises(ValueError, match="array index"):
        task_id("1234", -1)
    assert is_collapsed("1234_[1-2]") and not is_collapsed("1234_1")
    assert masters(["1234_0", "9", "1234_7", "1235_0"]) == ["1234", "9", "1235"]


def test_ids_sort_by_job_number_then_index_then_step() -> None:
    ids = ["1300", "1234_10", "local-1", "1234_9", "99", "1234_9.batch", "1234_[11-12]", "1234_2"]
    ids += ["98+1", "98+0"]
    assert sorted(ids, key=job_id_sort_key) == [
        "98+0",
        "98+1",
        "99",
        "1234_[11-12]",
        "1234_2",
        "1234_9",
        "1234_9.batch",
        "1234_10",
        "1300",
        "local-1",
    ]


def test_covered_ids_answer_for_a_huge_group_without_expanding_it() -> None:
    wanted = ["1234_3999998", "1234_4000001", "1235_5", "77"]
    assert covered_ids("1234_[0-3999999%10]", wanted) == ["1234_3999998"]
    assert task_ranges("0-3999999%10") == [range(0, 4000000)]
    assert covered_ids("77", wanted) == ["77"] and covered_ids("78", wanted) == []


# --------------------------------------------------------------------------- argv


def test_squeue_lists_one_line_per_task_and_no_index_list_is_cut() -> None:
    for argv in (slurm.squeue_argv(), slurm.jobs_in_dir_argv()[0]):
        assert "--array" in argv[argv.index("squeue") :]
    for argv in (slurm.squeue_argv(), slurm.sacct_argv(["1"]), *slurm.jobs_in_dir_argv()):
        tool = next(i for i, a in enumerate(argv) if a in ("squeue", "sacct"))
        assert "SLURM_BITSTR_LEN=0" in argv[:tool]
        assert "SLURM_BITSTR_LEN" not in argv[:tool]  # no longer unset: set to 0


def test_task_ids_reach_every_command_and_groups_do_not() -> None:
    assert slurm.scancel_argv("1234_5")[-1] == "1234_5"
    assert slurm.requeue_argv("1234_5")[-1] == "1234_5"
    assert slurm.show_job_argv("1234_5")[-1] == "1234_5"
    assert slurm.sacct_argv(["1234_5", "1234_6"], steps=True)[-1] == "--jobs=1234_5,1234_6"
    assert slurm.accounting_argv("1234_5")[-1] == "--jobs=1234_5"
    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        slurm.scancel_argv("1234_[1-3]")  # a group is cancelled by its master id


def test_sacct_is_asked_by_array_once_and_other_ids_as_they_are() -> None:
    ids = ["1234_0", "77", "1234_5", "88+1", "1235_0", "77"]
    assert accounting_ids(ids) == ["1234", "77", "88+1", "1235"]


def test_a_poll_of_200_array_tasks_is_one_squeue_and_one_sacct() -> None:
    sched = SlurmScheduler(LocalExecutor())
    one_array = [f"1234_{i}" for i in range(200)]
    cmds = sched.poll_commands(one_array)
    assert len(cmds) == 2 and cmds[0] == slurm.squeue_argv()
    assert cmds[1][-1] == "--jobs=1234"
    # 200 arrays of one task each, or a mix with plain jobs: still 200 ids for sacct.
    many = [f"{1000 + i}_0" for i in range(100)] + [str(5000 + i) for i in range(100)]
    cmds = sched.poll_commands(many)
    assert len(cmds) == 2
    assert len(cmds[1][-1].removeprefix("--jobs=").split(",")) == 200
    assert len(sched.poll_commands([*many, "9999_3"])) == 3  # the 201st id: a second chunk


# --------------------------------------------------------------------------- squeue


def test_real_squeue_group_of_pending_tasks_answers_for_each_task() -> None:
    """data/squeue.txt was printed without --array: job 22's pending tasks on one line."""
    jobs = slurm.parse_squeue(data("squeue.txt"))
    for task in (f"{ARRAY}_1", f"{ARRAY}_2"):
        assert jobs[task].job_id == task
        assert jobs[task].state is JobState.PENDING and jobs[task].reason == "Priority"
        assert jobs[task].name == "arr"
    assert f"{ARRAY}_[1-2]" not in jobs
    only = slurm.parse_squeue(data("squeue.txt"), only={f"{ARRAY}_2", "999_0"})
    assert list(only) == [f"{ARRAY}_2"]


def test_squeue_per_task_lines_and_a_throttled_group() -> None:
    out = text(
        squeue_row("1234_0", "RUNNING"),
        squeue_row("1234_1", "RUNNING", nodes="n2"),
        squeue_row("1234_[2-5%2]", "PENDING", "JobArrayTaskLimit"),
        squeue_row("1300", "PENDING", "Priority"),
    )
    jobs = slurm.parse_squeue(out)
    assert list(jobs) == ["1234_0", "1234_1", "1234_2", "1234_3", "1234_4", "1234_5", "1300"]
    assert jobs["1234_1"].state is JobState.RUNNING and jobs["1234_1"].node_list == "n2"
    assert jobs["1234_5"].reason == "JobArrayTaskLimit"
    picked = slurm.parse_squeue(out, only={"1234_0", "1234_5"})
    assert sorted(picked) == ["1234_0", "1234_5"]
    assert picked["1234_5"].job_id == "1234_5" and picked["1234_5"].state is JobState.PENDING


def test_a_task_own_line_beats_the_group_line_in_either_order() -> None:
    group = squeue_row("1234_[2-3]", "PENDING", "Priority")
    own = squeue_row("1234_3", "RUNNING")
    for out in (text(group, own), text(own, group)):
        jobs = slurm.parse_squeue(out)
        assert jobs["1234_3"].state is JobState.RUNNING
        assert jobs["1234_2"].state is JobState.PENDING


def test_a_group_that_does_not_parse_stays_as_printed() -> None:
    jobs = slurm.parse_squeue(text(squeue_row("1234_[x]", "PENDING")))
    assert list(jobs) == ["1234_[x]"]


# --------------------------------------------------------------------------- sacct


def test_real_sacct_group_of_pending_tasks_answers_for_each_task() -> None:
    jobs = slurm.parse_sacct(data("sacct.txt"))
    assert jobs[f"{ARRAY}_1"].state is JobState.PENDING
    assert jobs[f"{ARRAY}_2"].node_list == ""  # "None assigned"
    assert f"{ARRAY}_[1-2]" not in jobs


ARRAY_SACCT = text(
    sacct_row("1234_0", "COMPLETED", elapsed="61"),
    sacct_row("1234_0.batch", "COMPLETED"),
    sacct_row("1234_0.extern", "COMPLETED"),
    sacct_row("1234_0.0", "COMPLETED"),
    sacct_row("1234_1", "FAILED", exit_code="3:0", elapsed="5"),
    sacct_row("1234_1.batch", "FAILED", exit_code="3:0"),
    sacct_row("1234_[2-5%2]", "CANCELLED by 1000"),  # cancelled with its array, never run
    sacct_row("1234_3", "TIMEOUT", elapsed="600"),  # started before the cancel
)


def test_sacct_array_rows_with_steps_and_a_cancelled_group() -> None:
    jobs = slurm.parse_sacct(ARRAY_SACCT)
    assert jobs["1234_0"].state is JobState.COMPLETED and jobs["1234_0"].elapsed_sec == 61
    assert jobs["1234_1"].state is JobState.FAILED and jobs["1234_1"].exit_code == 3
    assert jobs["1234_3"].state is JobState.TIMEOUT  # its own record, not the group's
    for task in ("1234_2", "1234_4", "1234_5"):
        assert jobs[task].state is JobState.CANCELLED and jobs[task].job_id == task
    assert "1234_0.batch" in jobs and "1234_0.extern" in jobs  # steps keep their own ids
    asked = slurm.parse_sacct(ARRAY_SACCT, only={"1234_0", "1234_5"})
    assert sorted(asked) == ["1234_0", "1234_5"]  # no step, no task nobody asked about


# --------------------------------------------------------------------------- a poll


def test_a_batched_poll_answers_exactly_the_tasks_asked() -> None:
    sched = SlurmScheduler(LocalExecutor())
    ids = ["1234_0", "1234_5", "1234_7", "1300"]
    cmds = sched.poll_commands(ids)
    assert cmds[1][-1] == "--jobs=1234,1300"
    queue = text(
        squeue_row("1234_7", "RUNNING"),
        squeue_row("1234_8", "RUNNING"),
        squeue_row("1300", "PENDING", "Priority"),
    )
    accounting = ARRAY_SACCT + text(sacct_row("1234_7", "RUNNING"), sacct_row("1300", "PENDING"))
    statuses = sched.parse_poll(ids, [answer(cmds[0], queue), answer(cmds[1], accounting)])
    assert sorted(statuses) == sorted(ids)
    assert statuses["1234_0"].state is JobState.COMPLETED
    assert statuses["1234_5"].state is JobState.CANCELLED  # from the group record
    assert statuses["1234_7"].state is JobState.RUNNING and statuses["1300"].reason == "Priority"


def test_tasks_answered_by_groups_are_never_lost_and_the_rest_are() -> None:
    sched = SlurmScheduler(LocalExecutor())
    ids = ["1234_2", "1234_5", "1234_9"]
    cmds = sched.poll_commands(ids)
    queue = text(squeue_row("1234_[2-5%2]", "PENDING", "JobArrayTaskLimit"))
    statuses = sched.parse_poll(ids, [answer(cmds[0], queue), answer(cmds[1], "")])
    missing = MissingJobs(grace_sec=60.0)
    assert missing.observe(ids, statuses, now=0.0) == []
    assert missing.observe(ids, statuses, now=60.0) == ["1234_9"]


def test_poll_asks_sacct_once_by_array_for_the_tasks_gone_from_the_queue(tmp_path: Path) -> None:
    """A real poll through ``env`` and a PATH of fake ``squeue``/``sacct`` scripts (no
    Slurm here) that print captured-format rows and log the argv they got."""
    env_bin, cat_bin = shutil.which("env"), shutil.which("cat")
    assert env_bin is not None and cat_bin is not None
    (tmp_path / "env").symlink_to(env_bin)
    (tmp_path / "queue.txt").write_text(text(squeue_row("1234_7", "RUNNING")))
    (tmp_path / "acct.txt").write_text(ARRAY_SACCT)
    for tool, out in (("squeue", "queue.txt"), ("sacct", "acct.txt")):
        script = tmp_path / tool
        script.write_text(
            f'#!/bin/sh\necho "{tool} BITSTR=$SLURM_BITSTR_LEN $*" >> "{tmp_path}/calls.log"\n'
            f'{cat_bin} "{tmp_path}/{out}"\n'
        )
        script.chmod(0o755)
    sched = SlurmScheduler(LocalExecutor(), env={"PATH": str(tmp_path), "SLURM_BITSTR_LEN": "64"})
    statuses = sched.poll(["1234_0", "1234_5", "1234_7"])
    assert statuses["1234_0"].state is JobState.COMPLETED
    assert statuses["1234_5"].state is JobState.CANCELLED
    assert statuses["1234_7"].state is JobState.RUNNING
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["squeue", "sacct"]
    assert all(" BITSTR=0 " in c for c in calls)  # the user's 64 would cut index lists
    assert "--array" in calls[0].split()
    assert calls[1].split()[-1] == "--jobs=1234"  # 1234_7 is queued: not asked again


# --------------------------------------------------------------------------- jobs_in_dir


def test_jobs_in_dir_lists_each_task_of_an_array_by_array_then_index() -> None:
    squeue = text(
        f"1234_10{SEP}/runs/g",
        f"1234_9{SEP}/runs/g/",
        f"1300{SEP}/runs/other",
    )
    sacct = text(
        f"1234_0{SEP}/runs/g",
        f"1234_[11-12%2]{SEP}/runs/g",
        f"1234_9{SEP}/runs/g",
        f"99{SEP}/runs/g",
    )
    assert slurm.parse_jobs_in_dir([squeue, sacct], "/runs/g") == [
        "99",
        "1234_0",
        "1234_9",
        "1234_10",
        "1234_11",
        "1234_12",
    ]
    assert slurm.parse_jobs_in_dir([squeue, sacct], "/runs/other") == ["1300"]
