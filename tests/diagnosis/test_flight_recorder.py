"""The flight recorder's dumps: loaded safely, and the hang they show named (pure functions).

Most dumps here are FAKE (tests/helpers/fake_flight_recorder.py): there is no NCCL on this
machine to time out. One test has torch's own writer produce a real dump (the recorder is
shared with gloo, which records natively in torch 2.15) and holds both the loader and the
fake to it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.diagnosis import LogTail, RunFacts
from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.flight_recorder import (
    FlightDumpError,
    analyse,
    dump_path,
    load_dump,
)
from ddp_tui.diagnosis.text import rank_ranges
from ddp_tui.remote.observe.diagnosing import stall_cancel_diagnosis
from tests.helpers.fake_flight_recorder import FakeRank, fake_hang, frames


def load(ranks: dict[int, FakeRank], *, json: bool = False) -> dict[int, Any]:
    return {
        r: load_dump(f.json() if json else f.pickled(), rank=r, name=dump_path("12", r))
        for r, f in ranks.items()
    }


# ----------------------------------------------------------------------------- loading


class _RunsCode:
    """What a hostile pickle holds: loading it would call os.system."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.target}",))


def test_a_fake_pickle_that_would_run_os_system_is_refused_and_runs_nothing(
    tmp_path: Path,
) -> None:
    pwned = tmp_path / "pwned"
    doc = FakeRank(0, 2).steps(2).doc()
    doc["entries"][0]["frames"] = [_RunsCode(pwned)]
    data = pickle.dumps(doc, protocol=2)
    with pytest.raises(FlightDumpError) as err:
        load_dump(data, rank=0, name="nccl_trace/12/rank_0")
    assert "nccl_trace/12/rank_0: refused: the pickle names posix.system" in str(err.value)
    assert not pwned.exists()
    assert err.value.title == "Flight recorder dump"


@pytest.mark.parametrize(
    "evil",
    [
        b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1\x85R.",  # eval("1+1")
        b"\x80\x02csubprocess\nPopen\n.",
        b"\x80\x02cbuiltins\ngetattr\n.",
    ],
)
def test_any_other_global_is_refused_too(evil: bytes) -> None:
    with pytest.raises(FlightDumpError, match="refused: the pickle names"):
        load_dump(evil, rank=0, name="rank_0")


def test_torchs_own_list_tags_load_without_torch() -> None:
    # Older writers wrapped int lists in torch.jit._pickle.build_intlist(...): an identity.
    doc = FakeRank(0, 1).steps(1).doc()
    doc["entries"][0]["input_sizes"] = ["@@SIZES@@"]
    data = pickle.dumps(doc, protocol=2)
    marker = b"X\x09\x00\x00\x00@@SIZES@@"
    assert marker in data
    data = data.replace(marker, b"ctorch.jit._pickle\nbuild_intlist\n](K\x05K\x06e\x85R")
    (entry,) = load_dump(data, rank=0, name="rank_0").entries
    assert entry.input_sizes == ((5, 6),)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (FakeRank(0, 1).steps(50).pickled()[:-400], "cut short"),
        (b"", "not a flight recorder dump"),
        (b"hello", "not a flight recorder dump"),
        (b"{not json", "bad JSON"),
        (pickle.dumps({"version": "2.10"}, protocol=2), "no list of entries"),
        (pickle.dumps([1, 2], protocol=2), "no list of entries"),
    ],
    ids=["truncated", "empty", "text", "bad-json", "no-entries", "a-list"],
)
def test_what_is_not_a_whole_dump_is_an_error_naming_the_file(data: bytes, said: str) -> None:
    with pytest.raises(FlightDumpError) as err:
        load_dump(data, rank=3, name="nccl_trace/12/rank_3")
    assert str(err.value).startswith("nccl_trace/12/rank_3: ") and said in str(err.value)


def test_a_fake_dump_loads_as_pickle_and_as_json_alike() -> None:
    rank = FakeRank(1, 2).steps(2).collective("all_gather", state="started", sizes=[[8], [8]])
    by_pickle, by_json = load({1: rank})[1], load({1: rank}, json=True)[1]
    assert [e.label() for e in by_pickle.entries] == [
        "all_reduce #1 completed, in train_step at train.py:88",
        "all_reduce #2 completed, in train_step at train.py:88",
        "all_gather #3 started, in train_step at train.py:88",
    ]
    assert by_pickle.version == "2.10" and by_pickle.groups["0"].ranks == (0, 1)
    strip = [e.__class__(**{**e.__dict__, "frames": ()}) for e in by_pickle.entries]
    assert list(by_json.entries) == strip  # the JSON variant carries no frames
    assert by_pickle.entries[-1].shape == "[8], [8] Float"


def test_damaged_entries_are_skipped_and_counted() -> None:
    doc = FakeRank(0, 1).steps(3).doc()
    doc["entries"][1] = {"record_id": "x"}
    doc["entries"].append("not an entry")
    dump = load_dump(pickle.dumps(doc, protocol=2), rank=0, name="rank_0")
    assert [e.seq for e in dump.entries] == [1, 3] and dump.skipped == 2


def test_rank_ranges() -> None:
    assert rank_ranges([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"


REAL_DUMP = """
import os, sys, torch, torch.distributed as dist
import torch._C._distributed_c10d as c10d
dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}/s", rank=0, world_size=1)
t = torch.ones(3, 4)
def train_step():
    dist.all_reduce(t)
train_step()
# gloo retires the call on its own worker thread just after the main thread's wait returns:
# dump once the recorder has retired it, rather than racing that thread.
import pickle, time
deadline = time.monotonic() + 60
while not pickle.loads(c10d._dump_fr_trace())["entries"][0]["retired"]:
    assert time.monotonic() < deadline, "gloo never retired the all_reduce"
    time.sleep(0.01)
open(sys.argv[1] + "/rank_0", "wb").write(c10d._dump_fr_trace())
open(sys.argv[1] + "/rank_0.json", "wb").write(c10d._dump_fr_trace_json())
os._exit(0)
"""


@pytest.mark.torch
def test_a_real_dump_from_torchs_writer_loads_and_the_fake_has_its_keys(tmp_path: Path) -> None:
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "100"}
    subprocess.run(
        [sys.executable, "-c", REAL_DUMP, str(tmp_path)], env=env, check=True, timeout=120
    )
    raw = (tmp_path / "rank_0").read_bytes()
    real = load_dump(raw, rank=0, name="rank_0")
    (entry,) = real.entries
    assert entry.profiling_name == "gloo:all_reduce" and entry.op == "all_reduce"
    assert entry.collective_seq == 1 and entry.input_sizes == ((3, 4),)
    assert entry.input_dtypes == ("Float",) and entry.timeout_ms is not None
    assert entry.user_frame is not None and entry.user_frame.label == "train_step at <string>:7"
    # gloo leaves a finished call "scheduled" and retires it: it is done, not a hang.
    assert (entry.state, entry.retired, entry.done) == ("scheduled", True, True)
    assert analyse({0: real}, world_size=1).hangs == ()
    json_dump = load_dump((tmp_path / "rank_0.json").read_bytes(), rank=0, name="rank_0.json")
    assert [e.op for e in json_dump.entries] == ["all_reduce"]
    # The fake writes what the real writer writes: the same keys, at the top and per entry.
    doc = pickle.loads(raw)  # this machine's own torch wrote it
    fake = FakeRank(0, 1).steps(1).doc()
    assert set(fake) - {"nccl_comm_state"} == set(doc)  # NCCL's own adds its comm state
    assert set(fake["entries"][0]) == set(doc["entries"][0])
    assert set(fake["entries"][0]["frames"][0]) == set(doc["entries"][0]["frames"][0])


FR_TRACE = "import sys; from torch.distributed.flight_recorder.fr_trace import main; main()"


@pytest.mark.torch
def test_torchs_own_analyser_reads_the_fake_dumps_as_ours_does(tmp_path: Path) -> None:
    """torchfrtrace, given the fake dumps, names the same call and missing rank: the fake is
    faithful enough for torch's reader, and so is what ddp-tui says of it."""
    for r, rank in fake_hang(4, absent=[3], steps=20).items():
        (tmp_path / f"rank_{r}").write_bytes(rank.pickled())
    proc = subprocess.run(
        [sys.executable, "-c", FR_TRACE, str(tmp_path), "--prefix", "rank_"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = proc.stdout + proc.stderr
    assert "Not all ranks joining collective, sequence number: 21" in said, said
    assert "missing ranks: {3}" in said and "collective: nccl:all_reduce" in said, said
    (hang,) = analyse(load(fake_hang(4, absent=[3], steps=20)), world_size=4).hangs
    assert (hang.entry.seq, [a.rank for a in hang.absent]) == (21, [3])


# ----------------------------------------------------------------------------- analysis


def test_a_fake_hang_names_the_call_the_rank_that_never_entered_and_where_it_was() -> None:
    report = analyse(load(fake_hang(4, absent=[3])), world_size=4)
    (hang,) = report.hangs
    assert (hang.entry.op, hang.entry.seq, hang.entered) == ("all_reduce", 412, (0, 1, 2))
    assert [a.rank for a in hang.absent] == [3] and hang.no_dump == ()
    assert hang.sentence == (
        "NCCL all_reduce #412 on group 0 (default_pg) did not complete: rank 3 never entered "
        "it (last: all_reduce #411 completed, in train_step at train.py:88)"
    )
    assert hang.short == "rank 3 missed all_reduce #412"
    assert [e.seq for e in hang.absent[0].last] == [409, 410, 411]


def test_a_fake_hang_with_two_ranks_missing_and_one_without_a_dump() -> None:
    ranks = fake_hang(8, absent=[1, 5])
    del ranks[6]  # rank 6 died: no dump
    report = analyse(load(ranks), world_size=8)
    (hang,) = report.hangs
    assert [a.rank for a in hang.absent] == [1, 5] and hang.no_dump == (6,)
    assert hang.short == "ranks 1, 5 missed all_reduce #412"
    assert "ranks 1, 5 never entered it (rank 1 last: all_reduce #411 completed" in hang.sentence
    assert hang.sentence.endswith("; rank 6 left no dump")


def test_ranks_not_looked_for_are_not_called_missing() -> None:
    ranks = fake_hang(4, absent=[])
    del ranks[3]
    report = analyse(load(ranks), world_size=4, looked_for=[0, 1, 2])
    (hang,) = report.hangs
    assert hang.no_dump == () and report.not_read == (3,)


def test_a_fake_hang_every_rank_entered_points_away_from_the_code() -> None:
    (hang,) = analyse(load(fake_hang(2, absent=[])), world_size=2).hangs
    assert not hang.absent and not hang.mismatched and hang.entered == (0, 1)
    assert "every rank entered it (2 of them)" in hang.sentence
    assert hang.short == "NCCL all_reduce #412 hung"


def test_a_fake_hang_on_mismatched_sizes_names_both_calls() -> None:
    ranks = {r: FakeRank(r, 2).steps(5) for r in (0, 1)}
    ranks[0].collective(state="started", sizes=[[3, 4]])
    ranks[1].collective(state="started", sizes=[[4]])
    (hang,) = analyse(load(ranks), world_size=2).hangs
    assert hang.mismatched and hang.mismatched[0][0] == 1
    assert (
        "rank 0 called all_reduce with [3, 4] Float; rank 1 called all_reduce with [4] Float"
        in (hang.sentence)
    )
    assert hang.short == "mismatched all_reduce #6"


def test_no_hang_when_everything_completed() -> None:
    ranks = {r: FakeRank(r, 2).steps(5) for r in (0, 1)}
    assert analyse(load(ranks), world_size=2).hangs == ()


def test_a_fake_hang_in_a_subgroup_names_that_group_and_its_members_only() -> None:
    tp = ("tp", (2, 3))
    ranks = {r: FakeRank(r, 4).steps(10) for r in range(4)}
    for r in (2, 3):
        ranks[r].group("1", *tp).collective("all_gather", group="1")
    ranks[2].collective("all_gather", group="1", state="started")
    ranks[3].collective("all_reduce")  # it went on in the default group instead
    (hang,) = analyse(load(ranks), world_size=4).hangs
    assert hang.what == "NCCL all_gather #2 on group 1 (tp)"
    assert hang.group.ranks == (2, 3) and [a.rank for a in hang.absent] == [3]
    assert "(last: all_reduce #11 on group 0 (default_pg) completed" in hang.sentence


def test_a_fake_p2p_hang_names_the_peer_that_never_posted_its_recv() -> None:
    ranks = {r: FakeRank(r, 2).steps(3) for r in (0, 1)}
    ranks[0].send(1, state="started", frames=frames([("pipeline_step", 40)]))
    (hang,) = analyse(load(ranks), world_size=2).hangs
    assert hang.what == "NCCL send 0->1 (p2p #1) on group 0 (default_pg)"
    assert [a.rank for a in hang.absent] == [1]
    ranks[1].recv(0, state="started")
    (hang,) = analyse(load(ranks), world_size=2).hangs
    assert not hang.absent and hang.entered == (0, 1)


# ----------------------------------------------------------------------------- the rule

WATCHDOG = (
    "[rank0]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=12, "
    "NumelOut=12, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
)
CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.29 GiB.\n"


def failed(err: str, report: Any) -> RunFacts:
    return RunFacts(
        state="FAILED",
        exit_code=1,
        err=LogTail.of("slurm-12.err", err.encode(), whole=True),
        world_size=4,
        flight=report,
    )


def test_the_fake_dumps_beat_the_watchdog_line_and_show_beside_it() -> None:
    report = analyse(load(fake_hang(4, absent=[3])), world_size=4)
    found = classify_strict(failed(WATCHDOG, report))
    assert found is not None and found.code == "nccl-hang" and found.needs_fix
    assert found.short == "rank 3 missed all_reduce #412"
    assert found.cause.startswith("NCCL all_reduce #412 on group 0 (default_pg) did not complete")
    labels = [e.label for e in found.evidence]
    assert labels == ["nccl_trace/12/rank_0", "nccl_trace/12/rank_3", "slurm-12.err:1"]
    assert found.evidence[1].text.startswith(
        "rank 3 last: all_reduce #411 completed, in train_step at train.py:88; all_reduce #410"
    )
    # Without dumps, the watchdog's line is all there is.
    assert classify_strict(failed(WATCHDOG, None)).code == "nccl-timeout"  # type: ignore[union-attr]


def test_an_out_of_memory_rank_stays_the_cause_of_the_fake_hang_it_left_behind() -> None:
    ranks = fake_hang(4, absent=[])
    del ranks[2]
    report = analyse(load(ranks), world_size=4)
    assert classify_strict(failed(CUDA_OOM + WATCHDOG, report)).code == "cuda-oom"  # type: ignore[union-attr]


def test_unreadable_dumps_are_named_in_the_cause() -> None:
    ranks = fake_hang(4, absent=[3])
    report = analyse(load(ranks), world_size=4, unreadable={1: "nccl_trace/12/rank_1: cut short"})
    found = classify_strict(failed("", report))
    assert (
        found is not None
        and "Unreadable dumps: rank 1: nccl_trace/12/rank_1: cut short" in found.cause
    )


def test_a_stalled_nccl_run_cancelled_without_dumps_says_when_the_recorder_dumps() -> None:
    note = {"job_id": "12", "quiet_sec": 900, "summary": "no output for 15 min"}
    said = stall_cancel_diagnosis(note, nccl=True)
    assert "dumps (nccl_trace/) only when a collective times out" in said.advice
    assert "flight recorder" not in stall_cancel_diagnosis(note).advice
    report = analyse(load(fake_hang(2, absent=[1])), world_size=2)
    with_dumps = stall_cancel_diagnosis(note, nccl=True, flight=report)
    assert "rank 1 never entered it" in with_dumps.cause
