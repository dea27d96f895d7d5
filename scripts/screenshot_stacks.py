"""Take the README's screenshot of every rank's stack (key ``k`` in Run detail) from a real
hung run.

A 2-rank torchrun/gloo script (the tests' ``hang_ddp.py``) runs on the embedded local
scheduler: rank 1 stops in ``slow_step`` until a file appears, rank 0 waits for it in the next
all_reduce. The real app is driven headless to that run's detail, ``k`` takes the stacks, and
the modal is saved as SVG; then the run is released to finish.

    .venv/bin/python scripts/screenshot_stacks.py [docs/screenshots]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from screenshot_common import SIZE, local_app, local_cluster, out_dir, scratch

SCRIPT = Path(__file__).resolve().parents[1] / "tests/helpers/user_scripts/hang_ddp.py"


def _hang(root: Path, release: Path) -> None:
    """Submit the script and wait until rank 1 is in slow_step and rank 0 in all_reduce."""
    from ddp_tui.spec import ExperimentSpec

    cluster = local_cluster(root)
    spec = ExperimentSpec(
        name="hang",
        entry="script",
        script=str(SCRIPT),
        script_args=f"--release {release}",
        metrics="auto",
        device="cpu",
        backend="gloo",
        gpus_per_node=2,
        cpus_per_task=2,
        epochs=1,
        python=sys.executable,
    )
    view = cluster.submit(cluster.plan(spec))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if Path(f"{release}.entered").exists():
            taken = cluster.stacks(view.run_id)
            if any(p.rank == 0 and "all_reduce" in p.summary for p in taken.processes):
                return
        time.sleep(0.5)
    raise SystemExit("the script did not reach its hang in 5 minutes")


async def _shoot(root: Path, out: Path) -> None:
    app = local_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(3)
        await pilot.press("enter")
        await asyncio.sleep(3)
        await pilot.press("k")
        await asyncio.sleep(3)
        app.save_screenshot("stacks.svg", str(out))


def main() -> None:
    out = out_dir()
    with scratch() as root:
        release = root / "release"
        try:
            _hang(root, release)
            asyncio.run(_shoot(root, out))
        finally:
            release.write_text("")
            time.sleep(5)  # let the run finish before its directory goes
    print(f"wrote stacks.svg to {out}")


if __name__ == "__main__":
    main()
