"""Compose gives a user's script no epoch count nobody asked for: switching Entry to script
empties an Epochs field that held only the trainer's default (an iteration loop has no epochs),
the empty field is valid for the script, and switching back gives the trainer its default."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from ddp_tui.spec import ExperimentSpec, form_text
from ddp_tui.tui.form import epochs_for_entry
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import open_compose, pick, preview_script
from tests.tui.test_local_app import connected, local_app

DEFAULT = form_text("epochs", ExperimentSpec().epochs)


def test_the_trainers_default_is_no_scripts_count() -> None:
    assert DEFAULT == "10"
    assert epochs_for_entry("script", DEFAULT) == ""
    assert epochs_for_entry("script", " 10 ") == ""
    # A count the user typed is theirs: it stays, for either entry.
    assert epochs_for_entry("script", "3") == "3"
    assert epochs_for_entry("trainer", "3") == "3"
    # The trainer needs a count: an empty field gets the default back.
    assert epochs_for_entry("trainer", "") == DEFAULT
    assert epochs_for_entry("trainer", "  ") == DEFAULT


async def test_switching_to_a_script_empties_epochs_and_back_restores_them(
    tmp_path: Path,
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("print('hello')\n")
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        screen = await open_compose(pilot)
        epochs = screen.query_one("#f-epochs", Input)
        assert epochs.value == DEFAULT
        await pick(pilot, "entry", "script")
        await wait_until(pilot, lambda: epochs.value == "", "Epochs emptied", 5)
        await preview_script(pilot, screen, (("name", "loop"), ("script", str(proj / "train.py"))))
        # No epochs is a valid script: the plan was made, with no error beside Epochs.
        assert not screen.errors, screen.errors
        await pick(pilot, "entry", "trainer")
        await wait_until(pilot, lambda: epochs.value == DEFAULT, "Epochs back to the default", 5)
