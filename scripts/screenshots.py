"""Take the README's screenshots of the four screens (and Run detail's tabs) from a real
session.

A real sweep (1 and 2 CPU processes) runs on the embedded local scheduler with the real
trainer, and a user's own tutorial-style script (the tests' ``tutorial_ddp.py``) with 2
processes, once to the end and once crashing in its second epoch (the Diagnosis panel);
then the real app is driven headless and each screen is saved as SVG.

    .venv/bin/python scripts/screenshots.py [docs/screenshots]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZE = (132, 38)
USER_SCRIPT = Path(__file__).resolve().parents[1] / "tests/helpers/user_scripts/tutorial_ddp.py"


def _sweep(root: Path) -> None:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.spec import ExperimentSpec, sweep_from_options

    cluster = Cluster.open(Profile(scheduler="local", runs_root=str(root / "runs")))
    script = ExperimentSpec(
        name="my-script",
        entry="script",
        script=str(USER_SCRIPT),
        script_args="--epochs 4 --lr 0.1",
        metrics="epoch-line",
        device="cpu",
        backend="gloo",
        gpus_per_node=2,
        cpus_per_task=2,
        epochs=4,
        python=sys.executable,
    )
    # Oldest, so it is the table's last row: the same script crashing in its second epoch,
    # for the Diagnosis panel.
    crash = script.replace(
        name="crashes", script_args="--epochs 4 --crash-at-epoch 2", metrics="auto"
    )
    views = [cluster.submit(cluster.plan(crash))]
    # Run ids start with the second they were made in, and the table lists the newest first:
    # a second apart, the crashed run stays the last row.
    time.sleep(1.1)
    spec = ExperimentSpec(
        name="cnn-sweep",
        model="simple_cnn",
        dataset="synthetic",
        synthetic_samples=2048,
        synthetic_val_samples=512,
        num_classes=10,
        device="cpu",
        backend="gloo",
        cpus_per_task=2,
        epochs=4,
        batch_per_gpu=32,
        workers=0,
        # A sample a second, so that a run of seconds still draws the Resources tab's plots.
        telemetry_sec=1,
        python=sys.executable,
    )
    views += cluster.submit_sweep(cluster.plan_sweep(spec, sweep_from_options(["1,2"])))
    views.append(cluster.submit(cluster.plan(script)))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        states = {v.run_id: v.state for v in cluster.refresh().runs}
        if all(states[v.run_id].is_terminal for v in views):
            return
        time.sleep(2)
    raise SystemExit("the sweep did not finish in 10 minutes")


async def _shoot(root: Path, out: Path) -> None:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp

    profile = Profile(scheduler="local", runs_root=str(root / "runs"))
    app = DdpTuiApp(lambda _prompter: Cluster.open(profile), profile=profile)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        await pilot.pause()
        app.save_screenshot("jobs.svg", str(out))
        # The newest run (the script) is first: its detail, then the sweep's.
        await pilot.press("enter")
        await asyncio.sleep(3)
        await pilot.press("2")
        await asyncio.sleep(1.5)
        app.save_screenshot("detail_script.svg", str(out))
        await pilot.press("escape")
        await asyncio.sleep(0.5)
        await pilot.press("down")
        await pilot.press("enter")
        await asyncio.sleep(3)
        await pilot.press("2")
        await asyncio.sleep(1.5)
        app.save_screenshot("detail.svg", str(out))
        await pilot.press("4")
        await asyncio.sleep(1.5)
        app.save_screenshot("detail_resources.svg", str(out))
        await pilot.press("escape")
        await asyncio.sleep(0.5)
        await pilot.press("s")
        await asyncio.sleep(3)
        app.save_screenshot("compare.svg", str(out))
        await pilot.press("escape")
        await asyncio.sleep(0.5)
        await pilot.press("down", "down")  # the crashed script, the last row
        await pilot.press("enter")
        await asyncio.sleep(3)
        app.save_screenshot("detail_diagnosis.svg", str(out))
        await pilot.press("escape")
        await asyncio.sleep(0.5)
        await pilot.press("n")
        await asyncio.sleep(2)
        app.save_screenshot("compose.svg", str(out))
        await _compose_script(pilot)
        app.save_screenshot("compose_script.svg", str(out))


async def _compose_script(pilot: Any) -> None:
    """Compose with Entry: script and the tutorial script's fields filled in."""
    from textual.widgets import Input, Select

    screen = pilot.app.screen
    screen.query_one("#f-entry", Select).value = "script"
    screen.query_one("#f-name", Input).value = "my-script"
    screen.query_one("#f-script", Input).value = str(USER_SCRIPT)
    screen.query_one("#f-script_args", Input).value = "--epochs 4 --lr 0.1"
    screen.query_one("#f-metrics", Select).value = "epoch-line"
    await asyncio.sleep(2)
    screen.query_one("#preview-scroll").scroll_to(y=40, animate=False)
    await asyncio.sleep(1)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddp-tui-shots-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        (root / "none.toml").write_text("")  # no profiles: the built-in one
        os.environ["DDP_TUI_CONFIG"] = str(root / "none.toml")
        _sweep(root)
        asyncio.run(_shoot(root, out))
    print(f"wrote {', '.join(p.name for p in sorted(out.glob('*.svg')))} to {out}")


if __name__ == "__main__":
    main()
