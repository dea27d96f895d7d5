"""The scaling advisor against reality (issue 22): how far its leave-one-out prediction of a
measured size's epoch time is from what that size measured.

Each round runs, on the embedded local scheduler and one job at a time, the real trainer on
ResNet-18 with 3x32x32 synthetic images on the CPU (gloo) at 1 and 2 processes as one group,
and a real preflight at 2 processes (tests/helpers/advisor_sweep.py, the sweep
tests/integration/test_advisor_local.py runs with fewer steps). Then ``Cluster.advise`` (what
``ddp-tui advise`` prints). Reported per round, for each measured size: the measured steady
epoch time, the epoch time predicted from the other size's run alone (the backtest), their
error, and the breakdown's shares (compute, data wait, exposed all-reduce, other); then the
median error over the rounds. The error of size 2 is the check of reality (this 2-core
machine runs no more than 2 honest processes): issue 22 asks for it within +-30 % here.

    python benchmarks/bench_advisor.py
    python benchmarks/bench_advisor.py --rounds 3 --steps 40 --epochs 4
    python benchmarks/bench_advisor.py --quick   # 1 round of 4 steps x 2 epochs (needs torch)

A full run writes benchmarks/results/advisor.json; a quick run prints the same lines and
writes nothing (its few steps say nothing of the error).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from tests.helpers.advisor_sweep import SIZES, open_local, submit_sweep, wait_ended  # noqa: E402

from ddp_tui.advisor import Advice  # noqa: E402
from ddp_tui.advisor.inputs import PARTS  # noqa: E402
from record import Record, add_quick_option  # noqa: E402

_SHORT = {"compute_sec": "compute", "data_sec": "data", "comm_sec": "comm", "other_sec": "other"}


def one_round(steps: int, epochs: int) -> tuple[Advice, float]:
    """A fresh sweep's advice, and the sweep's wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        cluster = open_local(Path(tmp))
        try:
            start = time.monotonic()
            sweep = submit_sweep(cluster, steps=steps, epochs=epochs, name="bench-advise")
            sweep = wait_ended(cluster, sweep, timeout=1800)
            wall = time.monotonic() - start
            return cluster.advise(sweep.group), wall
        finally:
            cluster.close()


def report(advice: Advice) -> dict[int, tuple[float, float]]:
    """Print the round's rows; by measured size, the backtest error and the measured time."""
    errors: dict[int, tuple[float, float]] = {}
    for n in SIZES:
        size = advice.size(n)
        if size is None or size.measured is None:
            print(f"  size {n}: not measured")
            continue
        measured = size.measured.epoch_time_sec
        err = size.backtest_error
        predicted = "     -" if err is None else f"{measured * (1 + err):6.3f}"
        shares = ""
        if size.measured.breakdown is not None:
            b = size.measured.breakdown
            shares = "  ".join(f"{_SHORT[p]} {b.share(p):4.0%}" for p in PARTS)
        err_text = "     -" if err is None else f"{err:+6.1%}"
        print(
            f"  size {n}: measured {measured:6.3f} s  predicted {predicted} s  "
            f"backtest error {err_text}  |  {shares}"
        )
        if err is not None:
            errors[n] = (err, measured)
    four = advice.size(4)
    if four is not None and four.predicted is not None:
        p = four.predicted
        print(
            f"  size 4 (not run): predicted {p.epoch_time_sec:.3f} s "
            f"[{p.epoch_time_low_sec:.3f}, {p.epoch_time_high_sec:.3f}], "
            f"efficiency {p.efficiency:.0%}"
        )
    rec = advice.recommendation
    print(f"  recommendation: world size {rec.world_size} ({rec.rule}): {rec.reason}")
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30, help="steps per epoch (default 30)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs; the first is warm-up")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps, args.epochs = 1, 4, 2
    record = Record("advisor", quick=args.quick)
    print(
        f"ResNet-18, 3x32x32 synthetic, CPU gloo, batch 32 per process, {args.steps} steps x "
        f"{args.epochs} epochs, sizes {SIZES} + a preflight at 2; {args.rounds} round(s)"
    )
    by_size: dict[int, list[float]] = {n: [] for n in SIZES}
    measured: dict[int, list[float]] = {n: [] for n in SIZES}
    walls: list[float] = []
    for i in range(args.rounds):
        advice, wall = one_round(args.steps, args.epochs)
        walls.append(wall)
        print(f"round {i + 1} ({wall:.0f} s of jobs):")
        for n, (err, epoch) in report(advice).items():
            by_size[n].append(err)
            measured[n].append(epoch)
    print("summary:")
    work = f"{args.steps} steps x {args.epochs} epochs"
    for n, errs in by_size.items():
        if errs:
            worst = max(errs, key=abs)
            print(
                f"  size {n}: median backtest error {statistics.median(errs):+.1%}, "
                f"worst {worst:+.1%} over {len(errs)} round(s)"
            )
            record.figure(
                f"size {n}: backtest error, median of rounds",
                statistics.median(errs) * 100,
                None,
                unit="%",
                note=f"worst {worst:+.1%} over {len(errs)} round(s); {work}"
                + ("; issue 22: within +-30 %" if n == 2 else ""),
            )
            # The prediction beside what the size measured, round by round (ratio 1 + error).
            predicted = [m * (1 + e) for m, e in zip(measured[n], errs, strict=True)]
            record.figure(
                f"size {n}: predicted steady epoch time, against the measured one",
                statistics.median(predicted),
                statistics.median(measured[n]),
                unit="s",
                note=f"medians of {len(errs)} round(s); leave-one-out; {work}",
            )
    record.figure(
        "one sweep's jobs, wall time", statistics.median(walls), None, unit="s", note=work
    )
    record.save()


if __name__ == "__main__":
    main()
