"""Compose's sweep dialog: the member table, the count and the errors follow what is typed,
before anything is submitted; Submit stays off while any member is refused; the sweep it
returns is what Compose plans and submits, here on the real local scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, Select, Static

from ddp_tui.spec import ExperimentSpec, Sweep, SweepAxis
from ddp_tui.tui.sweep_dialog import SweepDialog, sweep_fields, sweep_preview
from tests.tui.conftest import SIZE, wait_until


def spec(**changes: object) -> ExperimentSpec:
    return ExperimentSpec(name="grid", device="cpu", backend="gloo").replace(**changes)


# -- the preview, a pure function --------------------------------------------------------


def test_preview_lists_every_member_of_a_grid() -> None:
    preview = sweep_preview(
        spec(), [("lr", "0.1,0.01,0.001"), ("batch_per_gpu", "32,64")], "grid", "2"
    )
    assert preview.ok and preview.count == 6
    assert preview.sweep is not None and preview.sweep.max_concurrent == 2
    assert preview.columns() == ("#", "lr", "batch_per_gpu", "name")
    assert preview.rows()[:2] == [
        ("0", "0.1", "32", "grid-lr0.1-b32"),
        ("1", "0.1", "64", "grid-lr0.1-b64"),
    ]


def test_preview_shows_the_lr_each_member_trains_with_under_linear_scaling() -> None:
    linear = spec(lr_scaling="linear", base_batch=64)
    preview = sweep_preview(linear, [("lr", "0.1,0.2"), ("batch_per_gpu", "32,64")], "grid", "")
    assert preview.columns() == ("#", "lr", "batch_per_gpu", "lr used", "name")
    assert [row[3] for row in preview.rows()] == ["0.05", "0.1", "0.1", "0.2"]
    # Without the linear rule the lr typed is the lr used: no column for it.
    plain = sweep_preview(spec(), [("lr", "0.1,0.2")], "grid", "")
    assert "lr used" not in plain.columns()


def test_preview_errors_name_the_member_and_the_field() -> None:
    preview = sweep_preview(spec(), [("lr", "0.1,abc")], "grid", "")
    assert not preview.ok and preview.count == 2 and preview.members == ()
    assert preview.errors == ("sweep[1] lr: must be a number, got 'abc'",)
    zipped = sweep_preview(spec(), [("lr", "0.1,0.2"), ("seed", "1")], "zip", "")
    assert zipped.count is None and "lr has 2, seed has 1 values" in zipped.errors[0]
    limit = sweep_preview(spec(), [("lr", "0.1")], "grid", "two")
    assert not limit.ok and limit.errors[0].startswith("max_concurrent: must be a whole number")
    big = sweep_preview(spec(), [("seed", ",".join(map(str, range(1001))))], "grid", "")
    assert big.count == 1001 and "more than the cap of 1000" in big.errors[0]


def test_picker_offers_the_fields_of_the_entry_common_first() -> None:
    trainer = sweep_fields(spec())
    assert trainer[:4] == ("lr", "batch_per_gpu", "gpus_per_node", "nodes")
    assert "name" not in trainer and "entry" not in trainer and "script" not in trainer
    script = sweep_fields(spec(entry="script", script="train.py"))
    assert "lr" not in script and "script_args" in script and script[0] == "gpus_per_node"


# -- the dialog, driven by keys ---------------------------------------------------------


class Host(App[None]):
    """A bare app that opens the dialog and keeps what it returns."""

    def __init__(self, base: ExperimentSpec, sweep: Sweep | None = None) -> None:
        super().__init__()
        self.base, self.initial = base, sweep
        self.results: list[Sweep | None] = []

    def compose(self) -> ComposeResult:
        yield Static("host")

    def on_mount(self) -> None:
        self.push_screen(SweepDialog(self.base, self.initial), self.results.append)


async def typed(pilot: Pilot[None], selector: str, text: str) -> None:
    """Clear an input of the dialog with keys and type ``text``."""
    dialog = pilot.app.screen
    dialog.query_one(selector, Input).focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u", *text)
    assert isinstance(dialog, SweepDialog)
    await wait_until(pilot, lambda: not dialog.pending, "the members of what was typed")


def shown(dialog: SweepDialog) -> tuple[str, str, int, bool]:
    """The count line, the errors, the table's rows and whether Submit is on."""
    return (
        str(dialog.query_one("#sweep-count", Static).render()),
        str(dialog.query_one("#sweep-errors", Static).render()),
        dialog.query_one("#members", DataTable).row_count,
        not dialog.query_one("#ok", Button).disabled,
    )


async def test_dialog_follows_what_is_typed_and_returns_the_sweep() -> None:
    app = Host(spec())
    async with app.run_test(size=SIZE) as pilot:
        dialog = app.screen
        assert isinstance(dialog, SweepDialog)
        # Opens on the size sweep it always offered.
        assert shown(dialog) == ("4 members: every combination of gpus_per_node (4)", "", 4, True)

        dialog.query_one("#field-0", Select).value = "lr"
        await typed(pilot, "#values-0", "0.1,abc")
        count, errors, rows, submit = shown(dialog)
        assert count.startswith("2 members") and rows == 0 and not submit
        assert errors == "sweep[1] lr: must be a number, got 'abc'"
        assert "Each value: a number above 0 and at most 100" in str(
            dialog.query_one("#hint-0", Static).render()
        )
        await pilot.press("enter")  # refused: the dialog stays, nothing returned
        assert app.screen is dialog and app.results == []

        await typed(pilot, "#values-0", "0.1,0.01,0.001")
        await pilot.click("#add")
        await wait_until(pilot, lambda: len(dialog.axes()) == 2, "a second field")
        assert dialog.axes()[1] == ("batch_per_gpu", "")  # the next common field not swept
        await typed(pilot, "#values-1", "32,64")
        await typed(pilot, "#max-concurrent", "2")
        count, errors, rows, submit = shown(dialog)
        assert (
            count == "6 members: every combination of lr (3) x batch_per_gpu (2), at most 2 at once"
        )
        assert (errors, rows, submit) == ("", 6, True)
        table = dialog.query_one("#members", DataTable)
        assert [str(c.label) for c in table.columns.values()] == [
            "#",
            "lr",
            "batch_per_gpu",
            "name",
        ]
        assert table.get_row_at(5) == ["5", "0.001", "64", "grid-lr0.001-b64"]

        await pilot.click("#ok")
        await wait_until(pilot, lambda: app.results != [], "the dialog's answer")
    assert app.results == [
        Sweep(
            (SweepAxis("lr", ("0.1", "0.01", "0.001")), SweepAxis("batch_per_gpu", ("32", "64"))),
            "grid",
            2,
        )
    ]


async def test_zip_mode_and_removing_a_field() -> None:
    initial = Sweep((SweepAxis("lr", ("0.1", "0.2")), SweepAxis("seed", ("1", "2", "3"))))
    app = Host(spec(), initial)
    async with app.run_test(size=SIZE) as pilot:
        dialog = app.screen
        assert isinstance(dialog, SweepDialog)
        assert shown(dialog)[2] == 6
        dialog.query_one("#mode", Select).value = "zip"
        await wait_until(pilot, lambda: not dialog.pending and dialog.mode() == "zip", "zip")
        _, errors, rows, submit = shown(dialog)
        assert "lr has 2, seed has 3 values" in errors and rows == 0 and not submit
        await pilot.click("#remove-1")
        await wait_until(pilot, lambda: not dialog.pending and len(dialog.axes()) == 1, "one field")
        assert shown(dialog) == ("2 members: lr paired", "", 2, True)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.results != [], "the dialog's answer")
    assert app.results == [None]


# -- from Compose, on the real local scheduler ------------------------------------------


@pytest.mark.usefixtures("cancel_leftover_jobs")
async def test_compose_submits_the_dialogs_grid_as_one_group(tmp_path: Path) -> None:
    """Without torch: jobs whose python is `true` still make the sweep's runs and group."""
    from ddp_tui.tui.screens.compose import ComposeScreen
    from ddp_tui.tui.screens.jobs import JobsScreen
    from tests.tui.drive import type_into
    from tests.tui.test_compose_prequeue import local_app

    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh")
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        await type_into(pilot, "name", "grid")
        await type_into(pilot, "python", "true")
        await type_into(pilot, "cpus_per_task", "1")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: isinstance(app.screen, SweepDialog), "the sweep dialog")
        dialog = app.screen
        assert isinstance(dialog, SweepDialog)
        dialog.query_one("#field-0", Select).value = "lr"
        await typed(pilot, "#values-0", "0.1,0.01,0.001")
        await pilot.click("#add")
        await wait_until(pilot, lambda: len(dialog.axes()) == 2, "a second field")
        await typed(pilot, "#values-1", "32,64")
        await typed(pilot, "#max-concurrent", "2")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs", 30)
        await wait_until(
            pilot,
            lambda: app.snapshot is not None and len(app.snapshot.runs) == 6,
            "six runs",
            30,
        )
        runs = app.snapshot.runs  # type: ignore[union-attr]
        assert len({run.group for run in runs}) == 1
        assert sorted((run.spec.lr, run.spec.batch_per_gpu) for run in runs) == sorted(
            (lr, b) for lr in (0.1, 0.01, 0.001) for b in (32, 64)
        )
        assert {run.name for run in runs} >= {"grid-lr0.1-b32", "grid-lr0.001-b64"}
