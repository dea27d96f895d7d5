"""An iteration loop (no epochs): the advisor measures it by its step windows, one optimizer
step for an epoch, the first window (with the start-up) left out like the first epoch, and
advises and backtests on that."""

from __future__ import annotations

import pytest

from ddp_tui.advisor import AdvisorInputs, advise
from ddp_tui.advisor.measure import size_run, window_times
from ddp_tui.advisor.model import backtest
from ddp_tui.advisor.report import advice_markdown
from ddp_tui.reports.results import RunData

BATCH = 8  # samples per rank per step: a loop keeps its batch per rank at every size
EVERY = 100  # steps per window
BUDGET = 1000  # the spec's max_steps
START_UP = 30.0  # seconds the first window pays for imports and set-up


def loop_run(world: int, step_sec: float, *, samples: bool = True, timed: bool = True) -> RunData:
    """Rows as the wrapper writes a loop's windows (``epoch`` empty, ``step`` at the window's
    end), with the window's seconds in ``epoch_time_sec``: the first pays for the start-up."""
    rows = []
    for n in range(1, 6):
        seconds = EVERY * step_sec + (START_UP if n == 1 else 0.0)
        rows.append(
            {
                "epoch": None,
                "step": float(n * EVERY),
                "train_loss": 4.0 - 0.1 * n,
                "epoch_time_sec": seconds if timed else None,
                "throughput_samples_per_sec": BATCH * world / step_sec if samples else None,
                "world_size": float(world),
            }
        )
    spec = {"entry": "script", "nodes": 1, "gpus_per_node": world, "max_steps": BUDGET}
    rj = {"world_size": world, "state": "completed", "max_steps": BUDGET, "steps_completed": 500}
    return RunData(f"loop{world}", spec, rows, rj)


def epoch_run(world: int) -> RunData:
    rows = [
        {"epoch": float(n), "epoch_time_sec": 10.0, "compute_time_sec": 9.0, "world_size": 1.0}
        for n in (1, 2, 3)
    ]
    spec = {"entry": "script", "nodes": 1, "gpus_per_node": world, "epochs": 3}
    return RunData(f"epochs{world}", spec, rows, {"world_size": world})


def test_a_loops_step_is_its_steady_windows_time_per_step() -> None:
    run = size_run(loop_run(2, step_sec=0.12))
    assert run is not None and run.by_steps and run.script
    # The first window's 30 s of start-up is no step's: 12 s over 100 steps is.
    assert run.epoch_time_sec == pytest.approx(0.12)
    assert run.steps_per_epoch == 1
    assert run.throughput == pytest.approx(16 / 0.12)
    assert run.global_batch == BATCH * 2  # samples per step, from the rate and the step time
    assert run.epochs == BUDGET
    assert run.breakdown is not None
    assert run.breakdown.total_sec == pytest.approx(0.12)
    assert "comm_sec" in run.breakdown.inferred


def test_windows_without_their_seconds_give_no_step_time() -> None:
    assert window_times(loop_run(1, 0.1).metrics) is not None
    assert size_run(loop_run(1, 0.1, timed=False)) is None
    # Epoch rows are not windows.
    assert window_times(epoch_run(1).metrics) is None


def test_advice_and_backtest_for_an_iteration_loop() -> None:
    # Per step: 0.1 s of compute, and an all-reduce of 0.02 s at two ranks, 0.03 s at four
    # (the ring's 2(n-1)/n): what the model infers and scales, so the backtest knows the truth.
    runs = tuple(
        r
        for r in (
            size_run(loop_run(1, 0.10)),
            size_run(loop_run(2, 0.12)),
            size_run(loop_run(4, 0.13)),
        )
        if r is not None
    )
    assert len(runs) == 3
    advice = advise(AdvisorInputs("loop", runs, threshold=0.8))
    two = advice.size(2)
    assert two is not None and two.measured is not None and two.measured.breakdown is not None
    assert two.measured.breakdown.comm_sec == pytest.approx(0.02)
    # Efficiency by samples/s: 133 samples/s at two ranks against 80 at one, 83%.
    assert two.measured.efficiency == pytest.approx((16 / 0.12) / (8 / 0.1) / 2)
    four = advice.size(4)
    assert four is not None and four.measured is not None
    assert four.measured.efficiency == pytest.approx((32 / 0.13) / 80 / 4)  # 77%: below 80%
    assert advice.recommendation.world_size == 2
    assert "GPU-hours per step" in advice.recommendation.reason
    # Held out, four ranks are predicted from one and two: the comm scaled by the ring.
    errors = backtest(runs)
    assert errors["loop4"] == pytest.approx(0.0, abs=1e-9)
    assert four.backtest_error == pytest.approx(0.0, abs=1e-9)
    # Two ranks from one and four: four's all-reduce scaled down the ring, exactly.
    assert errors["loop2"] == pytest.approx(0.0, abs=1e-9)
    # One rank from two and four: two is then the smallest, its 0.12 s all compute.
    assert errors["loop1"] == pytest.approx(0.12 / 0.10 - 1)
    eight = advice.size(8)
    assert eight is not None and eight.predicted is not None
    # A step stays a step at eight ranks: 0.1 s + 0.02 x (14/8) s, at 64 samples a step.
    assert eight.predicted.epoch_time_sec == pytest.approx(0.1 + 0.02 * 1.75)
    assert eight.predicted.throughput == pytest.approx(64 / (0.1 + 0.02 * 1.75))
    assert any("iteration loop" in note for note in advice.notes)
    assert "loop4" in advice_markdown(advice)


def test_a_deadline_covers_the_whole_step_budget() -> None:
    runs = tuple(r for r in (size_run(loop_run(1, 0.10)), size_run(loop_run(2, 0.12))) if r)
    # 1000 steps: 100 s on one rank, 120 s on two; one rank meets 110 s and costs the least.
    advice = advise(AdvisorInputs("loop", runs, deadline_sec=110.0))
    assert advice.recommendation.rule == "deadline"
    assert advice.recommendation.world_size == 1
    assert "1000 steps" in advice.recommendation.reason
    late = advise(AdvisorInputs("loop", runs, deadline_sec=50.0))
    assert late.recommendation.reason.startswith("no size runs 1000 steps")


def test_a_loop_without_samples_is_rated_by_its_step_time() -> None:
    one = size_run(loop_run(1, 0.10, samples=False))
    assert one is not None and one.throughput is None and one.global_batch is None
    assert one.epoch_time_sec == pytest.approx(0.1)
    advice = advise(AdvisorInputs("loop", (one,)))
    assert advice.model is not None and advice.model.rate_from == "epoch_time"


def test_steps_and_epochs_are_not_mixed_in_one_advice() -> None:
    loop, epochs = size_run(loop_run(2, 0.12)), size_run(epoch_run(1))
    assert loop is not None and epochs is not None and not epochs.by_steps
    advice = advise(AdvisorInputs("mixed", (loop, epochs)))
    assert [s.measured.run_id for s in advice.sizes if s.measured] == ["epochs1"]
    assert any("left out" in note and "loop2" in note for note in advice.notes)
