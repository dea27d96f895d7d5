"""Take the README's screenshot of Compare with its Advice panel, from a real session.

The advisor's sweep of reality (tests/helpers/advisor_sweep.py: ResNet-18 on 3x32x32
synthetic images, on the CPU with gloo, at 1 and 2 processes, and a preflight at 2) runs on
the embedded local scheduler with the real trainer; then the real app is driven headless to
Compare, and the screen is saved as SVG once the advice is in.

With ``--test-runs`` the group is instead the app tests' finished sweep (tests/tui/advice_runs.py:
run directories written as the trainer writes them, no job runs). The README's screenshot is
made so: on a 2-core machine shared with other work, a live 2-process run is starved of a core
and its efficiency says more about the neighbours than about the model.

    .venv/bin/python scripts/screenshot_advice.py [docs/screenshots] [--steps 20] [--epochs 3]
    .venv/bin/python scripts/screenshot_advice.py docs/screenshots --test-runs
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from tests.helpers.advisor_sweep import open_local, submit_sweep, wait_ended  # noqa: E402

SIZE = (132, 38)  # the other screenshots' size (scripts/screenshots.py)
NAME = "compare_advice.svg"


async def _shoot(root: Path, out: Path) -> None:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp
    from ddp_tui.tui.screens.compare import CompareScreen

    profile = Profile(scheduler="local", runs_root=str(root / "runs"))
    state = str(root / "state" / "ddp-tui" / "local")  # where open_local put the jobs
    app = DdpTuiApp(lambda _prompter: Cluster.open(profile, local_state_dir=state), profile=profile)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        await pilot.press("s")
        deadline = time.monotonic() + 60
        while not (isinstance(app.screen, CompareScreen) and app.screen.advice is not None):
            if time.monotonic() > deadline:
                raise SystemExit("Compare showed no advice in 60 s")
            await pilot.pause(0.2)
        await pilot.pause(0.5)
        app.save_screenshot(NAME, str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/screenshots")
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch (default 20)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3)")
    parser.add_argument(
        "--test-runs", action="store_true", help="the app tests' finished sweep, no live jobs"
    )
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddp-tui-advice-shot-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        (root / "none.toml").write_text("")  # no profiles: the built-in one
        os.environ["DDP_TUI_CONFIG"] = str(root / "none.toml")
        if args.test_runs:
            from tests.tui.advice_runs import finished_sweep

            finished_sweep(root / "runs")
        else:
            cluster = open_local(root)
            sweep = submit_sweep(cluster, steps=args.steps, epochs=args.epochs, name="resnet")
            wait_ended(cluster, sweep, timeout=1200)
            cluster.close()
        asyncio.run(_shoot(root, out))
    print(f"wrote {out / NAME}")


if __name__ == "__main__":
    main()
