"""Compare's Advice panel and its plot of measured against predicted speedup (issue 22).

The story tests drive the real app on the real facade and the local scheduler over run
directories written as a submit and the trainer write them (tests/tui/advice_runs.py): open
Compare with ``s``, read the recommendation, a predicted size's row and the plot's lines.
One test holds the advice back with a fake facade, for a real one cannot be held on demand.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ddp_tui.advisor import Advice, Breakdown
from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.advice_panel import (
    WAITING,
    AdvicePanel,
    efficiency_text,
    seconds_text,
    share_cells,
)
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.screens.compare import CompareScreen
from ddp_tui.tui.speedup_plot import speedup_lines
from tests.tui.advice_runs import finished_sweep
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import FakeCluster, sample_advice

#: Wide enough that no line of the panel wraps: the tests look for whole lines.
TEXT_WIDTH = 240


def local_app(tmp_path: Path) -> DdpTuiApp:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    return DdpTuiApp(
        lambda prompter: Cluster.open(
            profile, local_state_dir=str(tmp_path / "state"), prompter=prompter
        ),
        profile=profile,
        refresh_interval=2,
    )


def panel_text(screen: CompareScreen) -> str:
    """What the Advice panel shows, as plain text."""
    console = Console(width=TEXT_WIDTH, record=True, file=io.StringIO())
    console.print(screen.query_one("#advice-body", Static).content)
    return console.export_text()


async def open_compare(pilot: Pilot[None], runs: int) -> CompareScreen:
    app = pilot.app
    assert isinstance(app, DdpTuiApp)
    await wait_until(
        pilot,
        lambda: app.snapshot is not None and len(app.snapshot.runs) == runs,
        "the group's runs listed",
        60,
    )
    await pilot.press("s")
    await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "Compare")
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    await wait_until(pilot, lambda: len(screen.rows) == runs, "a comparison row per size", 60)
    return screen


def size_line(text: str, world: int) -> str:
    """The panel's size-table line of ``world`` (its first cell, marked or not)."""
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].lstrip("▶") == str(world):
            return line
    raise AssertionError(f"no row for world size {world} in the panel:\n{text}")


async def test_compare_shows_the_advice_and_the_measured_and_predicted_speedup(
    tmp_path: Path,
) -> None:
    finished_sweep(tmp_path / "runs", (1, 2))
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot, runs=2)
        await wait_until(pilot, lambda: screen.advice is not None, "the advice", 60)
        advice = screen.advice
        assert isinstance(advice, Advice)
        text = panel_text(screen)

        # The recommendation: its size and its reason.
        rec = advice.recommendation
        assert rec.world_size is not None, rec.reason
        assert f"run {rec.world_size}" in text
        assert rec.reason in " ".join(text.split())

        # Both measured sizes with their breakdown shares, and a size that was not run.
        measured = {s.world_size: s for s in advice.sizes if s.measured is not None}
        assert sorted(measured) == [1, 2]
        two = measured[2].measured
        assert two is not None and two.breakdown is not None
        line = size_line(text, 2)
        assert seconds_text(two.epoch_time_sec) in line
        assert all(share in line.split() for share in share_cells(two.breakdown))
        four = advice.size(4)
        assert four is not None and four.measured is None and four.predicted is not None
        line = size_line(text, 4)
        assert seconds_text(four.predicted.epoch_time_sec) in line
        assert efficiency_text(four).plain in line  # the predicted efficiency with its bounds

        # The straggler of the 2-process run, named with its host.
        assert [(s.world_size, s.rank) for s in advice.stragglers] == [(2, 1)]
        assert "rank 1 on localhost at world size 2: 13% slower" in text

        # The plot: measured at 1 and 2, predicted (with its bounds) beyond them, and ideal.
        lines = screen.plot_lines
        assert [x for x, _ in lines["measured"]] == [1.0, 2.0]
        for name in ("predicted", "low", "high", "ideal"):
            assert 4.0 in [x for x, _ in lines[name]], name
        assert dict(lines["ideal"])[4.0] == 4.0
        low, predicted, high = (dict(lines[n])[4.0] for n in ("low", "predicted", "high"))
        assert low <= predicted <= high


async def test_a_group_without_a_steady_epoch_says_why_and_keeps_its_table(
    tmp_path: Path,
) -> None:
    """Runs that ended before their first epoch's row: no advice, said in one line."""
    finished_sweep(tmp_path / "runs", (1, 2), metrics=False)
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot, runs=2)
        await wait_until(
            pilot, lambda: panel_text(screen).startswith(" Advice  none: "), "why, in the panel"
        )
        assert screen.advice is None
        assert len(panel_text(screen).strip().splitlines()) == 1
        assert screen.query_one("#compare-table", DataTable).row_count == 2
        # Said in the panel, not again in a toast.
        assert not [n for n in app._notifications if "Advise" in n.title]


class _HeldAdvice(FakeCluster):
    """A fake facade whose advise waits until the test lets it go: the table must come
    first, and a real advise cannot be held mid-way on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice:
        self.release.wait(60)
        return super().advise(group, threshold=threshold, deadline_sec=deadline_sec)


async def test_fake_the_table_does_not_wait_for_the_advice() -> None:
    fake = _HeldAdvice()
    app = fake_app(fake)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("s")
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "Compare")
            screen = app.screen
            assert isinstance(screen, CompareScreen)
            await wait_until(pilot, lambda: len(screen.rows) == 3, "the comparison")
            assert panel_text(screen).strip() == WAITING
            assert "predicted" not in screen.plot_lines
            fake.release.set()
            await wait_until(pilot, lambda: screen.advice is not None, "the advice")
            assert "run 4 (2x2)" in panel_text(screen)
            assert [x for x, _ in screen.plot_lines["predicted"]] == [1, 2, 4, 8, 16]

            # tab reaches the panel (as the README says), and the arrow keys scroll it.
            panel = screen.query_one(AdvicePanel)
            for _ in range(4):
                if panel.has_focus:
                    break
                await pilot.press("tab")
            assert panel.has_focus
            panel.styles.height = 5  # shorter than its text, so that it has to scroll
            await wait_until(pilot, lambda: panel.max_scroll_y > 0, "a panel to scroll")
            await pilot.press("down")
            await wait_until(pilot, lambda: panel.scroll_y > 0, "the panel scrolled")
    finally:
        fake.release.set()  # never leave the I/O thread waiting


def test_plot_lines_without_advice_are_the_comparisons() -> None:
    rows = [
        {"world_size": 1.0, "speedup": 1.0},
        {"world_size": 2.0, "speedup": 1.6},
        {"world_size": 4.0, "speedup": None},  # a run with no epoch yet
    ]
    assert speedup_lines(rows) == {
        "ideal": [(1.0, 1.0), (2.0, 2.0)],
        "measured": [(1.0, 1.0), (2.0, 1.6)],
    }


def test_plot_lines_with_advice_add_the_prediction_and_ideal_at_every_size() -> None:
    series = [(2, 1.0, 1.0, 1.0, 1.0), (4, 1.7, 1.8, 1.6, 1.9), (8, None, 3.0, 2.5, 3.4)]
    lines = speedup_lines([], series)
    assert lines["measured"] == [(2.0, 1.0), (4.0, 1.7)]
    assert lines["ideal"] == [(2.0, 1.0), (4.0, 2.0), (8.0, 4.0)]  # against the smallest run
    assert lines["predicted"] == [(2.0, 1.0), (4.0, 1.8), (8.0, 3.0)]
    assert lines["low"][-1] == (8.0, 2.5) and lines["high"][-1] == (8.0, 3.4)


def test_panel_marks_inferred_shares_and_gives_predicted_bounds() -> None:
    shares = share_cells(Breakdown(6.0, 1.0, 2.0, 1.0, inferred=("compute_sec", "comm_sec")))
    assert shares == ["60%*", "10%", "20%*", "10%"]
    eight = sample_advice().size(8)
    assert eight is not None
    assert efficiency_text(eight).plain == "~69% 61-77"
