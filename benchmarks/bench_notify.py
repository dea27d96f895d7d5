"""What notifications cost a refresh: 10,000 ended runs of history and 20 active ones.

Every refresh that polls looks for events to claim (docs/notifications.md): each run's end
records (is one recent and unclaimed?), each group (have all its runs ended?). With years of
history that is work per refresh even when nothing happens. This measures a steady refresh of
the real facade with the notifier on, against the same facade with it off, alternating A B A B
in the same run, and counts the commands the claims add: none in a quiet refresh, one
(a single ``mkdir`` command for all of them) in the refresh where five jobs end.

The history's ends were recorded two days ago (outside the one-hour window: never sent); its
runs are in 50 groups of 200. Slurm's answers are canned (bench_refresh's fake); the run
directories are real files read through the local executor.

    .venv/bin/python benchmarks/bench_notify.py [--history 10000] [--active 20] [--rounds 7]
    .venv/bin/python benchmarks/bench_notify.py --quick   # 500 ended, 10 active, 2 rounds

A full run writes benchmarks/results/notify.json; a quick run prints the same lines and
writes nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_refresh import NEWEST, CannedSlurm, make_store
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.slurm import SEP, SlurmScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from record import Record, add_quick_option


class CountingSlurm(CannedSlurm):
    """The canned Slurm, counting the other commands a refresh runs (the claims)."""

    claims = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        if argv[:1] == ["sh"]:
            self.claims += 1
        return super().run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)


def age_ends(root: Path, when: datetime) -> None:
    """Give every end line a ``recorded_at`` (make_store writes none)."""
    stamp = when.isoformat(timespec="seconds")
    for jobs in root.glob("*/jobs.jsonl"):
        lines = [json.loads(line) for line in jobs.read_text().splitlines() if line]
        for rec in lines:
            if rec.get("event") == "end":
                rec["recorded_at"] = stamp
        jobs.write_text("".join(json.dumps(rec) + "\n" for rec in lines))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=int, default=None, help="10000; 500 with --quick")
    ap.add_argument("--active", type=int, default=None, help="20; 10 with --quick (at least 5)")
    ap.add_argument("--rounds", type=int, default=None, help="7; 2 with --quick")
    add_quick_option(ap)
    args = ap.parse_args(argv)
    for name, full, quick in (("history", 10000, 500), ("active", 20, 10), ("rounds", 7, 2)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    record = Record("notify", quick=args.quick)
    ended, n_active = args.history, args.active
    active = set(range(ended + 1, ended + n_active + 1))
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        root = Path(tmp) / "runs"
        make_store(root, ended, ended=True, name="hist")
        age_ends(root, datetime.now(timezone.utc) - timedelta(days=2))
        make_store(root, n_active - 1, first=ended + 1, name="active")
        make_store(root, 1, first=ended + n_active, name=NEWEST)
        ex = CountingSlurm(max(active), active, set(range(1, ended + 1)))
        cluster = Cluster(
            ex, SlurmScheduler(ex), RunStore(ex, str(root)), profile=Profile(), location="bench"
        )
        for _ in range(3):  # start-up: list, the first poll, the claims of what is recent
            cluster.refresh()
        times: dict[bool, list[float]] = {True: [], False: []}
        ex.claims = 0
        for _ in range(args.rounds):
            for on in (True, False):
                cluster.notifier.enabled = on
                t0 = time.perf_counter()
                cluster.refresh()
                times[on].append(time.perf_counter() - t0)
        quiet_claims = ex.claims
        cluster.notifier.enabled = True
        # Five active jobs end: the next refreshes record and claim them.
        just = set(sorted(active)[:5])
        ex.done |= just
        ex.squeue = "\n".join(
            r for r in ex.squeue.splitlines() if r and int(r.split(SEP, 1)[0]) not in just
        )
        ex.claims = 0
        sent = 0
        for _ in range(4):  # recorded, then the diagnosis's wait, then claimed
            sent += len(cluster.refresh().events)
        ending_claims = ex.claims
        cluster.close()
    with_on, with_off = statistics.median(times[True]), statistics.median(times[False])
    ratios = [a / b for a, b in zip(times[True], times[False], strict=True)]
    print(
        f"notify: {ended} ended runs of history (50 groups), {n_active} active, "
        f"{args.rounds} rounds A B"
    )
    print(f"  steady refresh, notifier on:  median {with_on * 1000:.1f} ms")
    print(f"  steady refresh, notifier off: median {with_off * 1000:.1f} ms")
    print(f"  ratio on/off: median {statistics.median(ratios):.2f} (pair by pair)")
    print(f"  claim commands in {2 * args.rounds} quiet refreshes: {quiet_claims}")
    # Each of those five completes its group too (its other members are history).
    print(f"  five jobs end: {sent} events sent, {ending_claims} claim command(s)")
    print(
        f"RESULT notify_ratio={statistics.median(ratios):.2f} quiet_claims={quiet_claims} "
        f"ending_claims={ending_claims} sent={sent}"
    )
    setup = f"{ended} ended runs of history, {n_active} active, {args.rounds} rounds A B"
    record.figure(
        "steady refresh, notifier on against off (median)",
        with_on,
        with_off,
        unit="s",
        note=f"{setup}; ratio pair by pair: median {statistics.median(ratios):.2f}",
    )
    record.figure(
        "claim commands in the quiet refreshes",
        quiet_claims,
        unit="commands",
        note=f"{2 * args.rounds} quiet refreshes; expected 0",
    )
    record.figure(
        "claim commands when five jobs end",
        ending_claims,
        unit="commands",
        note=f"expected 1 (one mkdir command for every claim); {sent} events sent",
    )
    record.save()


if __name__ == "__main__":
    main()
