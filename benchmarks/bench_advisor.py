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


def report(advice: Advice) -> dict[int, float]:
    """Print the round's rows; the backtest error by measured size."""
    errors: dict[int, float] = {}
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
            errors[n] = err
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
    args = parser.parse_args()
    print(
        f"ResNet-18, 3x32x32 synthetic, CPU gloo, batch 32 per process, {args.steps} steps x "
        f"{args.epochs} epochs, sizes {SIZES} + a preflight at 2; {args.rounds} round(s)"
    )
    by_size: dict[int, list[float]] = {n: [] for n in SIZES}
    for i in range(args.rounds):
        advice, wall = one_round(args.steps, args.epochs)
        print(f"round {i + 1} ({wall:.0f} s of jobs):")
        for n, err in report(advice).items():
            by_size[n].append(err)
    print("summary:")
    for n, errs in by_size.items():
        if errs:
            worst = max(errs, key=abs)
            print(
                f"  size {n}: median backtest error {statistics.median(errs):+.1%}, "
                f"worst {worst:+.1%} over {len(errs)} round(s)"
            )


if __name__ == "__main__":
    main()
