"""Take the README's screenshot of a loop with no epochs: Run detail of a real run of the
tests' nanoGPT-idiom script (``iter_loop_ddp.py``: an iteration budget, a log line every 10
iterations, an evaluation every 20), 2 CPU ranks on the embedded local scheduler, submitted with
no ``--epochs`` and no ``--metrics``: its step windows, ``N/N it`` and the plots by step.

    .venv/bin/python scripts/screenshot_steps.py [docs/screenshots]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from screenshot_common import SIZE, local_app, local_cluster, out_dir, scratch, wait_ended

SCRIPT = Path(__file__).resolve().parents[1] / "tests/helpers/user_scripts/iter_loop_ddp.py"


def _run(root: Path) -> None:
    """Submit the loop as a user would, and wait for it to end."""
    from ddp_tui.spec import ExperimentSpec

    cluster = local_cluster(root)
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
    wait_ended(cluster, [cluster.submit(cluster.plan(spec)).run_id], "the loop")


async def _shoot(root: Path, out: Path) -> None:
    app = local_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        await pilot.press("enter")
        await asyncio.sleep(3)
        await pilot.press("2")  # the metrics tab: the windows' table and the plots by step
        await asyncio.sleep(1.5)
        app.save_screenshot("detail_steps.svg", str(out))


def main() -> None:
    out = out_dir()
    with scratch() as root:
        _run(root)
        asyncio.run(_shoot(root, out))
    print(f"wrote detail_steps.svg to {out}")


if __name__ == "__main__":
    main()
