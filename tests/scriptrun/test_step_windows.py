"""Steps beside epochs: a script with no epochs (an iteration loop) gets one metrics.csv row per
logged window, progress by steps of its budget, and a verify that checks its windows, never an
epoch count nobody asked for."""

from __future__ import annotations

import csv
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.verification import WINDOWS_CHECK, training_checks
from ddp_tui.remote.model.views import RunView
from ddp_tui.sbatch_templates import script_launch_args
from ddp_tui.scriptrun.budget import steps_budget
from ddp_tui.scriptrun.presets import parse_step_line
from ddp_tui.scriptrun.records import StepRecord
from ddp_tui.scriptrun.rows import EpochNumbering, MetricsFile
from ddp_tui.scriptrun.stream import StdoutParser
from ddp_tui.scriptrun.windows import HOLD_SEC, OWN_WINDOW_SEC, StepWindows
from ddp_tui.spec import ExperimentSpec, check_form, validate
from ddp_tui.tui.run_summary import progress_text

from .test_runner import env, rows, run_json

SCRIPT = ExperimentSpec(
    name="it", entry="script", script="train.py", epochs=None, nodes=1, gpus_per_node=2
)


# -- the script's lines ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "step", "values"),
    [
        ("iter 100: loss 4.2340, time 20.51ms", 100, {"train_loss": 4.234}),
        ("step 500: train loss 4.1, val loss 4.3", 500, {"train_loss": 4.1, "val_loss": 4.3}),
        ("INFO:root:step 3 | loss 2.5 | lr 1e-3", 3, {"train_loss": 2.5, "lr": 0.001}),
        ("[step 7/60] loss: 0.5 tokens/s: 1200", 7, {"train_loss": 0.5, "tokens_per_sec": 1200}),
    ],
)
def test_an_iteration_loops_lines_are_steps_with_no_epoch(
    line: str, step: int, values: dict[str, float]
) -> None:
    record = parse_step_line(line)
    assert record is not None and record.epoch is None and record.step == step, record
    assert record.values == pytest.approx(values)


@pytest.mark.parametrize(
    "line",
    [
        "Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.3",  # an epoch's progress: the epoch presets'
        "iter 100",  # no value
        "number of parameters: 0.05M",
        "this iteration is slow 3",
    ],
)
def test_other_lines_are_no_step_windows(line: str) -> None:
    assert parse_step_line(line) is None


def test_the_stdout_parser_finds_step_lines_among_the_others() -> None:
    out = StdoutParser("auto").feed(
        b"tokens per iteration will be: 256\niter 0: loss 3.5, time 5.0ms\n"
        b"step 20: train loss 2.6, val loss 2.7\n"
    )
    steps = [(r.step, r.epoch) for r in out if isinstance(r, StepRecord)]
    assert steps == [(0, None), (20, None)], out


@pytest.mark.parametrize(
    ("args", "budget"),
    [
        (["train.py", "--max_iters=600"], 600),
        (["train.py", "--max-steps", "450"], 450),
        (["-m", "pkg.train", "trainer.max_steps=90", "--lr", "3"], 90),
        (["train.py", "--num-iterations", "5", "--total-steps=7"], 7),
        (["train.py", "--epochs", "3"], None),
        (["train.py", "--max_iters=0"], None),
        (["train.py", "--max_iters=lots"], None),
    ],
)
def test_the_step_budget_is_read_from_the_scripts_arguments(
    args: list[str], budget: int | None
) -> None:
    assert steps_budget(args) == budget


# -- windows from lines and the journal's counters -------------------------------------------


def counters(t: float, steps: int, loss: float | None = None, **more: Any) -> dict[str, Any]:
    return {
        "kind": "step", "t": t, "epoch": None, "steps_total": steps,
        "samples_total": steps * 8, "tokens_total": steps * 8 * 16, "loss": loss,
        "loss_steps": 10, "lr": 0.01, **more,
    }  # fmt: skip


def test_a_logged_window_waits_for_the_journal_that_covers_it_and_takes_its_rates() -> None:
    w = StepWindows()
    w.world_size = 2
    assert w.journal(counters(100.0, 1), now=100.0) == []
    # The script's line at t=101: held until a journal record at or after it.
    assert w.line(StepRecord(step=10, loss=3.0, values={"train_loss": 3.0}), now=101.0) == []
    (window,) = w.journal(counters(102.0, 11, loss=2.9), now=102.0)
    assert window.step == 10
    assert window.values["train_loss"] == 3.0  # the script's own figure wins
    # 10 steps of 8 samples of 16 tokens in 2 s on each of 2 ranks.
    assert window.values["throughput_samples_per_sec"] == pytest.approx(80.0)
    assert window.values["tokens_per_sec"] == pytest.approx(1280.0)
    assert window.values["lr"] == 0.01
    assert w.steps_completed == 11


def test_windows_read_after_the_journal_ran_ahead_each_take_their_own_steps() -> None:
    # A busy node: the wrapper reads the script's lines late, after the journal's records
    # for the steps that followed them. Each window still gets the steps up to its own
    # line, not the first window all of them and the last none.
    w = StepWindows()
    w.journal(counters(100.0, 1), now=100.0)
    for t, steps in ((102.0, 11), (103.0, 20), (104.0, 21)):
        assert w.journal(counters(t, steps), now=t) == []
    # Step 10's line, read at 103.5, is covered by the records already read: due at once.
    (first,) = w.line(StepRecord(step=10, loss=3.0, values={"train_loss": 3.0}), now=103.5)
    assert w.line(StepRecord(step=20, loss=2.0, values={"train_loss": 2.0}), now=105.0) == []
    (second,) = w.finish(now=106.0)
    assert (first.step, second.step) == (10, 20)
    # Steps 1 to 11, 8 samples each, in 2 s; then 11 to 20 in 1 s.
    assert first.values["throughput_samples_per_sec"] == pytest.approx(40.0)
    assert second.values["throughput_samples_per_sec"] == pytest.approx(72.0)
    # Each window's own steps at its interval's pace: 9 steps at 0.2 s, 10 at 1/9 s.
    assert first.values["epoch_time_sec"] == pytest.approx(1.8)
    assert second.values["epoch_time_sec"] == pytest.approx(10 / 9)


def test_windows_faster_than_the_journal_share_its_interval() -> None:
    # A quick loop: every line between two records (at most one a second). Each window
    # gets the interval's rates, and its own length from its steps.
    w = StepWindows()
    w.journal(counters(100.0, 1), now=100.0)
    for step, t in ((10, 100.02), (20, 100.04), (30, 100.06)):
        assert w.line(StepRecord(step=step, loss=1.0, values={"train_loss": 1.0}), now=t) == []
    windows = w.journal(counters(100.5, 31, final=True), now=100.5)
    assert [x.step for x in windows] == [10, 20, 30]
    for x in windows:
        assert x.values["throughput_samples_per_sec"] == pytest.approx(30 * 8 / 0.5)
    assert [round(x.values["epoch_time_sec"], 4) for x in windows] == [0.15, 0.1667, 0.1667]


def test_an_evaluation_line_joins_the_window_of_its_step() -> None:
    w = StepWindows()
    w.line(StepRecord(step=20, loss=2.6, values={"train_loss": 2.6, "val_loss": 2.7}), now=1.0)
    w.line(StepRecord(step=20, loss=2.5, values={"train_loss": 2.5}), now=1.1)
    (window,) = w.due(now=1.0 + HOLD_SEC)  # no journal (observe off): held at most HOLD_SEC
    assert window.values == {"train_loss": 2.5, "val_loss": 2.7}
    assert w.steps_completed == 20  # counted from its first logged step (20, not 0)


def test_a_script_that_logs_nothing_gets_windows_of_its_own_from_the_journal() -> None:
    w = StepWindows()
    assert w.journal(counters(0.0, 5, loss=3.0), now=0.0) == []
    assert w.journal(counters(OWN_WINDOW_SEC / 2, 50, loss=2.0), now=1.0) == []
    (first,) = w.journal(counters(OWN_WINDOW_SEC, 100, loss=1.0), now=2.0)
    assert first.step == 100
    assert first.values["train_loss"] == pytest.approx(2.0)  # the mean over its records
    assert first.values["throughput_samples_per_sec"] == pytest.approx(95 * 8 / OWN_WINDOW_SEC)
    w.journal(counters(OWN_WINDOW_SEC + 1, 110, loss=0.5, final=True), now=3.0)
    (last,) = w.finish(now=4.0)
    assert last.step == 110 and last.values["train_loss"] == 0.5
    assert w.finish(now=5.0) == []  # nothing new since


def test_records_inside_an_epoch_make_no_windows() -> None:
    w = StepWindows()
    assert w.journal(counters(0.0, 5, epoch=0), now=0.0) == []
    assert w.finish(now=1.0) == [] and w.steps_completed is None


# -- metrics.csv ----------------------------------------------------------------------------


def metrics_file(path: Path) -> MetricsFile:
    return MetricsFile(path, EpochNumbering(None, lambda _: None), world_size=2)


def test_windows_are_rows_with_a_step_and_no_epoch_and_survive_a_requeue(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    m = metrics_file(path)
    assert m.add_window(0, {"train_loss": 3.5})
    assert m.add_window(10, {"train_loss": 3.0, "throughput_samples_per_sec": 80.0})
    assert m.add_window(10, {"val_loss": 3.1})  # a late evaluation: the same row
    assert not m.add_window(10, {"val_loss": 3.1})
    with path.open(newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [(r["epoch"], r["step"], r["train_loss"], r["val_loss"]) for r in got] == [
        ("", "0", "3.5", ""),
        ("", "10", "3", "3.1"),
    ]
    again = metrics_file(path)  # the next attempt keeps them and goes on
    assert again.windows_written == 2 and again.epochs_completed == 0
    again.add_window(20, {"train_loss": 2.0})
    again.forget_windows()  # the script has epochs after all: only its own windows go
    assert sorted(again.windows) == [0, 10]


# -- the spec, the job, verify and the tables ------------------------------------------------


def test_epochs_are_optional_for_a_script_and_required_for_the_trainer() -> None:
    spec, errors = check_form({"entry": "script", "script": "train.py"})
    assert not errors and spec is not None and spec.epochs is None
    spec, errors = check_form({"entry": "script", "script": "train.py", "epochs": "3"})
    assert spec is not None and spec.epochs == 3
    assert ExperimentSpec().epochs == 10  # the trainer's default, as before
    (error,) = validate(ExperimentSpec(epochs=None))
    assert error.field == "epochs" and "required for the trainer" in error.message
    (error,) = validate(replace(SCRIPT, max_steps=0))
    assert error.field == "max_steps" and "from 1 to" in error.message


def test_the_job_passes_the_budget_and_no_epochs_to_the_wrapper() -> None:
    args = script_launch_args(replace(SCRIPT, max_steps=600), "/runs/r")
    assert "--epochs" not in args and args[args.index("--max-steps") + 1] == "600"
    assert "--epochs" in script_launch_args(replace(SCRIPT, epochs=3), "/runs/r")


def window_rows(*steps: int) -> list[dict[str, float | None]]:
    return [{"epoch": None, "step": float(s), "train_loss": 1.0} for s in steps]


def rows_check(run: dict[str, Any], metrics: list[dict[str, float | None]]) -> Any:
    epochs = [int(r["epoch"]) for r in metrics if r["epoch"] is not None]
    windows = [int(r["step"] or 0) for r in metrics if r["epoch"] is None]
    checks = training_checks(SCRIPT, JobState.COMPLETED, run, epochs, windows)
    return next(c for c in checks if "metrics.csv" in c.name)


def test_verify_checks_every_logged_window_and_the_budget_never_an_epoch_count() -> None:
    run = {"hosts": ["n1"], "step_windows": 3, "max_steps": 60, "steps_completed": 60}
    check = rows_check(run, window_rows(0, 10, 20))
    assert (check.name, check.ok, check.detail) == (
        WINDOWS_CHECK,
        True,
        "3/3 logged windows; 60/60 steps",
    )
    assert rows_check(run, window_rows(0, 10)).ok is False  # a window lost
    short = rows_check({**run, "steps_completed": 40}, window_rows(0, 10, 20))
    assert short.ok is False and "40/60 steps" in short.detail
    none = rows_check({"hosts": ["n1"]}, [])
    assert none.ok is False and "no step windows" in none.detail
    epochs = rows_check({"hosts": ["n1"]}, [{"epoch": 1.0, "step": None}])
    assert (epochs.name, epochs.ok, epochs.detail) == (
        "every epoch is in metrics.csv",
        True,
        "1 epochs",
    )


def view(**changes: Any) -> RunView:
    base = RunView(
        run_id="r", name="it", run_dir="/r", group=None, created_at="", spec=SCRIPT,
        attempts=(), state=JobState.RUNNING, elapsed_sec=90.0,
    )  # fmt: skip
    return replace(base, **changes)


def test_progress_by_steps_shows_the_budget_and_an_eta() -> None:
    assert view(steps_done=450, steps_total=600).epoch_label == "450/600 it, 30 s left"
    assert view(steps_done=450, steps_total=600, state=JobState.COMPLETED).epoch_label == (
        "450/600 it"
    )
    assert view(steps_done=45).epoch_label == "45 it"
    assert view(epochs_done=2, epochs_total=3, steps_done=45).epoch_label == "2/3"
    # Run detail's progress line says the same.
    running = view(steps_done=450, steps_total=600)
    assert progress_text(running, None).plain == " 450/600 it, 30 s left"
    ended = replace(running, state=JobState.COMPLETED)
    assert progress_text(ended, None).plain == " ended COMPLETED: 450/600 it"


# -- the wrapper, end to end, with a stand-in script (no torch) ------------------------------


def test_the_wrapper_writes_windows_progress_and_run_json_for_a_loop_with_no_epochs(
    tmp_path: Path,
) -> None:
    script = tmp_path / "loop.py"
    script.write_text(
        "for it in range(0, 31, 10):\n"
        "    print(f'iter {it}: loss {3 - it / 10:.2f}, time 1.0ms')\n"
        "print('step 30: train loss 0.5, val loss 0.6')\n"
    )
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-m", "ddp_tui.scriptrun", "--run-dir", str(run_dir),
            "--cwd", str(tmp_path), "--world-size", "1", "--observe", "off",
            "--", str(script), "--max_iters=31",
        ],
        env=env(), capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = [(r["epoch"], r["step"], r["train_loss"], r["val_loss"]) for r in rows(run_dir)]
    assert got == [
        ("", "0", "3", ""),
        ("", "10", "2", ""),
        ("", "20", "1", ""),
        ("", "30", "0", "0.6"),
    ]
    info = run_json(run_dir)
    assert info["epochs"] is None and info["epochs_completed"] == 0
    assert (info["max_steps"], info["steps_completed"], info["step_windows"]) == (31, 31, 4)


def test_an_evaluation_after_its_steps_window_was_written_keeps_the_logged_loss() -> None:
    w = StepWindows()
    w.line(StepRecord(step=20, loss=2.5, values={"train_loss": 2.5}), now=1.0)
    (logged,) = w.due(now=1.0 + HOLD_SEC)
    w.line(StepRecord(step=20, loss=2.6, values={"train_loss": 2.6, "val_loss": 2.7}), now=5.0)
    (evaluated,) = w.due(now=5.0 + HOLD_SEC)
    assert logged.values == {"train_loss": 2.5} and evaluated.values == {"val_loss": 2.7}


def test_a_progress_bar_with_no_epoch_stays_progress_and_makes_no_windows(tmp_path: Path) -> None:
    script = tmp_path / "bar.py"
    script.write_text(
        "import sys\n"
        "for n in range(1, 6):\n"
        "    sys.stderr.write(f'\\r{n * 20}%|##| {n}/5 [00:01<00:01, 5.00it/s, loss=0.3]')\n"
        "sys.stderr.write('\\n')\n"
    )
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-m", "ddp_tui.scriptrun", "--run-dir", str(run_dir),
            "--cwd", str(tmp_path), "--world-size", "1", "--observe", "off", "--", str(script),
        ],
        env=env(), capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert rows(run_dir) == []
    assert "step_windows" not in run_json(run_dir)
    assert (run_dir / "progress.jsonl").read_text().strip()  # the bar is still progress


def test_a_flood_of_step_lines_costs_a_parse_per_read() -> None:
    def steps(n: int) -> list[int | None]:
        read = b"".join(b"step %d | loss 0.5 | tok/s 1000\n" % i for i in range(n))
        return [r.step for r in StdoutParser("auto").feed(read) if isinstance(r, StepRecord)]

    assert steps(10) == list(range(10))  # a loop's usual pace: every line a window
    # Every step logged at MB/s: the read's last line only (tests/scriptrun/test_stream_scan.py
    # has a line cut across reads).
    assert steps(500) == [499]
