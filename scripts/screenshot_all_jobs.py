"""Take the README's screenshots of every job of the user, from a real session: Jobs after
``a`` (a ddp-tui run, and beside it jobs sent to the embedded local scheduler by hand, one
running, one ended, one waiting behind it), and the screen of the running one, its ``.out``
followed live.

    .venv/bin/python scripts/screenshot_all_jobs.py [docs/screenshots]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

from screenshot_common import (  # noqa: E402
    SIZE,
    local_app,
    local_cluster,
    out_dir,
    scratch,
    small_mlp_spec,
    wait_ended,
)

#: Jobs "sent by hand": (file, script). The local scheduler runs one job at a time here, so
#: the last waits while the first runs.
BY_HAND = (
    ("prep.sh", "#!/bin/bash\n#SBATCH --job-name=prep-shards\necho 'shard 0 of 8 written'\n"),
    (
        "eval.sh",
        "#!/bin/bash\n#SBATCH --job-name=eval-ckpt\n"
        "for i in $(seq 1 600); do\n"
        '  echo "eval batch $i: acc 0.$((700 + i % 90))"; sleep 1\n'
        "done\n",
    ),
    ("export.sh", "#!/bin/bash\n#SBATCH --job-name=export-onnx\necho exported\n"),
)


def _queue(root: Path) -> str:
    """A finished ddp-tui run (the real trainer, a small MLP on synthetic 8x8 images, on the
    CPU), then the jobs by hand; returns the running job's id."""
    from ddp_tui.remote.backends.local import LocalScheduler
    from ddp_tui.remote.backends.local.store import default_state_dir

    cluster = local_cluster(root)
    spec = small_mlp_spec("mlp-baseline", epochs=3)
    run = cluster.submit(cluster.plan(spec))
    wait_ended(cluster, [run.run_id], "the ddp-tui run", timeout=300)
    cluster.close()
    work = root / "by-hand"
    work.mkdir()
    scheduler = LocalScheduler.from_state_dir(default_state_dir())
    ids = []
    for name, text in BY_HAND:
        (work / name).write_text(text)
        (work / name).chmod(0o755)
        ids.append(scheduler.submit(str(work / name), str(work)))
        if name == "prep.sh":  # ended before the others start
            while not scheduler.poll([ids[0]])[ids[0]].state.is_terminal:
                time.sleep(0.2)
    return ids[1]


async def _shoot(root: Path, out: Path, running: str) -> None:
    from ddp_tui.tui.screens.job import JobScreen
    from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable

    app = local_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.sleep(2)
        await pilot.press("a")
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        deadline = time.monotonic() + 30
        while f"job:{running}" not in table.order:
            if time.monotonic() > deadline:
                raise SystemExit("the jobs by hand were not listed in 30 s")
            await pilot.pause(0.2)
        await asyncio.sleep(3)  # a few lines into the running job's log
        app.save_screenshot("jobs_all.svg", str(out))
        table.move_cursor(table.order.index(f"job:{running}"))
        await pilot.press("enter")
        while not isinstance(app.screen, JobScreen):
            await pilot.pause(0.2)
        await asyncio.sleep(3)
        app.save_screenshot("job_screen.svg", str(out))


def main() -> None:
    out = out_dir()
    with scratch() as root:
        running = _queue(root)
        asyncio.run(_shoot(root, out, running))
    print(f"wrote {out / 'jobs_all.svg'} and {out / 'job_screen.svg'}")


if __name__ == "__main__":
    main()
