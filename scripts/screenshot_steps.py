"""Take the README's screenshot of a loop with no epochs: Run detail of a real run of the
tests' nanoGPT-idiom script (``iter_loop_ddp.py``: an iteration budget, a log line every 10
iterations, an evaluation every 20), 2 CPU ranks on the embedded local scheduler, submitted with
no ``--epochs`` and no ``--metrics``: its step windows, ``N/N it`` and the plot by step.

    .venv/bin/python scripts/screenshot_steps.py [docs/screenshots]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

SIZE = (132, 38)
SCRIPT = Path(__file__).resolve().parents[1] / "tests/helpers/user_scripts/iter_loop_ddp.py"


def _run(root: Path) -> None:
    """Submit the loop as a user would, and wait for it to end."""
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.spec import ExperimentSpec

    cluster = Cluster.open(Profile(scheduler="local", runs_root=str(root / "runs")))
    spec = ExperimentSpec(
        name="iter-loop",
        entry="script",
        script=str(SCRIPT),
        script_args="--max_iters=200",
        device="cpu",
        backend="gloo",
        gpus_per_node=2,
        cpus_per_task=2,
        epochs=None,
        python=sys.executable,
    )
    view = cluster.submit(cluster.plan(spec))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        states = {v.run_id: v.state for v in cluster.refresh().runs}
        if states[view.run_id].is_terminal:
            return
        time.sleep(2)
    raise SystemExit("the loop did not finish in 10 minutes")


async def _shoot(root: Path, out: Path) -> None:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp

    profile = Profile(scheduler="local", runs_root=str(root / "runs"))
    app = DdpTuiApp(lambda _prompter: Cluster.open(profile), profile=profile)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        await pilot.press("enter")
        await asyncio.sleep(3)
        await pilot.press("2")  # the metrics tab: the windows' table and the plot by step
        await asyncio.sleep(1.5)
        app.save_screenshot("detail_steps.svg", str(out))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddp-tui-shots-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        (root / "none.toml").write_text("")  # no profiles: the built-in one
        os.environ["DDP_TUI_CONFIG"] = str(root / "none.toml")
        _run(root)
        asyncio.run(_shoot(root, out))
    print(f"wrote detail_steps.svg to {out}")


if __name__ == "__main__":
    main()
