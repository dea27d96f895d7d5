"""The scaling model's parts against the equations they implement."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from ddp_tui.advisor import Breakdown, SizeRun
from ddp_tui.advisor.fabric import Link, allreduce_sec, fit_link, probe_link, ring_factor
from ddp_tui.advisor.model import (
    GAMMA_MAX,
    Overlap,
    backtest,
    fit,
    fit_gamma,
    fit_overlap,
    infer_comm,
    together,
)
from tests.advisor.builders import GRAD, LINK, run, table


def test_ring_factor_is_nccl_tests_bus_bandwidth_factor() -> None:
    assert ring_factor(1) == 0.0
    assert ring_factor(2) == 1.0
    assert ring_factor(8) == pytest.approx(1.75)


def test_allreduce_follows_alpha_beta() -> None:
    assert allreduce_sec(LINK, 1, GRAD) == 0.0
    # 2(n-1) latencies per message, and each link carries 2(n-1)/n of the bytes.
    expect = 3 * 2 * 3 * LINK.alpha_sec + 1.5 * GRAD / LINK.beta_bytes_per_sec
    assert allreduce_sec(LINK, 4, GRAD, messages=3) == pytest.approx(expect)


def test_fit_link_recovers_alpha_and_beta_from_a_preflight_table() -> None:
    link = fit_link(table(4), "intra-node", around_bytes=16 * 2**20)
    assert link is not None
    assert link.beta_bytes_per_sec == pytest.approx(LINK.beta_bytes_per_sec, rel=0.02)
    # alpha is read from the smallest messages, where bandwidth still adds a little.
    assert LINK.alpha_sec <= link.alpha_sec < 1.2 * LINK.alpha_sec
    assert "pf4" in link.source


def test_probe_link_is_the_bus_bandwidth_of_one_message() -> None:
    link = probe_link("r2", 2, (24_000_000, 0.02), "intra-node")
    assert link is not None and link.busbw_gbps == pytest.approx(1.2)
    assert probe_link("r1", 1, (24_000_000, 0.02), "intra-node") is None


@pytest.mark.parametrize("gamma", [1.0, 1.5, 2.0, 4.0, 9.0])
def test_fit_gamma_inverts_the_overlap(gamma: float) -> None:
    compute, comm = 0.09, 0.04
    exposed = together(compute, comm, gamma) - compute
    assert fit_gamma(compute, comm, exposed) == pytest.approx(gamma, rel=1e-3)


def test_overlap_runs_from_sum_to_max() -> None:
    assert together(0.09, 0.04, 1.0) == pytest.approx(0.13)
    assert together(0.09, 0.04, GAMMA_MAX) == pytest.approx(0.09)
    assert fit_gamma(0.09, 0.04, 0.05) == 1.0  # worse than no overlap: clamp
    assert fit_gamma(0.09, 0.04, 0.0) == GAMMA_MAX


def test_a_group_that_follows_the_model_backtests_to_zero() -> None:
    runs = [run(1), run(2), run(4)]
    errors = backtest(runs, [table(4)])
    assert set(errors) == {"r1", "r2", "r4"}
    for error in errors.values():
        assert error is not None and abs(error) < 0.01


def test_the_model_predicts_an_unmeasured_size_and_fits_gamma() -> None:
    model = fit([run(1), run(2, gamma=3.0)], [table(2)])
    assert model is not None and model.fitted
    assert model.overlap.gamma == pytest.approx(3.0, rel=0.05)
    assert model.overlap.slowdown == 1.0
    truth = run(8, gamma=3.0)
    est = model.predict(8, 1)
    assert est.epoch_time_sec == pytest.approx(truth.epoch_time_sec, rel=0.01)
    assert est.link == "intra-node"


def test_without_a_multi_rank_run_gamma_is_not_fitted() -> None:
    model = fit([run(1)], [table(2)])
    assert model is not None and not model.fitted
    # No overlap assumed: the prediction is the slow end.
    slow = model.predict(2, 1)
    fast = model.predict(2, 1, overlap=Overlap(GAMMA_MAX))
    assert slow.epoch_time_sec > fast.epoch_time_sec


def test_steps_scale_with_the_sharded_dataset_and_respect_the_cap() -> None:
    model = fit([run(1), run(2)], [table(2)])
    assert model is not None
    ref = model.reference(4)
    assert model.steps(ref, 4) == 100  # 12800 samples / 4 ranks / 32 per batch
    capped = fit([run(1, max_steps_per_epoch=50)], [table(2)])
    assert capped is not None
    assert capped.steps(capped.reference(4), 4) == 50


def test_a_scripts_comm_is_inferred_from_its_extra_step_time() -> None:
    # A script measures its data wait; compute holds everything else (all-reduce included).
    def as_script(r: SizeRun) -> SizeRun:
        b = r.breakdown
        assert b is not None
        merged = b.compute_sec + b.comm_sec + b.other_sec
        inferred = ("compute_sec", "comm_sec", "other_sec")
        return replace(r, breakdown=Breakdown(merged, b.data_sec, 0.0, 0.0, inferred), script=True)

    one, two = as_script(run(1, rest=0.0)), as_script(run(2, rest=0.0))
    inferred = infer_comm([one, two])
    truth = run(2, rest=0.0)
    assert inferred[0].breakdown is not None and inferred[0].breakdown.comm_sec == 0.0
    assert "comm_sec" not in inferred[0].breakdown.inferred  # one rank: no all-reduce at all
    b = inferred[1].breakdown
    assert b is not None and "comm_sec" in b.inferred
    assert truth.breakdown is not None
    assert b.comm_sec == pytest.approx(truth.breakdown.comm_sec, rel=1e-6)
    assert math.isclose(b.total_sec, truth.breakdown.total_sec, rel_tol=1e-9)


def test_an_allreduce_slower_than_the_wire_is_fitted_as_a_slowdown() -> None:
    # Exposed 3x the wire's time: no overlap cannot explain it; the training's all-reduce ran
    # slower than the preflight's (sharing the CPU with the compute).
    fitted = fit_overlap(0.09, 0.04, 0.12)
    assert fitted.gamma == 1.0 and fitted.slowdown == pytest.approx(3.0)
    assert fit_overlap(0.09, 0.04, 0.0).slowdown == 1.0
    slowed = Link(LINK.alpha_sec * 3, LINK.beta_bytes_per_sec / 3, "intra-node", "slowed")
    runs = [run(1), run(2, gamma=1.0, link=slowed)]
    model = fit(runs, [table(2)])
    assert model is not None and model.fitted
    assert model.overlap.slowdown == pytest.approx(3.0, rel=0.01)
    # It reproduces the run it was fitted on, and carries the slowdown to other sizes.
    assert model.predict(2, 1).epoch_time_sec == pytest.approx(runs[1].epoch_time_sec, rel=1e-6)
    truth = run(8, gamma=1.0, link=slowed)
    assert model.predict(8, 1).epoch_time_sec == pytest.approx(truth.epoch_time_sec, rel=0.01)
