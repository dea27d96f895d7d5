"""The Slurm argv builders and parsers, on real output captured from the test cluster.

See ``data/README.md`` for what each captured file holds. Rows for states the test
cluster cannot produce (OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL...) are synthesized in the
captured format and named as such.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ddp_tui.remote.backends import slurm
from ddp_tui.remote.backends.executor import (
    CommandResult,
    CommandTimeout,
    Executor,
    ExecutorError,
    FileStat,
    LocalExecutor,
)
from ddp_tui.remote.backends.scheduler import SchedulerError, SchedulerUnavailable
from ddp_tui.remote.backends.slurm import SEP, SlurmScheduler
from ddp_tui.remote.backends.states import _SLURM_STATES, JobState, from_slurm

DATA = Path(__file__).parent / "data"
JOBS: dict[str, str] = json.loads((DATA / "jobs.json").read_text())
HOSTILE_NAME = "evil|na\x1fme\nline2 $(touch /tmp/pwned) `id` ümlaut %j"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def result(argv: Sequence[str], rc: int, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(tuple(argv), rc, stdout, stderr)


# --------------------------------------------------------------------------- argv


@pytest.mark.parametrize(
    ("argv", "tool"),
    [
        (slurm.squeue_argv(), "squeue"),
        (slurm.sacct_argv(["1", "2"]), "sacct"),
        (slurm.sinfo_argv(), "sinfo"),
        (slurm.scancel_argv("7"), "scancel"),
        (slurm.requeue_argv("7"), "scontrol"),
        (slurm.show_job_argv("7"), "scontrol"),
        (slurm.sbatch_argv("/r/job.sbatch", "/r"), "sbatch"),
        (slurm.accounting_argv("7"), "sacct"),
    ],
)
def test_every_command_pins_its_environment(argv: list[str], tool: str) -> None:
    assert argv[0] == "env"
    i = argv.index(tool)
    assert argv[i - 1] == "SLURM_TIME_FORMAT=standard"
    unset = {argv[k + 1] for k in range(i) if argv[k] == "-u"}
    assert {"SLURM_TIME_FORMAT", "SLURM_CLUSTERS"} <= unset
    if tool == "squeue":
        assert {"SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_SORT", "SQUEUE_STATES"} <= unset
    if tool == "scancel":
        # These would widen what scancel kills, or make it ask on a terminal.
        assert {"SCANCEL_USER", "SCANCEL_NAME", "SCANCEL_INTERACTIVE"} <= unset


def test_env_prefix_really_clears_a_hostile_environment() -> None:
    """Run the prefix for real with ``env`` as the tool: it prints what squeue would see."""
    prefix = slurm.squeue_argv()
    argv = [*prefix[: prefix.index("squeue")], "env"]
    hostile = dict(os.environ, SQUEUE_FORMAT="%i", SQUEUE_FORMAT2="jobid:3", SQUEUE_SORT="-i")
    hostile.update(SLURM_TIME_FORMAT="%s", SQUEUE_STATES="CD", SLURM_CONF="/keep/me.conf")
    out = subprocess.run(argv, env=hostile, capture_output=True, text=True, check=True).stdout
    seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for name in ("SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_SORT", "SQUEUE_STATES"):
        assert name not in seen
    assert seen["SLURM_TIME_FORMAT"] == "standard"
    assert seen["SLURM_CONF"] == "/keep/me.conf"  # where the cluster is stays the user's


def test_squeue_asks_for_own_unfinished_jobs_with_name_last() -> None:
    argv = slurm.squeue_argv()
    assert "--me" in argv and "--noheader" in argv
    fmt = next(a for a in argv if a.startswith("--format="))
    assert fmt.split(SEP)[-1] == "%j"
    states = next(a for a in argv if a.startswith("--states=")).split("=", 1)[1].split(",")
    for state in states:
        assert not from_slurm(state).is_terminal, state
    assert "RUNNING" in states and "PENDING" in states and "COMPLETED" not in states


def test_sacct_is_one_batched_call_and_steps_only_on_request() -> None:
    argv = slurm.sacct_argv(["11", "12", "13"])
    assert "--jobs=11,12,13" in argv
    assert "--allocations" in argv and "--parsable2" in argv and f"--delimiter={SEP}" in argv
    assert "--allocations" not in slurm.sacct_argv(["11"], steps=True)


@pytest.mark.parametrize("bad", ["", "-1", "1,2", "--all", "1 2", "abc", "1;rm"])
def test_job_ids_are_checked_before_they_reach_argv(bad: str) -> None:
    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        slurm.scancel_argv(bad)


def test_sbatch_submits_with_the_run_dir_as_working_directory() -> None:
    argv = slurm.sbatch_argv("/runs/a b/job.sbatch", "/runs/a b")
    assert argv[-3:] == ["--chdir=/runs/a b", "--", "/runs/a b/job.sbatch"]
    assert "--parsable" in argv


# --------------------------------------------------------------------------- squeue


def test_parse_squeue_real_queue() -> None:
    jobs = slurm.parse_squeue(data("squeue.txt"))
    requeued = jobs[JOBS["requeued"]]
    assert requeued.state is JobState.PENDING and requeued.reason == "BeginTime"
    assert requeued.start == "2026-11-21T09:50:48" and requeued.partition == "debug"
    assert jobs[JOBS["pending_partnodes"]].reason == "PartitionNodeLimit"
    assert jobs[JOBS["pending_partnodes"]].nodes == 2
    assert jobs[JOBS["pending_partnodes"]].start == ""  # N/A
    assert jobs[JOBS["running_3node"]].reason == "Resources"
    assert jobs[JOBS["pending_resources"]].reason == "Priority"
    assert jobs[JOBS["timeout"]].state is JobState.RUNNING
    assert jobs[JOBS["timeout"]].node_list == "n1"
    assert jobs[JOBS["timeout"]].elapsed_sec == 4
    assert jobs[JOBS["timeout"]].exit_code is None
    # The array's pending tasks, printed as one "22_[1-2]" line, answer one by one.
    assert {f"{JOBS['array']}_1", f"{JOBS['array']}_2"} <= set(jobs)


def test_parse_squeue_keeps_a_hostile_name_whole() -> None:
    jobs = slurm.parse_squeue(data("squeue.txt"))
    evil = jobs[JOBS["running_hostile"]]
    assert evil.name == HOSTILE_NAME
    assert evil.state is JobState.RUNNING and evil.node_list == "n2"
    assert len(jobs) == 9  # 8 lines, one of 2 array tasks; the name's newline made no job


def test_hostile_environment_changes_nothing() -> None:
    assert slurm.parse_squeue(data("squeue_hostile_env.txt")) == slurm.parse_squeue(
        data("squeue.txt")
    )


def test_parse_squeue_suspended_and_empty() -> None:
    jobs = slurm.parse_squeue(data("squeue_suspended.txt"))
    assert jobs["23"].state is JobState.SUSPENDED and jobs["23"].raw_state == "SUSPENDED"
    assert slurm.parse_squeue("") == {}
    assert slurm.parse_squeue("\n") == {}


# --------------------------------------------------------------------------- sacct


def test_parse_sacct_real_final_states_and_exit_codes() -> None:
    jobs = slurm.parse_sacct(data("sacct.txt"))
    ok = jobs[JOBS["completed_2node"]]
    assert ok.state is JobState.COMPLETED and ok.exit_code == 0
    assert ok.nodes == 2 and ok.node_list == "n[1-2]" and ok.name == "ok 2 nodes"
    assert ok.start == "2026-11-21T09:50:36" and ok.end == "2026-11-21T09:50:37"
    fail = jobs[JOBS["failed_exit3"]]
    assert fail.state is JobState.FAILED and fail.exit_code == 3
    killed = jobs[JOBS["killed_sig9"]]
    assert killed.state is JobState.FAILED and killed.exit_code == 128 + 9
    timeout = jobs[JOBS["timeout"]]
    assert timeout.state is JobState.TIMEOUT and timeout.elapsed_sec == 80
    cancelled = jobs[JOBS["cancelled"]]
    assert cancelled.state is JobState.CANCELLED and cancelled.raw_state == "CANCELLED by 0"
    pending = jobs[JOBS["pending_parttime"]]
    assert pending.state is JobState.PENDING and pending.reason == "PartitionTimeLimit"
    assert pending.node_list == "" and pending.start == ""  # "None assigned", "Unknown"
    assert jobs[JOBS["running_hostile"]].name == HOSTILE_NAME
    assert all(s.state.is_terminal for s in (ok, fail, killed, timeout, cancelled))


def test_parse_sacct_node_fail_deadline_suspended() -> None:
    jobs = slurm.parse_sacct(data("sacct_more.txt"))
    assert jobs["24"].state is JobState.NODE_FAIL and jobs["24"].state.is_terminal
    assert jobs["25"].state is JobState.DEADLINE and jobs["25"].exit_code == 1
    assert jobs["23"].state is JobState.SUSPENDED and not jobs["23"].state.is_terminal


def test_parse_sacct_steps() -> None:
    rows = slurm.parse_sacct(data("sacct_steps.txt"))
    job = JOBS["completed_2node"]
    assert [k for k in rows if k.startswith(job)] == [job, f"{job}.batch", f"{job}.0"]
    assert rows[f"{job}.0"].name == "hostname" and rows[f"{job}.0"].node_list == "n[1-2]"
    # The batch step of a cancelled job died of SIGTERM.
    assert rows[f"{JOBS['cancelled']}.batch"].exit_code == 128 + 15


@pytest.mark.parametrize("raw", sorted(_SLURM_STATES))
def test_every_slurm_state_parses_from_a_sacct_row(raw: str) -> None:
    """Synthesized rows in the captured format, one per state name the tools print."""
    row = SEP.join(["42", raw, "0:0", "5", "1", "n1", "", "", "debug", "None", "x"])
    status = slurm.parse_sacct(row + "\n")["42"]
    assert status.state is not JobState.UNKNOWN
    assert status.state is _SLURM_STATES[raw]


@pytest.mark.parametrize(
    ("raw", "state", "terminal"),
    [
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY, True),
        ("BOOT_FAIL", JobState.BOOT_FAIL, True),
        ("CANCELLED by 1000", JobState.CANCELLED, True),
        ("COMPLETING", JobState.COMPLETING, False),
        ("REQUEUED", JobState.REQUEUED, False),
        ("RUNNING+", JobState.RUNNING, False),
        ("SOMETHING_NEW", JobState.UNKNOWN, False),
    ],
)
def test_states_the_cluster_cannot_produce(raw: str, state: JobState, terminal: bool) -> None:
    row = SEP.join(["7", raw, "0:0", "0", "1", "n1", "", "", "debug", "None", "x"])
    status = slurm.parse_sacct(row)["7"]
    assert status.state is state and status.state.is_terminal is terminal
    assert status.raw_state == raw


@pytest.mark.parametrize(
    ("text", "code"),
    [("0:0", 0), ("3:0", 3), ("0:9", 137), ("0:15", 143), ("1:0", 1), ("", None), ("x:y", None)],
)
def test_parse_exit_code(text: str, code: int | None) -> None:
    assert slurm.parse_exit_code(text) == code


@pytest.mark.parametrize(
    ("text", "secs"),
    [
        ("0:04", 4),
        ("1:12", 72),
        ("1:00:00", 3600),
        ("10:00", 600),
        ("1-00:00:00", 86400),
        ("2-03", 2 * 86400 + 3 * 3600),
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        ("30", 1800),
        ("UNLIMITED", None),
        ("infinite", None),
        ("INVALID", 0),
        ("N/A", 0),
    ],
)
def test_parse_duration(text: str, secs: int | None) -> None:
    assert slurm.parse_duration(text) == secs


# --------------------------------------------------------------------------- merge and poll


def test_merge_prefers_the_queue_and_leaves_out_unknown_ids() -> None:
    queued = slurm.parse_squeue(data("squeue.txt"))
    accounted = slurm.parse_sacct(data("sacct.txt"))
    ids = [JOBS["requeued"], JOBS["completed_2node"], "999999"]
    merged = slurm.merge_poll(ids, queued, accounted)
    # sacct already has the requeued job's new RUNNING record; the queue says PENDING now.
    assert accounted[JOBS["requeued"]].state is JobState.RUNNING
    assert merged[JOBS["requeued"]].state is JobState.PENDING
    assert merged[JOBS["completed_2node"]].state is JobState.COMPLETED
    assert "999999" not in merged


def test_parse_poll_of_batched_answers() -> None:
    sched = SlurmScheduler(LocalExecutor())
    ids = [JOBS["requeued"], JOBS["failed_exit3"]]
    cmds = sched.poll_commands(ids)
    assert len(cmds) == 2 and cmds[0] == slurm.squeue_argv()
    answers = [result(cmds[0], 0, data("squeue.txt")), result(cmds[1], 0, data("sacct.txt"))]
    statuses = sched.parse_poll(ids, answers)
    assert statuses[JOBS["requeued"]].state is JobState.PENDING
    assert statuses[JOBS["failed_exit3"]].exit_code == 3
    # Nothing to poll: squeue alone, so the connection state stays true.
    assert sched.poll_commands([]) == [slurm.squeue_argv()]
    ok = result(cmds[0], 0, "")
    assert sched.parse_poll([], [ok]) == {}
    down = result(cmds[0], 1, "", "Unable to contact slurm controller (connect failure)")
    with pytest.raises(SchedulerUnavailable):
        sched.parse_poll([], [down])
    # Ids of another scheduler (a run first made locally) are unknown, not an error.
    assert sched.poll_commands(["local-3"]) == [slurm.squeue_argv()]
    assert sched.parse_poll(["local-3"], [ok]) == {}
    assert sched.poll_commands(["5", "5", "x"])[1][-1] == "--jobs=5"


def test_parse_poll_controller_down_is_a_typed_error() -> None:
    sched = SlurmScheduler(LocalExecutor())
    cmds = sched.poll_commands(["5"])
    down = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    with pytest.raises(SchedulerUnavailable) as err:
        sched.parse_poll(["5"], [result(cmds[0], 1, "", down), result(cmds[1], 0, "")])
    assert err.value.message == down.strip()
    assert err.value.returncode == 1


def test_parse_poll_sacct_down_keeps_what_squeue_said() -> None:
    sched = SlurmScheduler(LocalExecutor())
    ids = [JOBS["requeued"], JOBS["failed_exit3"]]
    cmds = sched.poll_commands(ids)
    dbd = (
        "sacct: error: Sending PersistInit msg: Connection refused\n"
        "sacct: error: Problem talking to the database: Connection refused\n"
    )
    answers = [result(cmds[0], 0, data("squeue.txt")), result(cmds[1], 1, "", dbd)]
    with pytest.raises(slurm.AccountingUnavailable) as err:
        sched.parse_poll(ids, answers)
    assert "Problem talking to the database" in err.value.message
    assert list(err.value.partial) == [JOBS["requeued"]]
    assert isinstance(err.value, SchedulerError)
    res = slurm.poll_from_results(ids, answers[0], answers[1])
    assert isinstance(res.warning, SchedulerUnavailable)


@pytest.mark.parametrize(
    ("stderr", "rc", "unavailable"),
    [
        ("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", 1, True),
        ("sbatch: error: Batch job submission failed: Unable to contact slurm controller", 1, True),
        ("squeue: error: slurm_receive_msg: Socket timed out on send/recv operation", 1, True),
        ("sinfo: fatal: Could not establish a configuration source", 1, True),
        ("sacct: error: Problem talking to the database: Connection refused", 1, True),
        ("slurm_load_jobs error: Invalid job id specified", 1, False),
        ("Invalid job id specified for job 99999", 1, False),
        (
            "sbatch: error: Batch job submission failed: Requested node configuration is not"
            " available",
            1,
            False,
        ),
        ("sbatch: error: invalid partition specified: nope", 1, False),
        ("env: 'squeue': No such file or directory", 127, True),
    ],
)
def test_errors_are_typed_with_the_tools_words(stderr: str, rc: int, unavailable: bool) -> None:
    err = slurm.error_of(result(["squeue"], rc, "", stderr + "\n"), "squeue")
    assert isinstance(err, SchedulerUnavailable) is unavailable
    if rc == 127:
        assert err.message.startswith("squeue: command not found")
    else:
        assert err.message == stderr


# --------------------------------------------------------------------------- sinfo, sbatch, show


def test_parse_sinfo_real_partitions() -> None:
    nodes = slurm.parse_sinfo(data("sinfo.txt"))
    assert {(n.name, n.partition) for n in nodes} == {
        ("n1", "debug"),
        ("n1", "small"),
        ("n2", "debug"),
        ("n3", "debug"),
    }
    assert all(n.gpus == 2 and n.cpus == 4 and n.memory_mb == 4000 for n in nodes)
    parts = {p.name: p for p in slurm.partitions_from_nodes(nodes)}
    debug, small = parts["debug"], parts["small"]
    assert debug.is_default and not small.is_default
    assert (debug.nodes, debug.gpus_per_node, debug.cpus_per_node) == (3, 2, 4)
    assert (debug.max_time_min, debug.max_nodes) == (60, None)
    assert (small.nodes, small.max_time_min, small.max_nodes) == (1, 10, 1)
    assert debug.states == ("mixed", "planned")


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("gpu:2", 2),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:a100:4(S:0,1),gpu:v100:2", 6),
        ("gpu:tesla:2,shard:8", 2),
        ("mps:100,gpu:1", 1),
        ("(null)", 0),
        ("", 0),
    ],
)
def test_parse_gpus(gres: str, gpus: int) -> None:
    assert slurm.parse_gpus(gres) == gpus


def test_unlimited_partition_limits() -> None:
    row = SEP.join(["a1", "gpu*", "up", "idle", "64", "512000", "gpu:h100:8(S:0-1)"])
    row += SEP + SEP.join(["UNLIMITED", "1-infinite", "(null)"])
    (node,) = slurm.parse_sinfo(row + "\n")
    assert (node.gpus, node.max_time_min, node.max_nodes, node.is_default) == (8, None, None, True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42\n", ("42", None)),
        ("42;cluster-a\n", ("42", "cluster-a")),
        ("sbatch: warning: something\n42\n", ("42", None)),
    ],
)
def test_parse_sbatch(text: str, expected: tuple[str, str | None]) -> None:
    assert slurm.parse_sbatch(text) == expected


@pytest.mark.parametrize("text", ["", "Submitted batch job 42\n", "abc"])
def test_parse_sbatch_refuses_what_is_not_an_id(text: str) -> None:
    with pytest.raises(SchedulerError, match="no job id"):
        slurm.parse_sbatch(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("2026-11-24T12:30:00|Resources\n", "2026-11-24T12:30:00 (Resources)"),
        ("2026-11-24T12:30:00|None\n", "2026-11-24T12:30:00"),
        ("N/A|Priority\n", ""),  # the backfill pass has not reached the job yet
        ("", ""),  # the job is no longer pending
    ],
)
def test_parse_start_of_squeue_start(text: str, words: str) -> None:
    assert slurm.parse_start(text) == words


def test_parse_show_job() -> None:
    (job,) = slurm.parse_show_job(data("show_job_requeued.txt"))
    assert job["JobId"] == JOBS["requeued"] and job["JobName"] == "requeue me"
    assert job["JobState"] == "RUNNING" and job["Restarts"] == "1" and job["NodeList"] == "n1"
    assert job["AllocNode:Sid"] == "localhost:3522" and job["CPUs/Task"] == "1"
    assert job["TRES"] == "cpu=1,node=1,billing=1" and job["Power"] == ""
    (evil,) = slurm.parse_show_job(data("show_job_hostile.txt"))
    assert evil["JobName"] == HOSTILE_NAME
    assert evil["TresPerNode"] == "gres:gpu:1" and evil["UserId"] == "root(0)"


def test_parse_show_job_value_with_spaces() -> None:
    (job,) = slurm.parse_show_job("JobId=5 JobName=a b Command=python t.py lr=3 WorkDir=/x y\n")
    assert job == {"JobId": "5", "JobName": "a b", "Command": "python t.py lr=3", "WorkDir": "/x y"}


def test_parse_version() -> None:
    assert slurm.parse_version(data("version.txt")) == "Slurm 22.05.8"
    assert slurm.parse_version("slurm 24.11.1\n") == "Slurm 24.11.1"


def test_accounting_summary_is_readable() -> None:
    text = data("accounting.txt")
    assert text.splitlines()[0].split()[:4] == ["JobID", "JobName", "Partition", "State"]
    assert "REQUEUED" in text and f"{JOBS['requeued']}.batch" in text


# --------------------------------------------------------------------------- executor failures


class FakeFailingExecutor(Executor):
    """A fake: raises what a dead connection or a hung command makes the executor raise."""

    def __init__(self, exc: ExecutorError) -> None:
        self.exc = exc

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        raise self.exc

    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        raise self.exc

    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise self.exc

    def makedirs(self, path: str) -> None:
        raise self.exc

    def listdir(self, path: str) -> list[str]:
        raise self.exc

    def stat(self, path: str) -> FileStat | None:
        raise self.exc

    def rename(self, src: str, dst: str) -> None:
        raise self.exc

    def remove_tree(self, path: str) -> None:
        raise self.exc

    def upload_tree(self, local_src: Path, dst: str) -> None:
        raise self.exc

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (CommandTimeout("squeue did not finish within 30 s"), "did not answer within 30 s"),
        (ExecutorError("connection lost"), "connection lost"),
    ],
)
def test_executor_failures_become_scheduler_unavailable(exc: ExecutorError, words: str) -> None:
    sched = SlurmScheduler(FakeFailingExecutor(exc))
    with pytest.raises(SchedulerUnavailable, match=words):
        sched.poll(["1"])
    with pytest.raises(SchedulerUnavailable):
        sched.submit("/x/job.sbatch", "/x")


def test_missing_slurm_binaries_are_reported_not_crashed(tmp_path: Path) -> None:
    """A real PATH with ``env`` and no Slurm tools, as on a machine without Slurm."""
    env_bin = shutil.which("env")
    assert env_bin is not None
    (tmp_path / "env").symlink_to(env_bin)
    sched = SlurmScheduler(LocalExecutor(), env={"PATH": str(tmp_path)})
    for call in (sched.version, sched.partitions, lambda: sched.poll(["1"])):
        with pytest.raises(SchedulerUnavailable, match="command not found"):
            call()


def test_idle_nodes_count_only_nodes_a_new_job_could_start_on_now() -> None:
    # The captured cluster had every node busy (mixed) or planned for a pending job.
    parts = {p.name: p for p in slurm.partitions_from_nodes(slurm.parse_sinfo(data("sinfo.txt")))}
    assert (parts["debug"].idle_nodes, parts["small"].idle_nodes) == (0, 0)
    rows = [
        ("a1", "gpu*", "up", "idle"),
        ("a2", "gpu*", "up", "idle"),
        ("a3", "gpu*", "up", "idle*"),  # not responding
        ("a4", "gpu*", "up", "idle~"),  # powered off
        ("a5", "gpu*", "up", "mixed"),
        ("a6", "gpu*", "up", "drained"),
        ("a1", "off", "down", "idle"),  # a partition that is down starts nothing
    ]
    text = "".join(
        SEP.join([*row, "64", "512000", "gpu:4", "UNLIMITED", "1-infinite", ""]) + "\n"
        for row in rows
    )
    parts = {p.name: p for p in slurm.partitions_from_nodes(slurm.parse_sinfo(text))}
    assert (parts["gpu"].nodes, parts["gpu"].idle_nodes, parts["gpu"].gpus_per_node) == (6, 2, 4)
    assert (parts["off"].nodes, parts["off"].idle_nodes) == (1, 0)
