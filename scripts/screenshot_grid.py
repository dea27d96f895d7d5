"""Take the README's screenshots of a grid sweep, from a real session: Jobs with the sweep
folded into one row, and Compare showing what differs.

A 3 x 2 grid (lr x batch per GPU) of the real trainer (a small MLP on synthetic 8x8 images,
on the CPU) runs as one job array on the embedded local scheduler, at most 2 at once; then
the real app is driven headless to Jobs and to Compare, and each screen is saved as SVG.

    .venv/bin/python scripts/screenshot_grid.py [docs/screenshots] [--epochs 4]
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

SIZE = (132, 38)  # the other screenshots' size (scripts/screenshots.py)


def _run_grid(root: Path, epochs: int) -> None:
    from screenshot_common import small_mlp_spec

    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.spec import sweep_from_options

    profile = Profile(scheduler="local", runs_root=str(root / "runs"), local_max_concurrent=2)
    cluster = Cluster.open(profile)
    spec = small_mlp_spec("grid", epochs)
    sweep = sweep_from_options(["lr=0.3,0.03,0.003", "batch_per_gpu=32,128"])
    views = cluster.submit_sweep(cluster.plan_sweep(spec, sweep, max_concurrent=2))
    ids = {v.run_id for v in views}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        runs = [v for v in cluster.refresh().runs if v.run_id in ids]
        if all(v.state.is_terminal for v in runs):
            break
        time.sleep(2)
    cluster.close()


async def _shoot(root: Path, out: Path) -> None:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp
    from ddp_tui.tui.screens.compare import CompareScreen

    profile = Profile(scheduler="local", runs_root=str(root / "runs"))
    app = DdpTuiApp(lambda _prompter: Cluster.open(profile), profile=profile)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        app.save_screenshot("jobs_grid.svg", str(out))
        await pilot.press("s")
        deadline = time.monotonic() + 60
        while not (isinstance(app.screen, CompareScreen) and app.screen.outcomes is not None):
            if time.monotonic() > deadline:
                raise SystemExit("Compare showed no outcomes in 60 s")
            await pilot.pause(0.2)
        await pilot.pause(1.0)
        app.save_screenshot("compare_grid.svg", str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/screenshots")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddp-tui-grid-shot-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        (root / "none.toml").write_text("")  # no profiles: the built-in one
        os.environ["DDP_TUI_CONFIG"] = str(root / "none.toml")
        _run_grid(root, args.epochs)
        asyncio.run(_shoot(root, out))
    print(f"wrote {out / 'jobs_grid.svg'} and {out / 'compare_grid.svg'}")


if __name__ == "__main__":
    main()
