"""A 200-member sweep submitted as one Slurm job array against 200 separate sbatch calls, on
the real Slurm test cluster (``tests/fixtures/slurm_cluster.py``, brought up unless it is up).

Both sides plan the same sweep (``seed`` over N values, so every member asks for the same
resources) and submit it through the facade: the array side with ``Cluster.submit_sweep``
(every run directory, one array script, one sbatch), the separate side with
``Cluster.submit`` per member (every run directory, one sbatch each: what ddp-tui did before
arrays). The jobs' python is ``true``, so the tasks end at once; what is left is cancelled.
Rounds alternate (separate, array, separate, ...), so drift hits both alike.

Reported per side: the median submit time, the scheduler calls that submit made, and the
Slurm commands of the first refresh after it (squeue and sacct; the budget is 2). And the
ratio separate / array, pair by pair.

    python benchmarks/bench_array_submit.py
    python benchmarks/bench_array_submit.py --members 200 --rounds 3
    python benchmarks/bench_array_submit.py --quick   # 5 members, 1 round: seconds

A full run writes benchmarks/results/array_submit.json; a quick run prints the same lines and
writes nothing. Run by a test that holds the cluster (a pytest session's ``slurm_cluster``),
it uses that cluster as it is (bench_remote.slurm_test_cluster).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_remote import slurm_test_cluster  # noqa: E402
from ddp_tui.config import Profile  # noqa: E402
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor  # noqa: E402
from ddp_tui.remote.backends.slurm import SlurmScheduler  # noqa: E402
from ddp_tui.remote.cluster import Cluster  # noqa: E402
from ddp_tui.remote.store.runs import RunStore  # noqa: E402
from ddp_tui.spec import ExperimentSpec, sweep_from_options  # noqa: E402
from record import Record, add_quick_option  # noqa: E402

#: The Slurm tools whose calls are counted.
TOOLS = ("sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol")


class CountingExecutor(LocalExecutor):
    """The local executor, counting each Slurm tool it runs, in batches too."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        #: Seconds spent in each tool's calls.
        self.seconds: Counter[str] = Counter()

    # A batch's commands come through run() too (Executor.run_batch), so they count once.
    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        tool = next((a for a in argv if a in TOOLS), None)
        t0 = time.perf_counter()
        try:
            return super().run(argv, **kwargs)
        finally:
            if tool is not None:
                self.calls[tool] += 1
                self.seconds[tool] += time.perf_counter() - t0


def spec() -> ExperimentSpec:
    return ExperimentSpec(
        name="bench-array",
        model="mlp",
        dataset="synthetic",
        synthetic_samples=64,
        synthetic_shape="1,8,8",
        num_classes=4,
        device="cpu",
        backend="gloo",
        cpus_per_task=1,
        epochs=1,
        workers=0,
        partition="debug",
        time_limit="00:05:00",
        telemetry_sec=0,
        python="true",  # the job ends at once: this measures submitting, not training
    )


def one_side(
    kind: str, members: int, root: Path
) -> tuple[float, float, Counter[str], Counter[str]]:
    """Submit the sweep one way; returns (seconds, of which in sbatch, submit's Slurm calls,
    a refresh's)."""
    ex = CountingExecutor()
    cluster = Cluster(
        ex,
        SlurmScheduler(ex),
        RunStore(ex, str(root / kind)),
        profile=Profile(scheduler="slurm", check_python=False, partition="debug"),
        location="bench",
    )
    sweep = sweep_from_options([f"seed={','.join(str(i) for i in range(members))}"])
    plan = cluster.plan_sweep(spec(), sweep)
    assert plan.ok, plan.errors[:3]
    assert len(plan.arrays) == 1 and len(plan.arrays[0].members) == members
    ex.calls.clear()
    ex.seconds.clear()
    t0 = time.perf_counter()
    if kind == "array":
        views = cluster.submit_sweep(plan)
    else:
        views = [cluster.submit(p) for p in plan.plans]
    seconds = time.perf_counter() - t0
    submit_calls = Counter(ex.calls)
    sbatch_sec = ex.seconds["sbatch"]
    ex.calls.clear()
    cluster.refresh()
    refresh_calls = Counter(ex.calls)
    assert len(views) == members
    group = views[0].group
    assert group is not None
    cluster.cancel_group(group)
    cluster.close()
    return seconds, sbatch_sec, submit_calls, refresh_calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=None, help="200; 5 with --quick")
    parser.add_argument("--rounds", type=int, default=None, help="3; 1 with --quick")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.members is None:
        args.members = 5 if args.quick else 200
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    record = Record("array_submit", quick=args.quick)
    times: dict[str, list[float]] = {"separate": [], "array": []}
    in_sbatch: dict[str, list[float]] = {"separate": [], "array": []}
    calls: dict[str, tuple[Counter[str], Counter[str]]] = {}
    with slurm_test_cluster(), tempfile.TemporaryDirectory(prefix="bench-array-") as tmp:
        for r in range(args.rounds):
            for kind in ("separate", "array"):
                seconds, sbatch_sec, submit_calls, refresh_calls = one_side(
                    kind, args.members, Path(tmp) / f"r{r}"
                )
                times[kind].append(seconds)
                in_sbatch[kind].append(sbatch_sec)
                calls[kind] = (submit_calls, refresh_calls)
                print(
                    f"round {r + 1} {kind:8s} {seconds:7.2f} s, of which sbatch "
                    f"{sbatch_sec:6.2f} s; submit {dict(submit_calls)}",
                    flush=True,
                )
    print(f"\n{args.members} members, {args.rounds} rounds on the Slurm test cluster")
    for kind in ("separate", "array"):
        submit_calls, refresh_calls = calls[kind]
        slurm_refresh = refresh_calls["squeue"] + refresh_calls["sacct"]
        print(
            f"  {kind:8s} submit median {statistics.median(times[kind]):7.2f} s (in sbatch "
            f"{statistics.median(in_sbatch[kind]):6.2f} s), {submit_calls['sbatch']} sbatch; "
            f"the next refresh: {slurm_refresh} Slurm calls "
            f"({dict(refresh_calls)})"
        )
        record.figure(f"{kind}: sbatch calls of the submit", submit_calls["sbatch"], unit="calls")
        record.figure(
            f"{kind}: Slurm calls of the next refresh",
            slurm_refresh,
            2,
            unit="calls",
            note="reference: the budget (squeue and sacct)",
        )
    for what, series in (("submit", times), ("sbatch alone", in_sbatch)):
        ratios = [s / a for s, a in zip(series["separate"], series["array"], strict=True)]
        geo = math.exp(statistics.fmean(math.log(x) for x in ratios))
        print(
            f"  {what}: separate / array, pair by pair: {', '.join(f'{x:.2f}' for x in ratios)}"
            f" (median {statistics.median(ratios):.2f}, geometric mean {geo:.2f})"
        )
        record.figure(
            f"{what}: {args.members} separate sbatch against one array (median)",
            statistics.median(series["separate"]),
            statistics.median(series["array"]),
            unit="s",
            note=f"{args.rounds} rounds; pair by pair: median {statistics.median(ratios):.2f}, "
            f"geometric mean {geo:.2f}",
        )
    record.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
