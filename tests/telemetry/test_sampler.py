"""The loop's decisions on a fake clock and a fake ``/proc`` (``fake_proc``): the tick grid,
ending when the job's processes are gone or when writes keep failing, bounded notes; and the
rank ranges."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ddp_tui.jobfiles import format_ranks, telemetry_file
from ddp_tui.telemetry.lines import Origin, layout_ranks
from ddp_tui.telemetry.sampler import (
    GONE_AFTER_SEC,
    MAX_NOTES,
    WRITE_GIVE_UP,
    Sampler,
    Settings,
    _next_tick,
)

from .test_fake_proc import _fake_process


class FakeClock:
    """Monotonic time that only a fake sleep moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, sec: float) -> None:
        self.sleeps.append(sec)
        self.now += sec


def _sampler(run: Path, fake_proc: Path, clock: FakeClock, interval: float = 5.0) -> Sampler:
    settings = Settings(str(run), interval, Origin("n1", 0, "5", 0), "/runs/r", ranks_per_node=2)
    return Sampler(settings, None, proc_root=str(fake_proc), monotonic=clock, wall=clock)


@pytest.mark.parametrize(
    ("ranks", "text"),
    [([], ""), ([3], "3"), ([0, 1, 2, 3], "0-3"), ([2, 0], "0,2"), ([6, 0, 1, 2, 3, 1], "0-3,6")],
)
def test_format_ranks(ranks: list[int], text: str) -> None:
    assert format_ranks(ranks) == text


def test_layout_ranks() -> None:
    assert (layout_ranks(1, 4), layout_ranks(0, 1), layout_ranks(2, None)) == ("4-7", "0", "")


def test_ticks_stay_on_the_grid_and_a_late_one_skips() -> None:
    assert _next_tick(10.0, 5.0, 11.0) == 15.0
    assert _next_tick(10.0, 5.0, 15.0) == 20.0  # on the tick itself: the next one
    assert _next_tick(10.0, 5.0, 27.5) == 30.0  # a slow sample skips ticks


def test_the_sampler_ends_once_the_jobs_processes_are_gone(tmp_path: Path) -> None:
    fake_proc = tmp_path / "fake_proc"
    _fake_process(fake_proc, 300, {"DDP_TUI_RUN_DIR": "/runs/r"}, ticks=1, start=1, rss_pages=1)
    clock = FakeClock()
    sampler = _sampler(tmp_path / "run", fake_proc, clock)

    def sleep(sec: float) -> None:
        clock.sleep(sec)
        if len(clock.sleeps) == 3:  # the job's process exits after three samples
            shutil.rmtree(fake_proc / "300")

    assert sampler.run(stop=lambda: False, sleep=sleep) == "gone"
    lines = [json.loads(x) for x in (tmp_path / "run" / telemetry_file(0)).read_text().splitlines()]
    procs = [x["procs"] for x in lines if x["kind"] == "host"]
    assert procs[:3] == [1, 1, 1] and set(procs[3:]) == {0}
    assert len(procs[3:]) == int(GONE_AFTER_SEC / 5.0) + 1
    assert lines[-1]["message"] == "stopped: the job's processes are gone"
    assert clock.sleeps == [5.0] * len(clock.sleeps)  # no drift


def test_a_sampler_that_never_saw_the_job_keeps_waiting_for_it(tmp_path: Path) -> None:
    clock = FakeClock()
    sampler = _sampler(tmp_path / "run", tmp_path / "fake_proc", clock)
    (tmp_path / "fake_proc").mkdir()
    asked = iter(range(100))
    assert sampler.run(stop=lambda: next(asked) >= 50, sleep=clock.sleep) == "stopped"


def test_the_sampler_ends_when_writes_keep_failing(tmp_path: Path) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("")  # no telemetry/ can be made under a file
    clock = FakeClock()
    sampler = _sampler(blocker, tmp_path / "fake_proc", clock)
    why = sampler.run(stop=lambda: False, sleep=clock.sleep)
    assert why.startswith(f"writes failed {WRITE_GIVE_UP} times")
    assert len(clock.sleeps) == WRITE_GIVE_UP - 1


def test_notes_are_written_once_each_and_bounded(tmp_path: Path) -> None:
    clock = FakeClock()
    sampler = _sampler(tmp_path / "run", tmp_path / "fake_proc", clock)
    for n in range(MAX_NOTES * 3):
        sampler.note(f"problem {n % (MAX_NOTES * 2)}")
    notes = [x["message"] for x in sampler.sample() if x["kind"] == "note"]
    # Each distinct message once, up to the cap: the missing fake_proc came after it.
    assert notes == [f"problem {n}" for n in range(MAX_NOTES)]
    assert len(sampler._noted) == MAX_NOTES
    assert sampler.sample() == []  # no host line (no fake_proc), no more notes
