"""The app on a run with 100,000 metrics rows (issue 21): Run detail opens, shows the newest
rows with a note of how many are not in the table, plots a bounded sample, and Escape goes
back to Jobs. The real app, the real facade and the local scheduler; the run is real files
(tests/helpers/long_metrics.py). No timing is asserted: benchmarks/bench_metrics.py times it.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import DETAIL_METRICS_ROWS, RunDetail
from ddp_tui.remote.store.tail import PLOT_BUCKETS
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.jobs import JobsScreen
from tests.helpers.long_metrics import finished_run
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import FakeCluster, sample_metrics

ROWS = 100_000


async def test_run_detail_of_a_100000_row_run_opens_and_escape_goes_back(tmp_path: Path) -> None:
    finished_run(tmp_path / "runs", "long", ROWS)
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    app = DdpTuiApp(
        lambda prompter: Cluster.open(
            profile, local_state_dir=str(tmp_path / "state"), prompter=prompter
        ),
        profile=profile,
        refresh_interval=2,
    )
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_named(pilot, "long")
        await pilot.press("2")  # the Metrics tab
        await wait_until(pilot, lambda: detail.metrics_total == ROWS, "every row read", 120)
        table = detail.query_one("#metrics-table", DataTable)
        assert table.row_count == len(detail.metrics) == DETAIL_METRICS_ROWS
        assert detail.metrics[-1]["epoch"] == float(ROWS)
        note = detail.query_one("#metrics-note", Static)
        assert note.display
        assert f"of {ROWS:,} rows" in str(note.render())
        assert detail.metrics_plot
        assert all(len(xs) <= 2 * PLOT_BUCKETS + 2 for xs, _ in detail.metrics_plot.values())

        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs again", 60)
        assert not isinstance(app.screen, DetailScreen)


class _WindowFake(FakeCluster):
    """A fake facade whose follows hand out the details a test queues, one per follow (then
    nothing new): the table's window must move as rows arrive, which a real run cannot be
    made to do between two follows on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.details: list[RunDetail] = []

    def follow(self, run_id: str) -> RunDetail:
        return self.details.pop(0) if self.details else RunDetail(run_id)


def _rows(first: int, last: int) -> list[dict[str, float | None]]:
    return sample_metrics(last)[first - 1 :]


async def test_fake_the_table_keeps_the_newest_rows_and_starts_over_on_a_rewrite() -> None:
    run_id = "20231114-221500-mnist-cnn-a1b2"  # the fake facade's first run
    window = DETAIL_METRICS_ROWS
    fake = _WindowFake()
    # The fake facade, with a running clock (fake_app's frozen one would never follow again).
    app = DdpTuiApp(lambda prompter: fake, refresh_interval=60)
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_named(pilot, "mnist-cnn")
        table = detail.query_one("#metrics-table", DataTable)
        note = detail.query_one("#metrics-note", Static)
        fake.details.append(RunDetail(run_id, metrics=_rows(1, window)))
        await wait_until(pilot, lambda: detail.metrics_total == window, "the first window")
        assert table.row_count == window and not note.display
        # Two new rows: the table appends them and drops the two oldest.
        fake.details.append(
            RunDetail(run_id, metrics=_rows(3, window + 2), metrics_total=window + 2)
        )
        await wait_until(pilot, lambda: detail.metrics_total == window + 2, "two more rows")
        assert table.row_count == window
        assert [table.get_row_at(i)[0] for i in (0, window - 1)] == ["3", str(window + 2)]
        assert note.display and f"of {window + 2:,} rows" in str(note.render())
        # The file was rewritten with ten rows: the table starts over.
        fake.details.append(RunDetail(run_id, metrics=_rows(1, 10), metrics_total=10))
        await wait_until(pilot, lambda: detail.metrics_total == 10, "the rewritten file")
        assert table.row_count == 10
        assert table.get_row_at(0)[0] == "1"
        assert not note.display
