"""What "one attempt per intent" costs a retry: the locked, intent-first submit against the
bare one it replaced (scheduler submit, then the attempt line).

Both sides submit the same one-line job script of the same run directory to the real local
scheduler, whose only slot a sleeping blocker holds, so every job stays PENDING and nothing
runs. The locked side is ``Cluster.retry`` (lock, read jobs.jsonl, ask the scheduler for the
run's jobs, poll the live ones, check free space, intent, submit, attempt line, unlock) after
cancelling the previous attempt; the bare side is ``scheduler.submit`` + ``append_job`` after
the same cancel. Rounds alternate (bare, locked, bare, ...) so drift hits both alike.
Reported: the median time of each and their ratio per pair (median, geometric mean).

    python benchmarks/bench_submit.py
    python benchmarks/bench_submit.py --rounds 60
    python benchmarks/bench_submit.py --quick    # 3 rounds: proves it runs, no results file
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ddp_tui.config import Profile  # noqa: E402
from ddp_tui.remote.backends.executor import LocalExecutor  # noqa: E402
from ddp_tui.remote.backends.local import LocalScheduler  # noqa: E402
from ddp_tui.remote.backends.local.processes import pid_alive  # noqa: E402
from ddp_tui.remote.cluster import Cluster  # noqa: E402
from ddp_tui.remote.store.history import attempt_record  # noqa: E402
from ddp_tui.remote.store.runs import RunStore  # noqa: E402
from record import Record, add_quick_option  # noqa: E402


def settle(sched: LocalScheduler, timeout: float = 30.0) -> None:
    """Wait until every job's supervisor has recorded its end and exited: a cancelled
    running job's supervisor writes into the state directory after the cancel returns, and
    removing that directory under it fails ("Directory not empty")."""
    deadline = time.monotonic() + timeout
    while any(
        pid_alive(job.supervisor_pid, job.supervisor_start) for job in sched.store.all_jobs()
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the local jobs' supervisors did not exit in {timeout:g} s")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="30; 3 with --quick")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.rounds is None:
        args.rounds = 3 if args.quick else 30
    record = Record("submit", quick=args.quick)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sched = LocalScheduler(str(root / "state"), max_running=1)
        blocker = root / "blocker"
        blocker.mkdir()
        (blocker / "job.sbatch").write_text("#!/bin/bash\nexec sleep 3600\n")
        sched.submit(str(blocker / "job.sbatch"), str(blocker))
        ex = LocalExecutor()
        cluster = Cluster(
            ex,
            sched,
            RunStore(ex, str(root / "runs")),
            profile=Profile(scheduler="local"),
            location="local scheduler",
        )
        ref = cluster.store.create_run({"name": "b"}, "b", "#!/bin/bash\nexec sleep 60\n", None)
        cluster.refresh()
        bare: list[float] = []
        locked: list[float] = []
        seen = 0
        try:
            for _ in range(args.rounds):
                if seen:
                    cluster.cancel(ref.run_id)
                start = time.perf_counter()
                job = sched.submit(ref.file("job.sbatch"), ref.path)
                cluster.store.append_job(ref, attempt_record(job, "local", None, seen + 1))
                bare.append(time.perf_counter() - start)
                seen += 1
                cluster.cancel(ref.run_id)
                start = time.perf_counter()
                cluster.retry(ref.run_id, seen=seen)
                locked.append(time.perf_counter() - start)
                seen += 1
        finally:
            for status in sched.list_jobs():
                if status.state.is_active:
                    sched.cancel(status.job_id)
            settle(sched)
    ratios = [b / a for a, b in zip(bare, locked, strict=True)]
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios))
    print(f"rounds: {args.rounds} (local scheduler, every job held PENDING)")
    print(f"bare submit + attempt line: median {statistics.median(bare) * 1e3:.1f} ms")
    print(f"locked retry (intent first): median {statistics.median(locked) * 1e3:.1f} ms")
    print(
        f"ratio locked/bare per pair: median {statistics.median(ratios):.2f}, geomean {geomean:.2f}"
    )
    record.figure(
        "retry, locked against bare (median)",
        statistics.median(locked),
        statistics.median(bare),
        unit="s",
        note=f"{args.rounds} rounds; reference: scheduler submit + attempt line, no lock",
    )
    record.figure(
        "retry, locked/bare per pair (geometric mean)",
        geomean,
        unit="x",
        note=f"median of the pairs {statistics.median(ratios):.2f}",
    )
    record.save()


if __name__ == "__main__":
    main()
