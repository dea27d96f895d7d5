"""What a rank has of its node's cores, and the model's compute scaled by it (pure)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from ddp_tui.advisor import SizeRun, advise
from ddp_tui.advisor.cores import (
    CoreShare,
    compute_scale,
    core_share,
    speed,
    thread_gain,
    threads_per_rank,
)
from ddp_tui.advisor.inputs import AdvisorInputs
from ddp_tui.advisor.model import backtest, fit
from tests.advisor.builders import run, table


@pytest.mark.parametrize(
    ("cores", "ranks", "threads"),
    [(2, 1, 2), (2, 2, 1), (4, 2, 2), (64, 8, 8), (10, 3, 3), (1, 2, 1), (4, 8, 1)],
)
def test_threads_are_the_cores_shared_by_the_ranks_at_least_one(
    cores: int, ranks: int, threads: int
) -> None:
    assert threads_per_rank(cores, ranks) == threads


def test_a_rank_has_its_threads_as_far_as_the_cpus_go() -> None:
    assert CoreShare(cores=2, cpus=2, ranks=1, threads=2).per_rank == 2.0
    # Four ranks held to two CPUs: one thread each, half a core each.
    assert CoreShare(cores=2, cpus=2, ranks=4, threads=1).per_rank == 0.5
    # Nothing holds them to the one core asked: two single-threaded ranks on two CPUs.
    assert CoreShare(cores=1, cpus=2, ranks=2, threads=1).per_rank == 1.0


def test_a_torchrun_job_keeps_its_cores_as_ranks_are_added() -> None:
    one = CoreShare(cores=2, cpus=2, ranks=1, threads=2)
    assert one.at(2) == CoreShare(cores=2, cpus=2, ranks=2, threads=1)
    assert one.at(4).per_rank == 0.5
    assert one.at(1) == one


def test_an_srun_job_gets_cores_with_each_task() -> None:
    two = CoreShare(cores=8, cpus=8, ranks=2, threads=4, per_task=True)
    assert two.at(4) == CoreShare(cores=16, cpus=16, ranks=4, threads=4, per_task=True)
    assert two.at(4).per_rank == two.per_rank == 4.0


def test_a_job_not_held_to_its_cores_keeps_the_cpus_it_saw() -> None:
    # Asked 1 core, ran on a 2-CPU machine: its two ranks each had a CPU of their own.
    loose = CoreShare(cores=1, cpus=2, ranks=1, threads=1)
    assert loose.at(2) == CoreShare(cores=1, cpus=2, ranks=2, threads=1)
    assert loose.at(2).per_rank == 1.0 and loose.at(4).per_rank == 0.5


def test_compute_scales_by_the_cores_on_a_cpu_and_not_on_a_gpu() -> None:
    share = CoreShare(cores=2, cpus=2, ranks=1, threads=2)
    assert compute_scale(share, "cpu", 2) == 2.0
    assert compute_scale(share, "cpu", 1) == 1.0
    assert compute_scale(share, "cuda", 2) == 1.0  # a rank has its device
    assert compute_scale(None, "cpu", 2) == 1.0


def test_the_share_is_read_from_run_json_with_the_spec_for_the_rest() -> None:
    spec = {"launcher": "torchrun", "gpus_per_node": 2, "cpus_per_task": 4}
    doc = {"cpu": {"threads": 1, "ranks_on_node": 2, "cpus": 2, "cores": 2}}
    assert core_share(doc, spec) == CoreShare(cores=2, cpus=2, ranks=2, threads=1)
    # A trainer started by hand: no counts from a job script, the spec's ask.
    bare = {"cpu": {"threads": 2, "ranks_on_node": 2, "cpus": None, "cores": None}}
    assert core_share(bare, spec) == CoreShare(cores=4, cpus=4, ranks=2, threads=2)
    srun = {**spec, "launcher": "srun"}
    assert core_share(bare, srun) == CoreShare(cores=8, cpus=8, ranks=2, threads=2, per_task=True)
    # A run that did not record it (a script, an older run): nothing to scale by.
    assert core_share({}, spec) is None
    assert core_share({"cpu": {"threads": "x"}}, spec) is None


def test_what_threads_buy_is_measured_and_scales_the_compute() -> None:
    # Measured here: ResNet-18 at 32x32 ran 1.25 times as fast on two threads as on one.
    measured = CoreShare(2, 2, 1, 2, speedup=1.25)
    assert measured.gain == pytest.approx(math.log(1.25) / math.log(2))
    gain = thread_gain([measured, None, CoreShare(2, 2, 2, 1)])
    assert gain == measured.gain
    # Two ranks of one core each: 1.25 times as long a step as one rank of both, not twice.
    assert compute_scale(measured, "cpu", 2, gain) == pytest.approx(1.25)
    assert compute_scale(measured, "cpu", 4, gain) == pytest.approx(2.5)  # half a core each
    assert thread_gain([]) == thread_gain([None, CoreShare(2, 2, 2, 1)]) == 1.0
    # Held to 0..1: threads that slowed it bought nothing; none buys more than a core.
    assert CoreShare(2, 2, 1, 2, speedup=0.5).gain == 0.0
    assert CoreShare(2, 2, 1, 2, speedup=3.0).gain == 1.0
    assert CoreShare(1, 1, 1, 1, speedup=1.0).gain is None  # one thread measures nothing
    # A share of one core is that share of its time, whatever threads buy.
    assert speed(0.5, 0.3) == 0.5 and speed(4.0, 0.5) == pytest.approx(2.0)


def test_the_speedup_is_read_from_the_calibration() -> None:
    spec = {"launcher": "torchrun", "gpus_per_node": 1, "cpus_per_task": 2}
    doc = {
        "cpu": {"threads": 2, "ranks_on_node": 1, "cpus": 2, "cores": 2},
        "calibration": {"steps": 5, "fwd_bwd_sec": 0.1, "one_thread_fwd_bwd_sec": 0.125},
    }
    share = core_share(doc, spec)
    assert share is not None and share.speedup == pytest.approx(1.25)
    doc["calibration"] = {"steps": 5, "fwd_bwd_sec": 0.1, "one_thread_fwd_bwd_sec": None}
    share = core_share(doc, spec)
    assert share is not None and share.speedup is None


def test_the_backtest_holds_with_what_the_threads_bought() -> None:
    one = run(1, compute=0.09, gamma=1.0, device="cpu", cores=CoreShare(2, 2, 1, 2, speedup=1.25))
    two = run(2, compute=0.09 * 1.25, gamma=1.0, device="cpu", cores=CoreShare(2, 2, 2, 1))
    assert backtest([one, two], [table(2)])["r2"] == pytest.approx(0.0, abs=0.02)
    # Perfect threads would have doubled the compute: too slow by far.
    ideal = backtest([replace(one, cores=CoreShare(2, 2, 1, 2)), two], [table(2)])
    assert ideal["r2"] > 0.3


def _cpu_pair(shared: bool) -> list[SizeRun]:
    """1 and 2 CPU ranks on a 2-core node: one rank with both cores, then two with one each,
    whose steps take twice the compute (``shared``: their run.json said so)."""
    # gamma 1 (no overlap): what the model assumes with no multi-rank run to fit on, so that
    # leaving the 2-rank run out loses nothing else.
    one = run(1, compute=0.09, gamma=1.0, device="cpu", cores=CoreShare(2, 2, 1, 2))
    two = run(
        2,
        compute=0.18,
        gamma=1.0,
        device="cpu",
        cores=CoreShare(2, 2, 2, 1) if shared else None,
    )
    return [one, two]


def test_the_backtest_holds_when_ranks_share_the_cores() -> None:
    runs = _cpu_pair(shared=True)
    errors = backtest(runs, [table(2)])
    assert errors["r2"] == pytest.approx(0.0, abs=0.02)
    assert errors["r1"] == pytest.approx(0.0, abs=0.02)
    # Without the cores it had, the model reads the shared cores' slowdown as nothing.
    one, two = runs
    blind = backtest([replace(one, cores=None), two], [table(2)])
    assert blind["r2"] < -0.3


def test_predictions_and_the_report_carry_the_cores_per_rank() -> None:
    runs = _cpu_pair(shared=True)
    model = fit(runs, [table(2)])
    assert model is not None
    assert model.predict(4, 1).cores_per_rank == 0.5
    advice = advise(AdvisorInputs("g", tuple(runs), (table(2),)))
    # Past the node's 2 ranks a size is whole nodes: 4 is 2 nodes of 2 ranks, 1 core each.
    four = advice.size(4)
    assert four is not None and four.predicted is not None and four.nodes == 2
    assert four.predicted.cores_per_rank == 1.0
    two = advice.size(2)
    assert two is not None and two.predicted is not None and two.predicted.efficiency < 0.55
    assert any("share" in note and "cores" in note for note in advice.notes), advice.notes
    # No run measured what threads buy: perfect threads assumed, and said.
    assert advice.model is not None and advice.model.thread_gain == 1.0
    assert not advice.model.thread_gain_measured


def test_a_gpu_run_is_not_scaled_by_cores() -> None:
    one = run(1, gamma=1.0, device="cuda", cores=CoreShare(8, 8, 1, 8))
    two = run(2, gamma=1.0, device="cuda", cores=CoreShare(8, 8, 2, 4))
    model = fit([one, two], [table(2)])
    assert model is not None and model.predict(4, 1).cores_per_rank is None
    facts = advise(AdvisorInputs("g", (one, two), (table(2),))).model
    assert facts is not None and facts.thread_gain is None
    assert backtest([one, two], [table(2)])["r2"] == pytest.approx(0.0, abs=0.02)
