"""The stall rule: when a running job counts as stalled, and which ranks went silent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddp_tui.diagnosis.stall import (
    STALL_AFTER_SEC,
    Heartbeat,
    SilentRank,
    Stall,
    duration_label,
    stall_of,
)

NOW = 1_800_000_000.0
MIN = 60.0


def beat(rank: int, ago: float, epoch: int = 2, step: int = 40, phase: str = "train") -> Heartbeat:
    return Heartbeat(rank, f"n{rank + 1}", 1000 + rank, NOW - ago, epoch, step, phase)


# ------------------------------------------------------------------ Heartbeat.from_dict


def test_a_heartbeat_file_is_read_back() -> None:
    doc = {
        "rank": 1,
        "host": "n2",
        "pid": 4242,
        "t": 1700000000.5,
        "epoch": 2,
        "step": 40,
        "phase": "eval",
    }
    assert Heartbeat.from_dict(doc) == Heartbeat(1, "n2", 4242, 1700000000.5, 2, 40, "eval")


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"t": 1.0},
        {"rank": 0},
        {"rank": -1, "t": 1.0},
        {"rank": True, "t": 1.0},
        {"rank": "0", "t": 1.0},
        {"rank": 0, "t": "yesterday"},
        {"rank": 0, "t": float("nan")},
        {"rank": 0, "t": False},
    ],
)
def test_a_heartbeat_without_a_usable_rank_or_time_is_none(doc: dict[str, Any]) -> None:
    assert Heartbeat.from_dict(doc) is None


def test_a_heartbeat_with_odd_extra_fields_keeps_rank_and_time() -> None:
    got = Heartbeat.from_dict({"rank": 3, "t": 5, "host": 7, "epoch": "x", "phase": None})
    assert got == Heartbeat(3, "", 0, 5.0, 0, 0, "")


@given(
    st.dictionaries(
        st.text(max_size=8), st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    )
)
def test_from_dict_never_raises(doc: dict[str, Any]) -> None:
    got = Heartbeat.from_dict(doc)
    assert got is None or (got.rank >= 0 and isinstance(got.t, float))


# ------------------------------------------------------------------ stall_of


def test_recent_activity_is_not_a_stall() -> None:
    assert stall_of(now=NOW, activity=[NOW - 30], after_sec=STALL_AFTER_SEC) is None
    # The newest activity counts, whatever else is old.
    assert stall_of(now=NOW, activity=[NOW - 3600, None, NOW - 5], after_sec=600) is None


def test_quiet_for_longer_than_the_limit_is_a_stall() -> None:
    stall = stall_of(now=NOW, activity=[NOW - 3600, None, NOW - 12 * MIN - 5], after_sec=600)
    assert stall == Stall(quiet_sec=12 * MIN + 5, last_activity=NOW - 12 * MIN - 5)
    assert stall.summary == "no output, progress or heartbeat for 12 min"
    assert stall.quiet_label == "12 min"


def test_exactly_at_the_limit_is_not_yet_a_stall() -> None:
    assert stall_of(now=NOW, activity=[NOW - 600], after_sec=600) is None


@pytest.mark.parametrize("after", [0.0, -1.0, float("nan")])
def test_a_limit_of_zero_or_less_turns_the_rule_off(after: float) -> None:
    assert stall_of(now=NOW, activity=[NOW - 10**6], after_sec=after) is None


def test_with_nothing_to_judge_by_there_is_no_stall() -> None:
    assert stall_of(now=NOW, activity=[], after_sec=600) is None
    assert stall_of(now=NOW, activity=[None, None], after_sec=600) is None


def test_a_recent_heartbeat_is_activity_too() -> None:
    assert stall_of(now=NOW, activity=[NOW - 3600], after_sec=600, heartbeats=[beat(0, 20)]) is None


def test_the_silent_rank_is_named_with_host_epoch_and_step() -> None:
    stall = stall_of(
        now=NOW,
        activity=[NOW - 12 * MIN],
        after_sec=600,
        heartbeats=[beat(0, 13 * MIN, epoch=2, step=41, phase="done"), beat(1, 12 * MIN)],
        world_size=2,
    )
    assert stall is not None
    assert stall.silent_ranks == (SilentRank(1, "n2", 12 * MIN, 2, 40, "train"),)
    assert stall.summary == (
        "no output, progress or heartbeat for 12 min; rank 1 on n2 silent since epoch 2 step 40"
    )


def test_a_rank_that_never_wrote_is_never_heard_from_and_comes_first() -> None:
    stall = stall_of(
        now=NOW,
        activity=[NOW - 30 * MIN],
        after_sec=600,
        heartbeats=[beat(0, 20 * MIN), beat(2, 20 * MIN)],
        world_size=3,
    )
    assert stall is not None
    assert [r.rank for r in stall.silent_ranks] == [1, 0, 2]
    assert stall.silent_ranks[0] == SilentRank(1, "", None, None, None)
    assert stall.summary == (
        "no output, progress or heartbeat for 20 min; rank 1 never heard from; "
        "rank 0 on n1 silent since epoch 2 step 40; 1 more rank silent"
    )


def test_silent_ranks_are_sorted_furthest_behind_first() -> None:
    stall = stall_of(
        now=NOW,
        activity=[],
        after_sec=600,
        heartbeats=[
            beat(0, 15 * MIN, epoch=3, step=1),
            beat(1, 15 * MIN, epoch=2, step=90),
            beat(2, 16 * MIN, epoch=2, step=40),
            beat(3, 19 * MIN, epoch=2, step=40),
        ],
        world_size=4,
    )
    assert stall is not None
    # Lowest epoch, then lowest step, then the oldest beat.
    assert [r.rank for r in stall.silent_ranks] == [3, 2, 1, 0]
    assert stall.summary.endswith("; 2 more ranks silent")


def test_a_rank_that_is_done_is_quiet_but_not_silent() -> None:
    stall = stall_of(
        now=NOW,
        activity=[NOW - 20 * MIN],
        after_sec=600,
        heartbeats=[beat(0, 30 * MIN, phase="done"), beat(1, 30 * MIN, phase="done")],
        world_size=2,
    )
    assert stall is not None and stall.silent_ranks == ()


def test_the_phase_of_a_silent_rank_is_said_unless_it_is_training() -> None:
    hb = [beat(0, 11 * MIN, phase="eval"), beat(1, 11 * MIN, step=7, phase="checkpoint")]
    stall = stall_of(now=NOW, activity=[], after_sec=600, heartbeats=hb, world_size=2)
    assert stall is not None
    assert [r.description for r in stall.silent_ranks] == [
        "rank 1 on n2 silent since epoch 2 step 7 (checkpoint)",
        "rank 0 on n1 silent since epoch 2 step 40 (eval)",
    ]
    setup = stall_of(
        now=NOW, activity=[], after_sec=600, heartbeats=[beat(0, 11 * MIN, 0, 0, "setup")]
    )
    assert setup is not None
    assert setup.silent_ranks[0].description == "rank 0 on n1 silent since setup"


def test_stale_files_of_a_larger_earlier_attempt_are_ignored() -> None:
    hb = [beat(0, 11 * MIN), beat(5, 3 * 3600)]
    stall = stall_of(now=NOW, activity=[], after_sec=600, heartbeats=hb, world_size=2)
    assert stall is not None
    assert [(r.rank, r.quiet_sec) for r in stall.silent_ranks] == [(1, None), (0, 11 * MIN)]


def test_without_a_world_size_only_ranks_with_a_file_are_named() -> None:
    stall = stall_of(now=NOW, activity=[], after_sec=600, heartbeats=[beat(4, 11 * MIN)])
    assert stall is not None and [r.rank for r in stall.silent_ranks] == [4]


def test_a_rank_with_several_files_counts_by_its_newest() -> None:
    hb = [beat(0, 40 * MIN, step=1), beat(0, 11 * MIN, step=9)]
    stall = stall_of(now=NOW, activity=[], after_sec=600, heartbeats=hb, world_size=1)
    assert stall is not None and stall.silent_ranks[0].step == 9


def test_a_heartbeat_from_a_node_whose_clock_runs_ahead_is_not_silent() -> None:
    ahead = stall_of(now=NOW, activity=[NOW - 20 * MIN], after_sec=600, heartbeats=[beat(0, -30)])
    assert ahead is None


@pytest.mark.parametrize(
    ("seconds", "label"),
    [(-5, "0 s"), (59.9, "59 s"), (60, "1 min"), (719, "11 min"), (7199, "119 min"),
     (7200, "2 h"), (7500, "2 h 5 min")],
)  # fmt: skip
def test_durations_read_naturally_and_round_down(seconds: float, label: str) -> None:
    assert duration_label(seconds) == label
