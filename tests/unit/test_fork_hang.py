"""CPython gh-112275 named from a taking of stacks (diagnosis/fork_hang.py, docs/stacks.md):
from the forked child stuck in ``popen_fork._launch``, or from a rank waiting long for its
DataLoader on an affected Python; never for a slow loader on a fixed or unknown Python.

The dumps below are fakes written by hand in faulthandler's and py-spy's formats (the state
they show, a child hung inside ``os.fork()``, cannot be produced on demand); the last test
takes a real rank's real DataLoader wait through the node script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_tui import jobfiles
from ddp_tui.diagnosis.fork_hang import (
    BUG,
    affected,
    fork_hang_cause,
    in_fork_launch,
    python_of,
    waits_for_loader,
)
from ddp_tui.diagnosis.stacks import ProcessStack, parse_process
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.live.stacks import StacksTaken, dump_stacks, last_saved, registration_of
from ddp_tui.remote.store.runs import RunRef

LIB = "/venv/lib/python3.11"
TORCH = f"{LIB}/site-packages/torch"

# Rank 0 waiting for its validation loader's first batch (faulthandler, all_threads; gloo's
# own threads are C++ and not shown). A fake: written by hand in faulthandler's format.
FAKE_LOADER_WAIT_DUMP = f"""\
Thread 0x00007f1c2effd640 (most recent call first):
  File "{LIB}/threading.py", line 331 in wait
  File "{LIB}/threading.py", line 629 in wait
  File "{LIB}/site-packages/tqdm/_monitor.py", line 60 in run
  File "{LIB}/threading.py", line 1045 in _bootstrap_inner
  File "{LIB}/threading.py", line 1002 in _bootstrap

Current thread 0x00007f1c4a1e3740 (most recent call first):
  File "{LIB}/threading.py", line 331 in wait
  File "{LIB}/multiprocessing/queues.py", line 113 in get
  File "{TORCH}/utils/data/dataloader.py", line 1284 in _try_get_data
  File "{TORCH}/utils/data/dataloader.py", line 1447 in _get_data
  File "{TORCH}/utils/data/dataloader.py", line 1491 in _next_data
  File "{TORCH}/utils/data/dataloader.py", line 733 in __next__
  File "/home/u/proj/train.py", line 301 in validate
  File "/home/u/proj/train.py", line 412 in main
  File "/home/u/proj/train.py", line 430 in <module>
"""

# Rank 1 in the collective that rank 0 never reaches (a fake, as above).
FAKE_ALL_REDUCE_DUMP = f"""\
Current thread 0x00007f9d11a2b740 (most recent call first):
  File "{TORCH}/distributed/distributed_c10d.py", line 2501 in all_reduce
  File "{TORCH}/distributed/c10d_logger.py", line 83 in wrapper
  File "/home/u/proj/train.py", line 140 in reduce_tensor
  File "/home/u/proj/train.py", line 312 in validate
  File "/home/u/proj/train.py", line 430 in <module>
"""

# The forked worker as py-spy sees it: one thread, its parent's stack copied, the innermost
# Python frame `_launch` at `os.fork()`, natively in PyOS_AfterFork_Child (a fake, written by
# hand in py-spy 0.4's `dump --native` format).
FAKE_CHILD_SPY_DUMP = f"""\
Process 5123: python train.py --workers 1
Python v3.11.7 (/usr/bin/python3.11)

Thread 5123 (idle): "MainThread"
    __lll_lock_wait (libc.so.6)
    PyThread_acquire_lock_timed (python3.11)
    _PyThreadState_DeleteExcept (python3.11)
    PyOS_AfterFork_Child (python3.11)
    os_fork_impl (python3.11)
    _launch ({LIB}/multiprocessing/popen_fork.py:66)
    __init__ ({LIB}/multiprocessing/popen_fork.py:19)
    _Popen ({LIB}/multiprocessing/context.py:281)
    start ({LIB}/multiprocessing/process.py:121)
    __init__ ({TORCH}/utils/data/dataloader.py:1042)
    _get_iterator ({TORCH}/utils/data/dataloader.py:424)
    __iter__ ({TORCH}/utils/data/dataloader.py:479)
    validate (/home/u/proj/train.py:298)
    <module> (/home/u/proj/train.py:430)
"""


def rank_stack(rank: int | None, pid: int, text: str, how: str = "faulthandler") -> ProcessStack:
    return parse_process({"rank": rank, "host": "n1", "pid": pid}, "ok", how, text)


def hung_job(python: str, quiet: float) -> str:
    """The cause named for the hang seen once: rank 0 in its loader, rank 1 in all_reduce."""
    stacks = [rank_stack(0, 100, FAKE_LOADER_WAIT_DUMP), rank_stack(1, 101, FAKE_ALL_REDUCE_DUMP)]
    return fork_hang_cause(stacks, python={100: python, 101: python}, quiet={0: quiet, 1: quiet})


def test_a_rank_waiting_long_for_its_loader_on_an_affected_python_names_the_bug() -> None:
    cause = hung_job("3.11.7", quiet=540.0)
    assert cause.startswith(f"likely {BUG}: rank 0 has waited 9 min")
    assert "Python 3.11.7" in cause
    assert "3.11.10+ or 3.12+" in cause and 'multiprocessing_context="forkserver"' in cause


@pytest.mark.parametrize("python", ["3.12.3", "3.11.10", "3.13.0", None, "weird"])
def test_a_slow_loader_on_a_fixed_or_unknown_python_is_no_bug(python: str | None) -> None:
    assert hung_job(python, quiet=540.0) == ""  # type: ignore[arg-type]


def test_a_short_wait_for_a_batch_and_a_rank_in_a_collective_are_no_bug() -> None:
    assert hung_job("3.11.7", quiet=30.0) == ""
    alone = rank_stack(1, 101, FAKE_ALL_REDUCE_DUMP)
    assert fork_hang_cause([alone], python={101: "3.11.7"}, quiet={1: 900.0}) == ""


def test_ranks_that_all_wait_for_their_loaders_read_a_slow_dataset() -> None:
    """No rank waits in a collective for the one in its loader: a slow dataset (or one rank
    alone), not a worker hung in fork."""
    both = [rank_stack(0, 100, FAKE_LOADER_WAIT_DUMP), rank_stack(1, 101, FAKE_LOADER_WAIT_DUMP)]
    python = {100: "3.11.7", 101: "3.11.7"}
    assert fork_hang_cause(both, python=python, quiet={0: 900.0, 1: 900.0}) == ""
    assert fork_hang_cause(both[:1], python=python, quiet={0: 900.0}) == ""


def test_the_forked_child_stuck_before_its_first_frame_names_the_bug() -> None:
    child = rank_stack(None, 5123, FAKE_CHILD_SPY_DUMP, how="py-spy")
    assert in_fork_launch(child) and not waits_for_loader(child)
    python = {5123: python_of({}, child.text)}
    assert python == {5123: "3.11.7"}
    cause = fork_hang_cause([child], python=python, quiet={})
    assert cause.startswith(f"likely {BUG}: pid 5123 is stuck inside os.fork()")
    assert "on Python 3.11.7" in cause and "forkserver" in cause
    # The stack alone is evidence where the version is unknown, but not on a fixed Python.
    assert fork_hang_cause([child], python={}, quiet={}).startswith(f"likely {BUG}")
    assert fork_hang_cause([child], python={5123: "3.12.1"}, quiet={}) == ""


def test_a_registered_rank_caught_while_it_forks_is_no_bug() -> None:
    """The rank itself in `_launch` is the parent forking at that instant."""
    parent = rank_stack(0, 5000, FAKE_CHILD_SPY_DUMP, how="py-spy")
    assert in_fork_launch(parent)
    assert fork_hang_cause([parent], python={5000: "3.11.7"}, quiet={0: 900.0}) == ""


@pytest.mark.parametrize(
    ("version", "bad"),
    [
        ("3.7.17", False),
        ("3.8.0", True),
        ("3.10.14", True),
        ("3.11.9", True),
        ("3.11.10", False),
        ("3.12.0", False),
        ("3.11", True),
        ("", None),
        (None, None),
    ],
)
def test_the_affected_versions(version: str | None, bad: bool | None) -> None:
    assert affected(version) is bad


def test_the_version_comes_from_the_registration_else_from_py_spy() -> None:
    assert python_of({"python": "3.10.12"}, FAKE_CHILD_SPY_DUMP) == "3.10.12"
    assert python_of({"python": 3}, FAKE_CHILD_SPY_DUMP) == "3.11.7"
    assert python_of({}, FAKE_LOADER_WAIT_DUMP) is None


# A real rank: registers its stack dump, then waits in a real DataLoader for a worker that
# holds its batch until the test has taken the stacks (a file it waits for, no timing).
REAL_LOADER_WAIT = """
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from ddp_tui import jobfiles

run_dir, release = sys.argv[1], sys.argv[2]

class Held(Dataset):
    def __len__(self):
        return 2
    def __getitem__(self, i):
        while not os.path.exists(release):
            time.sleep(0.02)
        return torch.zeros(1)

path = jobfiles.register_stack_dump(run_dir, rank=0, local_rank=0)
print(path, flush=True)
for _ in DataLoader(Held(), num_workers=1, batch_size=1):
    pass
"""


def test_a_real_rank_waiting_for_its_loader_is_seen_there_with_its_python(tmp_path: Path) -> None:
    release = tmp_path / "release"
    env = {**os.environ, "PYTHONPATH": str(Path(jobfiles.__file__).parents[1])}
    env.pop(jobfiles.STACK_OWNER_ENV, None)
    rank = subprocess.Popen(
        [sys.executable, "-c", REAL_LOADER_WAIT, str(tmp_path), str(release)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert rank.stdout is not None
        path = Path(rank.stdout.readline().strip())
        reg = registration_of(path.name, path.read_bytes())
        assert reg is not None
        assert reg.header["python"] == ".".join(map(str, sys.version_info[:3]))
        # Until the worker's batch arrives, the rank waits in the loader (polled, since the
        # worker's start is the rank's own business: no timing is asserted).
        deadline = time.monotonic() + 60
        while True:
            [stack], notes = dump_stacks(
                LocalExecutor(), lambda host, argv: argv, [reg], deadline=time.monotonic() + 5
            )
            if waits_for_loader(stack) or time.monotonic() > deadline:
                break
        assert notes == [] and waits_for_loader(stack), stack.text
        python = {stack.pid: python_of(reg.header, stack.text)}
        # beside a (fake) rank 1 that waits for it in all_reduce
        ranks = [stack, rank_stack(1, 101, FAKE_ALL_REDUCE_DUMP)]
        cause = fork_hang_cause(ranks, python=python, quiet={0: 600.0})
        assert (cause != "") is bool(affected(python[stack.pid])), cause
        assert fork_hang_cause(ranks, python=python, quiet={0: 5.0}) == ""
    finally:
        release.write_text("")
        try:
            rank.wait(timeout=60)
        finally:
            rank.kill()
    assert rank.returncode == 0
    doc = json.loads(path.read_text().split("\n", 1)[0])
    assert doc["pid"] == rank.pid


def test_a_saved_taking_keeps_the_cause_for_why(tmp_path: Path) -> None:
    """What `ddp-tui why` of a stalled run recalls: the newest saved taking's cause."""
    stack = rank_stack(0, 100, FAKE_LOADER_WAIT_DUMP)
    cause = hung_job("3.11.7", quiet=540.0)
    taken = StacksTaken(
        run_id="r1",
        job_id="7",
        taken_at="2026-01-02T03:14:08.096Z",
        seconds=0.5,
        processes=(stack,),
        cause=cause,
    )
    assert cause in taken.text().splitlines()
    folder = tmp_path / "stacks"
    folder.mkdir()
    (folder / "20260102T031408.096Z.json").write_text(json.dumps(taken.to_dict()))
    saved = last_saved(LocalExecutor(), RunRef("r1", str(tmp_path)))
    assert saved is not None and saved.cause == cause and saved.job_id == "7"
