"""What a script reports in its lines: timm's and pytorch/examples' meter lines (``value
(running average)``), on stdout or through ``logging`` on stderr, and where each value came
from."""

from __future__ import annotations

import pytest

from ddp_tui.scriptrun.meters import meter_values
from ddp_tui.scriptrun.records import EpochRecord, Record, StepRecord
from ddp_tui.scriptrun.stream import StdoutParser

# timm's train.py, logged at INFO through logging (a prefix as basicConfig's default format).
TIMM = (
    b"INFO:train:Train: 0 [   0/4 (  0%)]  Loss: 1.64 (1.64)  Time: 0.017s,   59.24/s  "
    b"(0.020s,   50.00/s)  LR: 1.000e-01  Data: 0.001 (0.002)\n"
    b"INFO:train:Train: 0 [   3/4 (100%)]  Loss: 1.57 (1.50)  Time: 0.017s,   59.24/s  "
    b"(0.020s,   50.00/s)  LR: 1.000e-01  Data: 0.001 (0.002)\n"
    b"INFO:train:Test: [   0/1]  Time: 0.010 (0.010)  Loss:  0.7000 (0.7000)  "
    b"Acc@1: 40.0000 (40.0000)  Acc@5: 100.0000 (100.0000)\n"
    b"INFO:train:Test: [   1/1]  Time: 0.010 (0.010)  Loss:  0.6800 (0.6900)  "
    b"Acc@1: 60.0000 (50.0000)  Acc@5: 100.0000 (100.0000)\n"
    b"INFO:train:Train: 1 [   3/4 (100%)]  Loss: 1.20 (1.25)  Time: 0.017s,   59.24/s  "
    b"(0.020s,   50.00/s)  LR: 5.000e-02  Data: 0.001 (0.002)\n"
    b"INFO:train:Test: [   1/1]  Time: 0.010 (0.010)  Loss:  0.5000 (0.5500)  "
    b"Acc@1: 70.0000 (75.0000)  Acc@5: 100.0000 (100.0000)\n"
)

# pytorch/examples' imagenet main.py: ProgressMeter lines, then the evaluation's summary.
IMAGENET = (
    b"Epoch: [0][ 1/2]\tTime  0.123 ( 0.456)\tData  0.010 ( 0.020)\tLoss 7.06e+00 (7.06e+00)"
    b"\tAcc@1  25.00 ( 25.00)\tAcc@5 100.00 (100.00)\n"
    b"Epoch: [0][ 2/2]\tTime  0.123 ( 0.456)\tData  0.010 ( 0.020)\tLoss 6.00e+00 (6.50e+00)"
    b"\tAcc@1  50.00 ( 37.50)\tAcc@5 100.00 (100.00)\n"
    b"Test: [1/1]\tTime  0.100 ( 0.100)\tLoss 5.9e+00 (5.9e+00)\tAcc@1  50.00 ( 50.00)\n"
    b" *   Acc@1 50.000 Acc@5 100.000\n"
)


def parse(stream: str, *chunks: bytes) -> list[Record]:
    parser = StdoutParser("auto", stream=stream)
    out: list[Record] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.finish()


def merged(records: list[Record]) -> dict[int, dict[str, float]]:
    """The epochs' values as the wrapper merges them: a later record of an epoch updates it."""
    rows: dict[int, dict[str, float]] = {}
    for r in records:
        if isinstance(r, EpochRecord):
            rows.setdefault(r.epoch, {}).update(r.values)
    return rows


def test_timm_lines_give_the_epochs_running_averages() -> None:
    rows = merged(parse("stderr", TIMM))
    assert rows == {
        0: pytest.approx({"train_loss": 1.50, "lr": 0.1, "val_loss": 0.69, "val_acc": 0.5}),
        1: pytest.approx({"train_loss": 1.25, "lr": 0.05, "val_loss": 0.55, "val_acc": 0.75}),
    }


def test_an_epochs_training_values_come_at_its_last_batch_before_its_evaluation() -> None:
    """The row is made (and timed) when the epoch's training ends, not at its first line."""
    parser = StdoutParser("auto", stream="stderr")
    first, last, *_ = TIMM.splitlines(keepends=True)
    assert not [r for r in parser.feed(first) if isinstance(r, EpochRecord)]
    (train,) = [r for r in parser.feed(last) if isinstance(r, EpochRecord)]
    assert (train.epoch, train.values) == (0, pytest.approx({"train_loss": 1.5, "lr": 0.1}))


@pytest.mark.parametrize("cut", range(1, len(TIMM), 37))
def test_meter_lines_cut_across_reads(cut: int) -> None:
    assert merged(parse("stderr", TIMM[:cut], TIMM[cut:])) == merged(parse("stderr", TIMM))


def test_timm_progress_steps() -> None:
    steps = [r for r in parse("stderr", TIMM) if isinstance(r, StepRecord)]
    assert [(s.epoch, s.step, s.steps_per_epoch, s.loss) for s in steps] == [
        (0, 0, 4, 1.64),
        (0, 3, 4, 1.50),
        (1, 3, 4, 1.25),
    ]


def test_imagenet_lines_and_the_summary() -> None:
    rows = merged(parse("stdout", IMAGENET))
    assert rows == {
        0: pytest.approx({"train_loss": 6.5, "train_acc": 0.375, "val_loss": 5.9, "val_acc": 0.5})
    }


def test_the_summary_line_alone_of_an_older_imagenet_script() -> None:
    lines = (
        b"Epoch: [3][10/10]\tLoss 1.0e+00 (1.2e+00)\tPrec@1 80.0 (70.0)\n"
        b" * Acc@1 66.500 Acc@5 90.000\n"
    )
    assert merged(parse("stdout", lines)) == {
        3: pytest.approx({"train_loss": 1.2, "train_acc": 0.7, "val_acc": 0.665})
    }


def test_the_mnist_examples_line_stays_a_step() -> None:
    """``Train Epoch: 1 [640/60000 (1%)]`` counts samples, not batches: no meter line."""
    got = parse("stdout", b"Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.123456\n")
    assert not [r for r in got if isinstance(r, EpochRecord)]


@pytest.mark.parametrize(
    ("text", "phase", "values"),
    [
        ("Loss: 1.57 (1.50)  LR: 1.000e-01", "train", {"train_loss": 1.5, "lr": 0.1}),
        (
            "Loss 7.06e+00 (7.06e+00)\tAcc@1  25.00 ( 25.00)",
            "train",
            {"train_loss": 7.06, "train_acc": 0.25},
        ),
        ("loss: 0.5  top1: 91.0", "val", {"val_loss": 0.5, "val_acc": 0.91}),
        ("Time: 0.017s,   59.24/s  Data: 0.001 (0.002)", "train", {}),
    ],
)
def test_meter_values(text: str, phase: str, values: dict[str, float]) -> None:
    assert meter_values(text, phase) == pytest.approx(values)


def test_stderr_has_no_helper_lines_and_tracebacks_are_no_metrics() -> None:
    stream = (
        b'@ddp-tui {"event": "epoch", "epoch": 9, "metrics": {"loss": 1}}\n'
        b"Traceback (most recent call last):\n"
        b'  File "train.py", line 121, in <module>\n'
        b"    validate(model, loader)\n"
        b"RuntimeError: Test failed at step 3\n"
    )
    assert parse("stderr", stream) == []


def test_every_epoch_record_says_where_it_came_from() -> None:
    assert {r.source for r in parse("stderr", TIMM) if isinstance(r, EpochRecord)} == {"stderr"}
    helper = b'@ddp-tui {"event": "epoch", "epoch": 1, "metrics": {"loss": 0.5}}\n'
    (record,) = parse("stdout", helper)
    assert isinstance(record, EpochRecord) and record.source == "helper"
    (regex,) = StdoutParser(r"regex:^E(?P<epoch>\d+) (?P<loss>[\d.]+)").feed(b"E1 0.4\n")
    assert isinstance(regex, EpochRecord) and regex.source == "regex"
    plain = parse("stdout", b"Epoch 3 - Avg Loss: 0.23, Accuracy: 92.3%\n")
    assert [r.source for r in plain if isinstance(r, EpochRecord)] == ["stdout"]


@pytest.mark.parametrize(
    ("line", "values"),
    [
        (b"Epoch 2 | loss 0.52 (0.61) | acc 90.0 (88.0)", {"train_loss": 0.61, "train_acc": 0.88}),
        (b"epoch=2 loss=0.52 (0.61) lr=0.1", {"train_loss": 0.61, "lr": 0.1}),
        (b"epoch: 2, loss: 0.52, val_acc: 0.9", {"train_loss": 0.52, "val_acc": 0.9}),
        (b"Epoch 2 took 12 (45.0%) loss 0.4", {"train_loss": 0.4}),
    ],
)
def test_an_epoch_lines_running_average_is_its_value(line: bytes, values: dict[str, float]) -> None:
    assert merged(parse("stdout", line + b"\n")) == {2: pytest.approx(values)}
