"""The scaling advisor's check of reality (issue 22): ResNet-18 on 3x32x32 synthetic images, on
the CPU with gloo, swept over 1 and 2 processes as one group, and a preflight at 2 processes
on the same partition, all real jobs of the real trainer on the embedded local scheduler.

Used by tests/integration/test_advisor_local.py (few steps: the keys and shapes) and by
benchmarks/bench_advisor.py (more steps: the backtest error). The local scheduler runs one
job at a time (the profile's ``local_max_concurrent`` is 1), so no two of them share the cores.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.spec import ExperimentSpec, sweep_from_options

SIZES = (1, 2)
PREFLIGHT_SIZE = 2


def resnet_spec(*, steps: int, epochs: int, name: str = "advise") -> ExperimentSpec:
    """ResNet-18 on 32x32 synthetic images: its 11.7 M parameters make the all-reduce matter.
    ``steps`` per epoch of 32 samples a process; enough samples that no epoch runs short."""
    return ExperimentSpec(
        name=name,
        model="resnet18",
        dataset="synthetic",
        synthetic_shape="3,32,32",
        synthetic_samples=32 * max(SIZES) * steps,
        synthetic_val_samples=64,
        num_classes=10,
        device="cpu",
        backend="gloo",
        nodes=1,
        gpus_per_node=1,
        # cpus_per_task as a user leaves it (4): the local scheduler gives the job no more than
        # the machine's CPUs, and its processes share them as threads (2 threads for 1
        # process on a 2-core machine, 1 each for 2). The advisor's model scales compute by
        # the cores a rank has (docs/advisor.md, "Ranks that share a node's cores").
        epochs=epochs,
        max_steps_per_epoch=steps,
        batch_per_gpu=32,
        lr=0.05,
        schedule="none",
        workers=0,
        time_limit="00:30:00",
        python=sys.executable,
    )


def open_local(tmp: Path) -> Cluster:
    """The facade on the local scheduler, its state where ``ddp-tui`` run with
    ``XDG_STATE_HOME=<tmp>/state`` (tests/integration/test_cli.py's ``cli``) finds it."""
    return Cluster.open(
        Profile(scheduler="local", runs_root=str(tmp / "runs")),
        local_state_dir=str(tmp / "state" / "ddp-tui" / "local"),
    )


@dataclass(frozen=True)
class Sweep:
    group: str
    runs: dict[int, RunView]  # by world size, as they ended
    preflight: RunView


def submit_sweep(cluster: Cluster, *, steps: int, epochs: int, name: str = "advise") -> Sweep:
    """Submit the sweep and the preflight (nothing waits yet); the views as submitted."""
    spec = resnet_spec(steps=steps, epochs=epochs, name=name)
    views = cluster.submit_sweep(
        cluster.plan_sweep(spec, sweep_from_options([",".join(map(str, SIZES))]))
    )
    preflight = cluster.submit(
        cluster.plan(spec.replace(gpus_per_node=PREFLIGHT_SIZE), kind="preflight")
    )
    group = views[0].group
    assert group is not None and all(v.group == group for v in views)
    return Sweep(group, {v.spec.world_size: v for v in views}, preflight)


def wait_ended(cluster: Cluster, sweep: Sweep, timeout: float) -> Sweep:
    """Refresh until every job of the sweep has ended, its preflight's report included;
    raises AssertionError naming the runs that did not complete, with their logs' tails."""
    ids = [v.run_id for v in (*sweep.runs.values(), sweep.preflight)]
    deadline = time.monotonic() + timeout
    while True:
        views = {v.run_id: v for v in cluster.refresh().runs if v.run_id in ids}
        pf = views.get(sweep.preflight.run_id)
        ended = len(views) == len(ids) and all(v.state.is_terminal for v in views.values())
        if ended and pf is not None and pf.preflight is not None and pf.preflight.ok is not None:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the sweep did not end in {timeout:.0f} s: {_states(views)}")
        time.sleep(0.5)
    bad = [v for v in views.values() if v.state is not JobState.COMPLETED]
    if bad:
        tails = {v.run_id: cluster.follow(v.run_id).err_lines[-20:] for v in bad}
        raise AssertionError(f"runs did not complete: {_states(views)}\n{tails}")
    return Sweep(
        sweep.group,
        {n: views[v.run_id] for n, v in sweep.runs.items()},
        views[sweep.preflight.run_id],
    )


def _states(views: dict[str, RunView]) -> str:
    return ", ".join(f"{rid}: {v.state.value}" for rid, v in views.items())
