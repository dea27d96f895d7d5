"""Every rank's stack (docs/stacks.md): the parsers, the grouping and the stuck-ranks table
(pure), a process's registration, and the node script's safety: it signals only a process
that holds its own dump file open, never another (the dump signal's default action kills)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_tui import jobfiles
from ddp_tui.diagnosis.stacks import (
    Frame,
    ProcessStack,
    group_stacks,
    main_thread,
    parse_faulthandler,
    parse_process,
    parse_py_spy,
)
from ddp_tui.diagnosis.stall import Heartbeat
from ddp_tui.diagnosis.stuck import (
    RankProgress,
    progress_from_heartbeats,
    progress_from_journal,
    stuck_ranks,
    stuck_summary,
)
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.live.stacks import (
    Registration,
    dump_stacks,
    latest_registrations,
    parse_node_output,
    registration_of,
)

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"

FAULTHANDLER_DUMP = f"""\
Thread 0x00007f3a2b7fe640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f3a3c8e1740 (most recent call first):
  File "{C10D}", line 2501 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/home/u/proj/train.py", line 40 in step
  File "/home/u/proj/train.py", line 60 in <module>
"""

# py-spy 0.4's `dump` text, as src/dump.rs prints it (written here by hand, with a native
# frame and --locals lines that must be skipped).
PY_SPY_DUMP = """\
Process 4242: python train.py --epochs 2
Python v3.11.7 (/usr/bin/python3.11)

Thread 4250 (idle): "Thread-1"
    wait (threading.py:324)
    _bootstrap (threading.py:1002)
Thread 4242 (active): "MainThread"
    slow_step (train.py:12)
        Arguments:
            release: "/tmp/r"
    main (train.py:30)
    0x7f00deadbeef (libc.so.6)
    <module> (train.py:40)
"""


def test_faulthandler_text_becomes_threads_innermost_first() -> None:
    threads = parse_faulthandler("{header line}\n" + FAULTHANDLER_DUMP)
    assert [t.thread_id for t in threads] == ["0x00007f3a2b7fe640", "0x00007f3a3c8e1740"]
    assert [t.current for t in threads] == [False, True]
    main = threads[1]
    assert main.frames[0] == Frame("all_reduce", C10D, 2501)
    assert [f.function for f in main.frames] == ["all_reduce", "wrapper", "step", "<module>"]


def test_faulthandler_variants_a_named_thread_unknown_lines_and_a_single_stack() -> None:
    text = (
        "Thread 0x01 [pt_main] (most recent call first):\n"
        '  File "???", line ??? in ???\n'
        "  <no Python frame>\n"
        "\nStack (most recent call first):\n"
        '  File "/a/x.py", line 3 in f\n'
        "  ...\n"
    )
    first, second = parse_faulthandler(text)
    assert first.name == "pt_main" and first.frames == (Frame("???", "???", None),)
    assert second.current and second.frames == (Frame("f", "/a/x.py", 3),)


def test_py_spy_text_becomes_threads_and_its_main_thread_is_found() -> None:
    threads = parse_py_spy(PY_SPY_DUMP)
    assert [(t.thread_id, t.name, t.status) for t in threads] == [
        ("4250", "Thread-1", "idle"),
        ("4242", "MainThread", "active"),
    ]
    main = main_thread(threads, pid=4242)
    assert main is threads[1]
    assert [f.function for f in main.frames] == ["slow_step", "main", "0x7f00deadbeef", "<module>"]
    assert main.frames[0] == Frame("slow_step", "train.py", 12)
    assert main.frames[2] == Frame("0x7f00deadbeef", "libc.so.6", None)


def test_native_frames_are_shown_but_neither_named_nor_grouped_by() -> None:
    """py-spy --native: C frames come first and their addresses differ per process."""

    def native(address: str) -> str:
        return (
            'Thread 7 (idle): "MainThread"\n'
            "    clock_nanosleep (/usr/lib/libc.so.6)\n"
            "    slow_step (/home/u/train.py:12)\n"
            f"    {address} (/usr/lib/libc.so.6)\n"
        )

    a, b = process(0, native("0x7f01"), how="py-spy"), process(1, native("0x7f02"), how="py-spy")
    assert a.summary == "rank 0: in slow_step at train.py:12"
    assert a.main is not None and a.main.frames[0].function == "clock_nanosleep"
    assert [g.ranks_label for g in group_stacks([a, b])] == ["ranks 0-1"]


def test_the_main_thread_is_the_registered_ident_not_the_signalled_one() -> None:
    threads = parse_faulthandler(FAULTHANDLER_DUMP)
    assert main_thread(threads, ident=0x00007F3A2B7FE640) is threads[0]
    assert main_thread(threads) is threads[1]  # no ident: the signalled one


def process(rank: int, text: str, host: str = "n1", how: str = "faulthandler") -> ProcessStack:
    return parse_process({"rank": rank, "host": host, "pid": 100 + rank}, "ok", how, text)


def slow_step_dump(line: int = 12) -> str:
    return (
        "Current thread 0x1 (most recent call first):\n"
        f'  File "/home/u/proj/train.py", line {line} in slow_step\n'
        '  File "/home/u/proj/train.py", line 30 in main\n'
    )


def test_summaries_name_the_innermost_frame_and_the_users_own_code() -> None:
    waiting, sleeping = process(0, FAULTHANDLER_DUMP), process(1, slow_step_dump())
    assert waiting.summary == (
        "rank 0: in all_reduce at distributed_c10d.py:2501 (your code: step at train.py:40)"
    )
    assert sleeping.summary == "rank 1: in slow_step at train.py:12"
    gone = parse_process({"rank": 2, "pid": 7}, "gone", "faulthandler", "", "the process has ended")
    assert gone.summary == "rank 2: no stack: the process has ended"
    empty = parse_process({"rank": 3, "pid": 8}, "ok", "faulthandler", "garbage\n")
    assert empty.status == "silent"


def test_ranks_at_the_same_frames_are_one_group_in_rank_order() -> None:
    ranks = [
        process(3, FAULTHANDLER_DUMP),
        process(1, slow_step_dump()),
        process(0, FAULTHANDLER_DUMP),
        process(2, FAULTHANDLER_DUMP),
        process(4, slow_step_dump(line=13)),  # another line: another group
    ]
    groups = group_stacks(ranks)
    assert [g.ranks_label for g in groups] == ["ranks 0, 2-3", "rank 1", "rank 4"]
    assert groups[0].summary.startswith("ranks 0, 2-3: in all_reduce at distributed_c10d.py")
    assert groups[1].frames[0].function == "slow_step"


def test_the_stuck_table_puts_the_rank_behind_first_with_where_and_since() -> None:
    progress = [
        RankProgress(0, "n1", 2, 40, 1000.0),
        RankProgress(1, "n2", 2, 37, 990.0),
        RankProgress(2, "n2", 2, 40, 1000.0),
    ]
    stacks = [process(0, FAULTHANDLER_DUMP), process(1, slow_step_dump(), host="n2")]
    rows = stuck_ranks(progress, stacks, now=1045.0, world_size=4, started={3: 900.0})
    assert [(r.rank, r.behind) for r in rows] == [(3, True), (1, True), (0, False), (2, False)]
    assert rows[0].position == "no progress yet" and rows[0].quiet_sec == 145.0
    assert rows[1].summary == (
        "rank 1 on n2: behind at epoch 2 step 37, in slow_step at train.py:12, quiet 55 s"
    )
    assert rows[2].where.startswith("in all_reduce")
    assert stuck_summary(rows, named=1).endswith("quiet 2 min; 1 more behind")


def test_progress_comes_from_heartbeats_or_a_scripts_journal() -> None:
    beats = [
        Heartbeat(0, "n1", 5, 100.0, 1, 3, "train"),
        Heartbeat(0, "n1", 5, 130.0, 1, 9, "train"),
        Heartbeat(1, "n2", 6, 120.0, 1, 4, "eval"),
    ]
    got = {p.rank: p for p in progress_from_heartbeats(beats)}
    assert got[0].position == (1, 9) and got[1].position_label == "epoch 1 step 4 (eval)"
    records = [
        {"kind": "process", "t": 1.0},
        {"kind": "step", "t": 2.0, "epoch": 0, "step": 1},
        {"kind": "epoch", "t": 5.0, "epoch": 0, "steps": 4},
        {"kind": "step", "t": 6.0, "epoch": 1, "step": True},  # damaged: a bool
        {"kind": "step", "t": "x", "epoch": 1, "step": 2},  # damaged: no time
    ]
    journal = progress_from_journal(records, 1, "n2")
    assert (journal.epoch, journal.step, journal.t) == (1, 0, 6.0)
    assert progress_from_journal(records[:3], 1).position == (0, 4)


def header(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "rank": 0, "host": "n1", "pid": 42, "fd": 3, "path": "/r/stacks/live/7-n1-42.txt",
        "signal": 40, "main_thread": 1, "time": 10.0,
    }  # fmt: skip
    base.update(changes)
    return base


def test_only_a_well_formed_header_is_a_registration() -> None:
    good = json.dumps(header()).encode() + b"\nCurrent thread 0x1 ...\n"
    reg = registration_of("7-n1-42.txt", good)
    assert reg is not None and reg.args() == ["42", "3", "/r/stacks/live/7-n1-42.txt", "40"]
    for bad in (
        header(pid="42"),
        header(signal=True),
        header(fd=0),
        header(path="relative.txt"),
        header(path=None),
    ):
        assert registration_of("x", json.dumps(bad).encode()) is None, bad
    assert registration_of("x", b"not json\n") is None
    assert registration_of("x", b"[1, 2]\n") is None


def test_a_requeued_job_keeps_the_newest_registration_of_each_rank() -> None:
    regs = [
        Registration("a", header(rank=0, pid=1, time=10.0)),
        Registration("b", header(rank=0, pid=2, time=20.0)),
        Registration("c", header(rank=1, pid=3, time=11.0)),
        Registration("d", header(rank=None, pid=4)),
    ]
    assert [r.name for r in latest_registrations(regs)] == ["b", "c", "d"]


def test_the_node_scripts_answer_becomes_one_stack_per_registration() -> None:
    regs = [Registration("a", header(pid=41, rank=0)), Registration("b", header(pid=42, rank=1))]
    regs.append(Registration("c", header(pid=43, rank=2)))
    out = (
        f"@@n1 41 ok faulthandler\n{FAULTHANDLER_DUMP}\n@@n1 end\n"
        f"@@n1 42 ok py-spy\n{PY_SPY_DUMP}\n@@n1 end\n"
        "@@other 43 ok faulthandler\nfrom another call\n@@other end\n"
    )
    first, second, third = parse_node_output("n1", out, regs)
    assert first.status == "ok" and first.top == Frame("all_reduce", C10D, 2501)
    assert second.how == "py-spy" and second.top == Frame("slow_step", "train.py", 12)
    assert third.status == "failed"  # the answer never named it


def test_a_process_registers_once_and_dumps_every_thread_on_the_signal(tmp_path: Path) -> None:
    """In a child interpreter: the header, the dump on the signal, and a child it starts
    that knows it is no rank."""
    code = f"""
import json, os, subprocess, sys, time
from ddp_tui import jobfiles
path = jobfiles.register_stack_dump({str(tmp_path)!r}, rank=3, local_rank=1)
assert jobfiles.register_stack_dump({str(tmp_path)!r}, rank=3) == path  # once per process
def parked():
    os.kill(os.getpid(), jobfiles.stack_signal())
    time.sleep(0.2)
parked()
child = subprocess.run([sys.executable, "-c",
    "from ddp_tui import jobfiles; print(jobfiles.is_helper_process())"],
    capture_output=True, text=True)
print(json.dumps({{"path": str(path), "helper": child.stdout.strip(),
                   "me": jobfiles.is_helper_process()}}))
"""
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(jobfiles.__file__).parents[1]),
        "SLURM_JOB_ID": "77",
    }
    env.pop(jobfiles.STACK_OWNER_ENV, None)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout.splitlines()[-1])
    assert (doc["helper"], doc["me"]) == ("True", False)
    path = Path(doc["path"])
    assert path.parent == (tmp_path / "stacks" / "live").resolve()
    assert path.name.startswith("77-") and path.name.endswith(".txt")
    first, rest = path.read_text().split("\n", 1)
    head = json.loads(first)
    assert (head["rank"], head["local_rank"], head["job"]) == (3, 1, "77")
    assert head["signal"] == jobfiles.stack_signal() and head["path"] == str(path)
    stack = parse_process(head, "ok", "faulthandler", rest)
    assert stack.top is not None and stack.top.function == "parked", rest


def test_the_node_script_signals_only_a_registered_process(tmp_path: Path) -> None:
    """A live process that does not hold the registered file (a reused pid) is left alone:
    the real-time signal would kill it. A pid that is gone is said to be gone."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / "stacks" / "live"
        live.mkdir(parents=True)
        fake = live / "7-n1-x.txt"
        fake.write_text("")
        regs = [
            Registration("a", header(rank=0, pid=bystander.pid, fd=1, path=str(fake))),
            Registration("b", header(rank=1, pid=2**22 + 12345, path=str(fake))),
        ]
        stacks, notes = dump_stacks(
            LocalExecutor(), lambda host, argv: argv, regs, deadline=time.monotonic() + 3
        )
        assert notes == []
        assert [s.status for s in stacks] == ["unregistered", "gone"]
        time.sleep(0.2)
        assert bystander.poll() is None, "a process that never registered was signalled"
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("env", [{}, {"SLURM_JOB_ID": "9"}])
def test_the_job_key_names_an_array_task_as_ddp_tui_does(env: dict[str, str]) -> None:
    array = {
        **env,
        "SLURM_JOB_ID": "1240",
        "SLURM_ARRAY_JOB_ID": "1234",
        "SLURM_ARRAY_TASK_ID": "5",
    }
    assert jobfiles.job_key(array) == "1234_5"
    assert jobfiles.job_key(env) == env.get("SLURM_JOB_ID", "nojob")
