"""The loss from the inside, and the steps, samples and tokens of any loop
(ddp_tui.scriptrun.observe.loss and the totals of the ``step`` record): the bookkeeping alone
(plain floats stand in for the device tensors), then a real torch script in nanoGPT's idiom
whose own printed losses the observed ones must equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.scriptrun.observe import BOOT_DIR
from ddp_tui.scriptrun.observe.loss import LossMeter, input_size
from tests.scriptrun.test_observe import SCRIPTS, SRC, observer, records


def steps(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in records(run_dir) if r["kind"] == "step"]


def test_an_iteration_loop_with_no_loader_writes_step_records_with_its_totals(
    tmp_path: Path,
) -> None:
    obs, clock = observer(tmp_path)
    for it in range(5):
        for _ in range(4):  # gradient accumulation: the script divides each loss by 4
            obs.forward_input(2, 2 * 16)
            obs.backward((1.0 + it) / 4)
        clock.now += 0.3  # the first step writes a record, then at most one a second
        obs.step(lr=0.01 * (it + 1))
    obs.final()
    found = steps(tmp_path)
    assert [r["epoch"] for r in found] == [None, None, None]
    assert [r["steps_total"] for r in found] == [1, 5, 5]
    assert [r["step"] for r in found] == [1, 5, 5]
    assert [r["samples_total"] for r in found] == [8, 40, 40]
    assert [r["tokens_total"] for r in found] == [128, 640, 640]
    # The full-batch loss of each step (1, 2, ...), meaned over each record's steps.
    assert [(r["loss"], r["loss_steps"]) for r in found] == [(1.0, 1), (3.5, 4), (None, 0)]
    assert [r["lr"] for r in found] == [0.01, 0.05, 0.05]
    assert found[1]["samples_per_sec"] == pytest.approx(32 / 1.2)
    assert found[-1]["final"] is True and "final" not in found[1]
    assert found[1]["t"] == pytest.approx(101.5)
    obs.final()  # at exit once: atexit after an os._exit's flush writes nothing more
    assert len(steps(tmp_path)) == 3


def test_a_forked_child_at_its_exit_leaves_its_parents_loss_alone(tmp_path: Path) -> None:
    obs, _ = observer(tmp_path)
    obs.backward(1.0)
    obs.step()
    obs.backward(1.0)  # a window a forked DataLoader worker inherits, with the step after it
    obs.step()

    def read(_: Any) -> float:
        raise AssertionError("a child read its parent's device tensors")

    obs.loss.read = read
    obs.journal.pid = os.getpid() + 1  # fake: the journal is its parent's
    obs.final()
    assert len(steps(tmp_path)) == 1 and not obs.finished


def test_a_loader_fed_step_counts_the_loaders_samples_once_and_the_models_tokens(
    tmp_path: Path,
) -> None:
    obs, clock = observer(tmp_path)
    for _ in range(3):
        obs.batch(1, 8, 0.0)  # a DataLoader's batch of 8 ...
        obs.forward_input(8, 8 * 10)  # ... is the model's input: the same samples
        obs.backward(2.0)
        clock.now += 0.1
        obs.step()
    obs.exhausted(1)
    obs.final()
    first, last = steps(tmp_path)
    assert (first["epoch"], first["samples_total"], first["tokens_total"]) == (0, 8, 80)
    assert (last["epoch"], last["samples_total"], last["tokens_total"]) == (None, 24, 240)
    epochs = [r for r in records(tmp_path) if r["kind"] == "epoch"]
    assert [(e["steps"], e["samples"]) for e in epochs] == [(3, 24)]
    assert obs.input_wanted  # the model's input holds tokens: its hook stays


def test_an_epochs_record_holds_its_mean_step_loss_and_the_step_records_lose_none(
    tmp_path: Path,
) -> None:
    obs, clock = observer(tmp_path)
    for it, losses in ((1, (4.0, 2.0, 3.0)), (2, (1.0, 1.0))):  # two loader passes
        for loss in losses:
            obs.batch(it, 8, 0.0)
            obs.backward(loss)
            clock.now += 0.4
            obs.step()
        obs.exhausted(it)
    obs.final()
    epochs = [r for r in records(tmp_path) if r["kind"] == "epoch"]
    assert [(e["epoch"], e["loss"]) for e in epochs] == [(0, 3.0), (1, 1.0)]
    # Each step's loss is in exactly one step record, the epoch's close notwithstanding.
    found = [(r["loss"], r["loss_steps"]) for r in steps(tmp_path) if r["loss_steps"]]
    assert sum(n for _, n in found) == 5
    assert sum(loss * n for loss, n in found) == pytest.approx(11.0)


def test_the_model_input_hook_is_dropped_where_a_loader_feeds_steps_and_there_are_no_tokens(
    tmp_path: Path,
) -> None:
    obs, _ = observer(tmp_path)
    for _ in range(3):
        obs.batch(1, 8, 0.0)
        obs.forward_input(8, None)  # images: samples the loader counts already, no tokens
        obs.backward(1.0)
        assert obs.input_wanted
        obs.step()
    assert not obs.input_wanted


def test_a_second_optimizer_on_the_same_backward_is_the_same_step_and_a_skip_still_ends_one(
    tmp_path: Path,
) -> None:
    obs, _ = observer(tmp_path)
    obs.backward(4.0)
    obs.step()
    obs.step()  # a second optimizer, after the same backward
    obs.backward(6.0)
    obs.skipped_step()  # a GradScaler skipped the step (inf gradients): no optimizer step
    obs.backward(8.0)
    obs.step()
    obs.final()
    (first, last) = steps(tmp_path)
    assert (first["steps_total"], last["steps_total"]) == (1, 2)
    assert (last["loss"], last["loss_steps"]) == (7.0, 2)  # the skipped iteration's loss counts
    assert obs.optimizer_steps == 3
    assert last["samples_total"] is None  # no loader, no model input seen: unknown


def test_a_window_leaves_an_unfinished_steps_micro_losses_to_it() -> None:
    meter = LossMeter()
    meter.backward(1.0)
    assert meter.step()
    meter.backward(0.25)  # a micro-step of the next step, not finished at the read
    assert meter.window() == (1.0, 1)
    meter.backward(0.25)
    meter.step()
    assert meter.window() == (0.5, 1)
    assert meter.window() == (None, 0)


def test_the_meter_folds_its_values_so_a_long_window_holds_few() -> None:
    folds: list[int] = []

    def fold(values: list[Any]) -> float:
        folds.append(len(values))
        return float(sum(values))

    meter = LossMeter(fold=fold)
    for _ in range(1000):
        meter.backward(0.5)
        meter.step()
    assert len(meter.closed) < 256 and folds and max(folds) <= 256
    assert meter.window() == (0.5, 1000)
    for _ in range(1000):  # backward() with no optimizer step, ever: still few values held
        meter.backward(0.5)
    assert len(meter.open) < 256
    meter.step()
    assert meter.window() == (500.0, 1)


class FakeDtype:  # the parts of a torch.dtype that input_size reads
    def __init__(self, floating: bool) -> None:
        self.is_floating_point, self.is_complex = floating, False


class FakeTensor:  # a shape and a dtype, as a tensor has
    def __init__(self, shape: tuple[int, ...], floating: bool = False) -> None:
        self.shape, self.dtype = shape, FakeDtype(floating)


def test_token_ids_of_two_dimensions_count_tokens_and_images_only_samples() -> None:
    assert input_size(FakeTensor((4, 128))) == (4, 512)
    assert input_size(FakeTensor((4, 3, 32, 32), floating=True)) == (4, None)
    assert input_size(FakeTensor((4,))) == (4, None)
    assert input_size(FakeTensor(())) == (None, None)
    assert input_size(None) == (None, None)


def observed_run(run_dir: Path, args: list[str]) -> tuple[list[Any], list[dict[str, Any]]]:
    """Run loss_inside.py observed, as ddp-tui's wrapper starts a script: its printed lines,
    and the step records, whose losses are checked against the script's own figures."""
    pytest.importorskip("torch")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(BOOT_DIR), str(SRC)]),
        DDP_TUI_OBSERVE="1",
        DDP_TUI_RUN_DIR=str(run_dir),
        OMP_NUM_THREADS="1",
    )
    cmd = [sys.executable, str(SCRIPTS / "loss_inside.py"), *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "global hooks" not in out.stderr  # no warning of ours in the script's output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    printed = [line["loss"] for line in lines if "loss" in line]
    assert not [r for r in records(run_dir) if r["kind"] == "note"]
    found = steps(run_dir)
    # Each record's loss is the mean of the script's own figures over the steps it covers.
    done = 0
    for record in found:
        covered = printed[done : done + record["loss_steps"]]
        done += record["loss_steps"]
        assert record["steps_total"] == done
        if covered:
            assert record["loss"] == pytest.approx(sum(covered) / len(covered), rel=1e-5)
    assert done == len(printed) and found[-1].get("final") is True
    return lines, found


@pytest.mark.torch
def test_a_model_compiled_in_place_keeps_its_graph_and_its_loss_is_observed(
    tmp_path: Path,
) -> None:
    """``model.compile()`` makes torch.compile trace the model's hooks, ours included: they
    must fold away (no graph break), and the loss is still read from backward()."""
    lines, found = observed_run(tmp_path, ["--iters", "4", "--micro", "2", "--compile"])
    assert lines[-1] == {"graph_breaks": 0}
    assert found[-1]["steps_total"] == 4
    assert found[-1]["tokens_total"] is None  # the compiled model's input is not seen


@pytest.mark.torch
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--micro", "4"], id="accumulate-4"),
        pytest.param(["--micro", "4", "--scaler"], id="accumulate-4-gradscaler"),
        pytest.param(["--micro", "1", "--scaler", "--second-optimizer"], id="two-optimizers"),
    ],
)
def test_the_observed_loss_equals_what_the_script_prints(tmp_path: Path, args: list[str]) -> None:
    iters = 12
    printed, found = observed_run(tmp_path, ["--iters", str(iters), *args])
    assert len(printed) == iters
    micro = int(args[1])
    # The model's input is (3, 4) token ids per micro-step; the evaluation's (64, 5) under
    # no_grad is neither samples nor tokens.
    assert found[-1]["samples_total"] == iters * micro * 3
    assert found[-1]["tokens_total"] == iters * micro * 3 * 4
    assert found[-1]["lr"] == pytest.approx(3e-3)
