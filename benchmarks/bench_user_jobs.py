"""Every job of the user with 1,000 foreign jobs in the queue, against today's refresh of the same
queue, on the real Slurm test cluster (``tests/fixtures/slurm_cluster.py``, brought up unless it
is up).

The queue: a held job array of N tasks sent with plain sbatch (one sbatch; squeue lists each
task on a line of its own), M array tasks that ran and ended (sacct's window lists them), and
a few ddp-tui runs whose jobs ended (their ends recorded). Both sides go through the facade on
one cluster: ``Cluster.refresh()`` (today's: the runs) and ``Cluster.user_jobs()`` (the runs,
and every other job: one squeue and one sacct in all whatever N, the runs' states taken from
them). Rounds alternate, so drift hits both alike.

Reported: the median time of each side and their ratio pair by pair, the Slurm commands each
side ran (the listing's budget: one squeue and one sacct in all, the refresh's included), the
first listing
(sacct over the whole week) against the next ones (sacct over what changed since), and the
parse of the N-line squeue answer alone.

    python benchmarks/bench_user_jobs.py                 # 1,000 queued, 100 ended, 10 rounds
    python benchmarks/bench_user_jobs.py --queued 1000 --ended 100 --rounds 10
    python benchmarks/bench_user_jobs.py --quick         # 50 queued, 5 ended, 3 rounds

A full run writes benchmarks/results/user_jobs.json; a quick run prints the same lines and
writes nothing. Run by a test that holds the cluster (a pytest session's ``slurm_cluster``), it
uses that cluster as it is (bench_remote.slurm_test_cluster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_array_submit import spec as instant_spec  # noqa: E402
from bench_remote import slurm_test_cluster  # noqa: E402
from ddp_tui.config import Profile  # noqa: E402
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor  # noqa: E402
from ddp_tui.remote.backends.slurm import SlurmScheduler  # noqa: E402
from ddp_tui.remote.backends.slurm.user_jobs import (  # noqa: E402
    parse_user_squeue,
    user_squeue_argv,
)
from ddp_tui.remote.cluster import Cluster  # noqa: E402
from ddp_tui.remote.runs.user_jobs import AllJobs  # noqa: E402
from ddp_tui.remote.store.runs import RunStore  # noqa: E402
from record import Record, add_quick_option  # noqa: E402

#: The Slurm tools whose calls are counted.
TOOLS = ("sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol")


class CountingExecutor(LocalExecutor):
    """The local executor, counting each Slurm tool it runs, in batches too (a counting
    wrapper: every answer is the real one)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        tool = next((a for a in argv if a in TOOLS), None)
        if tool is not None:
            self.calls[tool] += 1
        return super().run(argv, **kwargs)


def wait(what: str, check: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.5)


def timed(fn: Callable[[], Any], ex: CountingExecutor) -> tuple[float, Counter[str], Any]:
    ex.calls.clear()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, Counter(ex.calls), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=None, help="1000; 50 with --quick")
    parser.add_argument("--ended", type=int, default=None, help="100; 5 with --quick")
    parser.add_argument("--runs", type=int, default=None, help="3; 1 with --quick")
    parser.add_argument("--rounds", type=int, default=None, help="10; 3 with --quick")
    add_quick_option(parser)
    args = parser.parse_args()
    quick = args.quick
    queued = args.queued or (50 if quick else 1000)
    ended = args.ended or (5 if quick else 100)
    runs = args.runs or (1 if quick else 3)
    rounds = args.rounds or (3 if quick else 10)
    record = Record("user_jobs", quick=quick)
    with slurm_test_cluster() as slurm, tempfile.TemporaryDirectory(prefix="bench-uj-") as tmp:
        work = Path(tmp) / "by-hand"
        work.mkdir(parents=True)
        Path(tmp).chmod(0o755)
        (work / "true.sh").write_text("#!/bin/bash\ntrue\n")

        def sbatch(*a: str) -> str:
            res = slurm.run(["sbatch", "--parsable", f"--chdir={work}", "-o", "/dev/null", *a])
            if res.returncode != 0:
                raise RuntimeError(res.stderr)
            return res.stdout.strip().split(";")[0]

        ex = CountingExecutor()
        cluster = Cluster(
            ex,
            SlurmScheduler(ex),
            RunStore(ex, str(Path(tmp) / "runs")),
            profile=Profile(scheduler="slurm", check_python=False, partition="debug"),
            location="bench",
        )
        arrays: list[str] = []
        try:
            for _ in range(runs):
                cluster.submit(cluster.plan(instant_spec().replace(name="bench-ours")))
            arrays.append(sbatch("-J", "ran", f"--array=0-{ended - 1}", str(work / "true.sh")))
            arrays.append(
                sbatch("--hold", "-J", "held", f"--array=0-{queued - 1}", str(work / "true.sh"))
            )
            wait("the runs' ends", lambda: all(v.state.is_terminal for v in cluster.refresh().runs))
            wait(
                f"sacct to hold the {ended} tasks that ran",
                lambda: (
                    slurm.run(
                        ["sacct", "-X", "-n", "-P", "-o", "State,WorkDir", "-j", arrays[0]]
                    ).stdout.count(f"COMPLETED|{work}")
                    == ended
                ),
            )

            def own(listing: AllJobs) -> int:
                # This benchmark's jobs: the queue may hold others (the suite's, a user's).
                return sum(1 for job in listing.foreign if job.work_dir == str(work))

            first, first_calls, every = timed(cluster.user_jobs, ex)
            expected = queued + ended
            if own(every) != expected:
                raise RuntimeError(f"listed {own(every)} of this benchmark's jobs, not {expected}")
            others = len(every.foreign) - expected
            t_refresh: list[float] = []
            t_list: list[float] = []
            c_refresh: Counter[str] = Counter()
            c_list: Counter[str] = Counter()
            for r in range(rounds):
                order = ("refresh", "list") if r % 2 == 0 else ("list", "refresh")
                for side in order:
                    if side == "refresh":
                        sec, c_refresh, _ = timed(cluster.refresh, ex)
                        t_refresh.append(sec)
                    else:
                        sec, c_list, every = timed(cluster.user_jobs, ex)
                        t_list.append(sec)
                        assert own(every) == expected
            squeue_text = slurm.run(user_squeue_argv()).stdout
            parse: list[float] = []
            for _ in range(20):
                t0 = time.process_time()
                parsed = parse_user_squeue(squeue_text)
                parse.append(time.process_time() - t0)
            assert len(parsed) >= queued
        finally:
            if arrays:
                slurm.run(["scancel", *arrays])
            cluster.close()

    beyond = Counter(c_list)
    beyond.subtract(c_refresh)
    in_all = sum(c_list.values())
    if c_list != Counter(squeue=1, sacct=1):
        raise RuntimeError(f"a listing ran {dict(c_list)}, not one squeue and one sacct")
    ratios = [a / b for a, b in zip(t_list, t_refresh, strict=True)]
    med_r, med_l = statistics.median(t_refresh), statistics.median(t_list)
    print(
        f"\n{queued} foreign jobs queued (held array), {ended} ended, {runs} ddp-tui runs"
        + (f", and {others} other jobs of the user already there" if others else "")
    )
    print(f"  refresh (today's)        median {med_r * 1000:7.1f} ms  {dict(c_refresh)}")
    print(f"  user_jobs (runs + every) median {med_l * 1000:7.1f} ms  {dict(c_list)}")
    print(
        f"    in all: {in_all} calls (budget: 1 squeue, 1 sacct);"
        f" beyond the refresh: {dict(beyond)}"
    )
    print(
        f"  ratio user_jobs / refresh, pair by pair: {', '.join(f'{x:.2f}' for x in ratios)}"
        f" (median {statistics.median(ratios):.2f})"
    )
    print(
        f"  first listing (sacct over the whole week) {first * 1000:7.1f} ms {dict(first_calls)};"
        f" later ones (sacct over what changed) median {med_l * 1000:.1f} ms"
    )
    print(
        f"  parse of the {queued}-task squeue answer alone: median "
        f"{statistics.median(parse) * 1000:.2f} ms CPU"
    )
    record.figure(
        f"user_jobs with {queued} foreign jobs against today's refresh (median)",
        med_l,
        med_r,
        unit="s",
        note=f"{rounds} rounds, same queue; pair by pair median {statistics.median(ratios):.2f}",
    )
    record.figure(
        "user_jobs: Slurm calls in all, the runs' refresh included",
        in_all,
        2,
        unit="calls",
        note=f"{dict(c_list)}; reference: the budget (one squeue, one sacct)",
    )
    record.figure("first listing (whole window) against a later one", first, med_l, unit="s")
    record.figure(f"parse of a {queued}-task squeue answer", statistics.median(parse), unit="s CPU")
    record.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
