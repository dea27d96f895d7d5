"""What the app shows of issue 13: Run detail's Resources tab (summary table, idle-GPU flag,
plots, why it is empty) and Compare's telemetry columns.

The texts are pure functions, tested first. The app tests are named ``fake``: they run on
the fake facade (tests/tui/fakes.py) with a view built by the real accumulator from
hand-written sampler lines, because an idle GPU for exactly five minutes on a second node
cannot be produced on demand here. The real runs are in the integration tests of issue 13.
"""

from __future__ import annotations

import math
from dataclasses import replace

from textual.pilot import Pilot
from textual.widgets import DataTable, TabbedContent

from ddp_tui.reports.results import RunData, scaling_table
from ddp_tui.resources import RESOURCE_TABLE_HEADER, resources_table, summarize_samples
from ddp_tui.tui.resources_pane import ResourcesPane, flag_text, status_text
from ddp_tui.tui.screens.compare import COLUMNS, CompareScreen, comparison_cells
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.help import help_table
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import BASE, FakeCluster, resource_view, sample_metrics, telemetry_lines

#: A sampler that could not read /proc says so once, in a note line, and samples nothing.
NOTE = {"t": 1.0, "kind": "note", "host": "n1", "node": 0, "ranks": "", "job": "1042",
        "restart": 0, "message": "cannot read /proc: permission denied"}  # fmt: skip


# -- the texts (pure) ----------------------------------------------------------------


def test_an_idle_gpu_of_a_running_job_is_flagged_by_host_and_index() -> None:
    flag = flag_text(resource_view(telemetry_lines(), state="RUNNING"))
    assert flag is not None
    assert flag.plain == "idle GPU: n2 gpu0 at <=5% for 5 min"


def test_an_ended_jobs_idle_gpu_is_not_flagged() -> None:
    view = resource_view(telemetry_lines(), state="COMPLETED")
    assert flag_text(view) is None
    assert "idle GPU" not in status_text(view).plain


def test_the_empty_reason_and_the_samplers_notes_are_said_instead_of_a_table() -> None:
    view = resource_view([NOTE], state="FAILED")
    assert view.empty_reason
    plain = status_text(view).plain
    assert view.empty_reason in plain
    assert plain.count("cannot read /proc: permission denied") == 1  # not said twice
    assert "samples over" not in plain


def test_a_cpu_run_says_it_has_no_gpu_samples() -> None:
    view = resource_view(telemetry_lines(gpus=False))
    assert not view.gpu_memory
    plain = status_text(view).plain
    assert "no GPU samples" in plain
    assert "n1: none" in plain


def test_compare_cells_show_the_telemetry_columns_and_dashes_where_missing() -> None:
    keys = [key for key, _ in COLUMNS]
    assert keys[-5:] == [
        "peak_mem_mib", "gpu_mem_peak_mib", "gpu_mem_mode_mib", "host_mem_peak_mib", "gpu_util_avg"
    ]  # fmt: skip
    row: dict[str, float | None] = {"gpu_mem_peak_mib": 5200.4, "gpu_mem_mode_mib": 5150.0,
                                    "host_mem_peak_mib": 2200.0, "gpu_util_avg": 54.0}  # fmt: skip
    assert comparison_cells(row)[-4:] == ["5200", "5150", "2200", "54.0"]
    assert comparison_cells({})[-4:] == ["-", "-", "-", "-"]


def test_help_names_the_resources_key() -> None:
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(help_table())
    assert "1 2 3 4" in console.export_text()


# -- the app on the fake facade ------------------------------------------------------


async def _open_resources(pilot: Pilot[None], name: str) -> DetailScreen:
    """Open the run called ``name`` from Jobs, show its Resources tab, wait for the view."""
    screen = await open_named(pilot, name)
    pane = screen.query_one(ResourcesPane)
    await wait_until(pilot, lambda: pane.view is not None, "the resource view")
    await pilot.press("4")
    await pilot.pause()
    assert screen.query_one("#detail-tabs", TabbedContent).active == "resources"
    return screen


async def test_fake_resources_tab_shows_the_summary_per_device_and_host_and_the_flag() -> None:
    view = resource_view(telemetry_lines(), state="RUNNING")
    app = fake_app(FakeCluster(telemetry=view))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_resources(pilot, "mnist-cnn")
        pane = screen.query_one(ResourcesPane)
        table = pane.query_one("#resources-table", DataTable)
        assert table.display
        assert [str(c.label) for c in table.columns.values()] == list(RESOURCE_TABLE_HEADER)
        rows = [tuple(table.get_row_at(i)) for i in range(table.row_count)]
        assert rows == resources_table(view.summary)
        assert len(rows) == 3 + 2  # n1 gpu0, n1 gpu1, n2 gpu0; hosts n1, n2
        status = str(pane.query_one("#resources-status").render())
        assert "idle GPU: n2 gpu0 at <=5% for 5 min" in status
        for plot in ("#plot-gpu-mem", "#plot-gpu-util", "#plot-host-mem"):
            assert pane.query_one(plot).display
        # The detail is followed every second: an unchanged view is not drawn again.
        draws = pane.draws
        assert not pane.show(replace(view))
        assert pane.draws == draws


async def test_fake_resources_tab_of_an_ended_run_has_no_idle_flag() -> None:
    app = fake_app(FakeCluster(telemetry=resource_view(telemetry_lines(), state="COMPLETED")))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_resources(pilot, "broken")
        pane = screen.query_one(ResourcesPane)
        assert pane.query_one("#resources-table", DataTable).row_count == 5
        assert "idle GPU" not in str(pane.query_one("#resources-status").render())


async def test_fake_resources_tab_of_a_cpu_run_plots_host_memory_only() -> None:
    app = fake_app(FakeCluster(telemetry=resource_view(telemetry_lines(gpus=False))))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_resources(pilot, "mnist-cnn")
        pane = screen.query_one(ResourcesPane)
        assert pane.query_one("#resources-table", DataTable).row_count == 2
        assert not pane.query_one("#plot-gpu-mem").display
        assert not pane.query_one("#plot-gpu-util").display
        assert pane.query_one("#plot-host-mem").display
        assert "no GPU samples" in str(pane.query_one("#resources-status").render())


async def test_fake_resources_tab_says_why_it_is_empty() -> None:
    view = resource_view([NOTE], state="RUNNING")
    assert view.empty_reason
    app = fake_app(FakeCluster(telemetry=view))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_resources(pilot, "mnist-cnn")
        pane = screen.query_one(ResourcesPane)
        assert not pane.query_one("#resources-table", DataTable).display
        assert not pane.query_one("#resources-plots").display
        assert view.empty_reason in str(pane.query_one("#resources-status").render())


async def test_fake_compare_shows_the_telemetry_columns() -> None:
    def run(run_id: str, gpus: int, resources: bool) -> RunData:
        spec = BASE.replace(nodes=2, gpus_per_node=gpus).to_dict()
        summary = summarize_samples(telemetry_lines()) if resources else None
        return RunData(run_id, spec, sample_metrics(), resources=summary)

    frame = scaling_table([run("a", 1, False), run("b", 2, True)])
    app = fake_app(FakeCluster(comparison=frame))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, CompareScreen) and bool(app.screen.rows),
            "the comparison",
        )
        table = app.screen.query_one("#compare-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[-4:] == ["GPU peak", "GPU mode", "Host peak", "GPU util%"]
        without, with_ = (table.get_row_at(i)[-4:] for i in range(2))
        assert without == ["-", "-", "-", "-"]  # NaN: no telemetry
        summary = summarize_samples(telemetry_lines())
        assert summary.gpu_util_avg is not None and math.isfinite(summary.gpu_util_avg)
        assert with_ == [
            f"{summary.gpu_mem_peak_mib:.0f}",
            f"{summary.gpu_mem_mode_mib:.0f}",
            f"{summary.host_mem_peak_mib:.0f}",
            f"{summary.gpu_util_avg:.1f}",
        ]
