"""Compose takes a user's script as the command line does: picking Entry: script and a
script runs that script (never ``-m ddp_tui.trainer``), and a Script args value that begins
with ``--`` and looks like ddp-tui's own options reaches the job script word for word."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.job_script_words import script_words
from tests.tui.conftest import SIZE
from tests.tui.drive import open_compose, pick, preview_script
from tests.tui.test_local_app import connected, local_app


async def test_a_script_with_dash_dash_args_previews_the_script(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("print('hello')\n")
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        screen = await open_compose(pilot)
        await pick(pilot, "entry", "script")
        fields = (
            ("name", "dashes"),
            ("script", str(proj / "train.py")),
            ("script_args", "--dataset=x --device=cpu"),
        )
        await preview_script(pilot, screen, fields)
        assert not screen.errors, screen.errors
        script = screen.script or ""
        assert "-m ddp_tui.scriptrun" in script and "-m ddp_tui.trainer" not in script
        assert script_words(script) == ["train.py", "--dataset=x", "--device=cpu"]
