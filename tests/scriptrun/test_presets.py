"""The job-side metrics parsers on recorded lines: presets, user regexes, helper lines, CSV."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddp_tui.scriptrun.csvsource import CsvSource, fold
from ddp_tui.scriptrun.presets import METRICS_PRESETS, check_metrics_source
from ddp_tui.scriptrun.records import EpochRecord, Record, StepRecord
from ddp_tui.scriptrun.report import report_epoch
from ddp_tui.scriptrun.stream import BarParser, StdoutParser

BAR = "\u2588".encode()


def epochs(records: list[Record]) -> list[tuple[int, dict[str, float]]]:
    return [(r.epoch, r.values) for r in records if isinstance(r, EpochRecord)]


def steps(records: list[Record]) -> list[StepRecord]:
    return [r for r in records if isinstance(r, StepRecord)]


def parse(source: str, *chunks: bytes) -> list[Record]:
    parser = StdoutParser(source)
    out: list[Record] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.finish()


@pytest.mark.parametrize(
    ("line", "epoch", "values"),
    [
        (b"Epoch 3 - Avg Loss: 0.23, Accuracy: 92.3%", 3, {"train_loss": 0.23, "train_acc": 0.923}),
        (b"Epoch [3/10], Loss: 0.2345, Acc: 91.2%", 3, {"train_loss": 0.2345, "train_acc": 0.912}),
        (
            b"Epoch 3/10 | train_loss 0.21 | val_loss 0.25 | val_acc 93.5 | time 12.3s",
            3,
            {"train_loss": 0.21, "val_loss": 0.25, "val_acc": 0.935},
        ),
        (b"[10:00:00] INFO Epoch 4: loss=0.2 lr=1e-3", 4, {"train_loss": 0.2, "lr": 0.001}),
    ],
)
def test_epoch_line(line: bytes, epoch: int, values: dict[str, float]) -> None:
    (got,) = epochs(parse("epoch-line", line + b"\n"))
    assert got[0] == epoch
    assert got[1] == pytest.approx(values)


@pytest.mark.parametrize(
    ("line", "epoch", "values"),
    [
        (b"epoch=3 loss=0.2 val_acc=0.9", 3, {"train_loss": 0.2, "val_acc": 0.9}),
        (b"epoch: 3, loss: 0.2, val_loss: 0.3", 3, {"train_loss": 0.2, "val_loss": 0.3}),
        (
            b"train_loss=0.5 eval_accuracy=88% learning_rate=3e-4 epoch=0",
            0,
            {"train_loss": 0.5, "val_acc": 0.88, "lr": 3e-4},
        ),
    ],
)
def test_key_value(line: bytes, epoch: int, values: dict[str, float]) -> None:
    (got,) = epochs(parse("key-value", line + b"\n"))
    assert got[0] == epoch
    assert got[1] == pytest.approx(values)


def test_step_lines_are_progress_not_epochs() -> None:
    records = parse(
        "auto",
        b"epoch=3 step=100/938 loss=0.5\n",
        b"Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.123456\n",
    )
    assert epochs(records) == []
    first, second = steps(records)
    assert (first.epoch, first.step, first.steps_per_epoch, first.loss) == (3, 100, 938, 0.5)
    assert (second.epoch, second.step, second.steps_per_epoch) == (1, 640, 60000)


def test_hf_dicts() -> None:
    log = (
        b"{'loss': 0.9, 'grad_norm': 3.1, 'learning_rate': 4e-05, 'epoch': 0.5}\n"
        b"{'loss': 0.7, 'grad_norm': 2.2, 'learning_rate': 3e-05, 'epoch': 0.99}\n"
        b"{'eval_loss': 0.6, 'eval_accuracy': 0.81, 'eval_runtime': 1.2, 'epoch': 1.0}\n"
        b"{'loss': 0.5, 'learning_rate': 2e-05, 'epoch': 1.5}\n"
        # no whole-number log for epoch 2: the next fraction closes it
        b"{'loss': 0.4, 'learning_rate': 1e-05, 'epoch': 2.5}\n"
        b"{'train_runtime': 30.1, 'train_samples_per_second': 99.0, 'train_loss': 0.6, "
        b"'epoch': 3.0}\n"
    )
    records = parse("hf-dict", log)
    assert epochs(records) == [
        (1, pytest.approx({"train_loss": 0.7, "lr": 3e-05, "val_loss": 0.6, "val_acc": 0.81})),
        (2, pytest.approx({"train_loss": 0.5, "lr": 2e-05})),
    ]
    assert [s.epoch for s in steps(records)] == [1, 1, 2, 3]


def test_tqdm_redraws_and_partial_reads() -> None:
    # Lightning's bar: redrawn with \r, epochs from 0, validation values at 100% later.
    stream = (
        b"Epoch 0:  40%|" + BAR * 4 + b"      | 20/50 [00:01<00:01, 20.10it/s, v_num=0, loss=0.9]\r"
        b"Epoch 0: 100%|" + BAR * 10 + b"| 50/50 [00:02<00:00, 20.00it/s, v_num=0, loss=0.5]\r"
        b"Epoch 0: 100%|" + BAR * 10 + b"| 50/50 [00:03<00:00, 16.00it/s, v_num=0, loss=0.5, "
        b"val_loss=0.6, val_acc=0.8]\r"
        b"Epoch 1:  10%|" + BAR + b"         | 5/50 [00:00<00:02, 1.50s/it, v_num=0, loss=0.4]"
    )
    cut = len(stream) // 2 + 7  # a bar split across two reads
    records = parse("tqdm", stream[:cut], stream[cut:])
    assert epochs(records) == [
        (0, {"train_loss": 0.5}),
        (0, pytest.approx({"train_loss": 0.5, "val_loss": 0.6, "val_acc": 0.8})),
    ]
    bars = steps(records)
    assert [(s.epoch, s.step, s.steps_per_epoch) for s in bars] == [
        (0, 20, 50),
        (0, 50, 50),
        (0, 50, 50),
        (1, 5, 50),
    ]
    assert bars[0].steps_per_sec == pytest.approx(20.1)
    assert bars[-1].steps_per_sec == pytest.approx(1 / 1.5)


def test_a_bar_without_an_epoch_is_progress_only() -> None:
    records = parse("tqdm", b" 5%|" + BAR + b"    | 50/1000 [00:10<03:10,  5.00it/s]\r")
    assert epochs(records) == []
    assert [(s.epoch, s.step) for s in steps(records)] == [(None, 50)]


def test_unknown_lines_give_nothing() -> None:
    noise = (
        b"Downloading data...\n"
        b"Epoch 3 starting\n"
        b"global step 100 loss 0.5\n"
        b"Using 4 GPUs, batch size 256, 93% of memory free\n"
        b"{'model': 'resnet50', 'pretrained': True}\n"
        b"\n\r\n"
    )
    assert parse("auto", noise) == []


def test_helper_lines_are_authoritative(capsys: pytest.CaptureFixture[str]) -> None:
    report_epoch(0, loss=0.5, val_accuracy=91.0, samples=1000, f1=0.7)
    helper = capsys.readouterr().out.encode()
    records = parse("auto", b"Epoch 9 - Avg Loss: 0.1\n", helper, b"Epoch 10 - Avg Loss: 0.1\n")
    assert epochs(records) == [(9, {"train_loss": 0.1}), (0, {"train_loss": 0.5, "val_acc": 0.91})]
    helper_record = records[1]
    assert isinstance(helper_record, EpochRecord)
    assert helper_record.samples == 1000
    assert helper_record.extras == {"f1": "0.7"}


def test_user_regex_with_extra_columns_and_counted_epochs() -> None:
    parser = StdoutParser(r"regex:^Ep (?P<epoch>\d+) loss (?P<loss>\S+) f1 (?P<f1>\S+)$")
    assert parser.extra_columns == ("f1",)
    records = parser.feed(b"Ep 0 loss 0.5 f1 0.7\nEp 1 loss 0.4 f1 0.8\nEp 2 lo")
    assert [(r.epoch, r.values, r.extras) for r in records if isinstance(r, EpochRecord)] == [
        (0, {"train_loss": 0.5}, {"f1": "0.7"}),
        (1, {"train_loss": 0.4}, {"f1": "0.8"}),
    ]
    counted = parse(r"regex:val acc (?P<val_acc>[\d.]+%?)", b"val acc 91%\r", b"val acc 92.5%\n")
    assert epochs(counted) == [(1, {"val_acc": 0.91}), (2, {"val_acc": 0.925})]


def test_lines_cut_across_reads() -> None:
    line = b"epoch=2 loss=0.25 val_acc=0.5\r\n"
    for cut in range(1, len(line)):
        parser = StdoutParser("key-value")
        got = parser.feed(b"noise\n" + line[:cut]) + parser.feed(line[cut:] + b"more noise")
        assert epochs(got) == [(2, {"train_loss": 0.25, "val_acc": 0.5})], cut
    parser = StdoutParser("auto")
    assert parser.feed(b"Epoch 1 - Avg Loss: 0.5") == []  # no line end yet
    assert epochs(parser.feed(b"0\n")) == [(1, {"train_loss": 0.5})]
    assert parser.feed(b"Epoch 2 - Avg Loss: 0.3") == []
    assert epochs(parser.finish()) == [(2, {"train_loss": 0.3})]  # the stream's last line


def test_stderr_bars_cut_across_reads_and_nothing_else() -> None:
    """stderr is read for tqdm bars only: helper lines and epoch lines there are no metrics."""
    stream = (
        b'Traceback-ish noise, epoch 3 loss=0.1\n@ddp-tui {"event": "epoch", "epoch": 9,'
        b' "metrics": {"loss": 1}}\nEpoch 3 - Avg Loss: 0.2\n'
        b"Epoch 1:  50%|" + BAR * 5 + b"     | 1/2 [00:01<00:01, 2.00it/s, loss=0.4]"
        b"\rEpoch 1: 100%|" + BAR * 10 + b"| 2/2 [00:02<00:00, 2.00it/s, loss=0.3]"
    )
    for cut in range(1, len(stream), 7):
        parser = BarParser()
        got = parser.feed(stream[:cut]) + parser.feed(stream[cut:]) + parser.finish()
        assert epochs(got) == [(1, {"train_loss": 0.3})], cut
        assert [(s.epoch, s.step, s.steps_per_epoch) for s in steps(got)] == [
            (1, 1, 2),
            (1, 2, 2),
        ], cut


@pytest.mark.parametrize("name", METRICS_PRESETS)
def test_presets_are_valid_sources(name: str) -> None:
    assert check_metrics_source(name) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("epochline", "unknown metrics source"),
        ("regex:Epoch (\\d+", "does not compile"),
        ("regex:Epoch (?P<n>\\d+)", "named group"),
        ("csv:", "path"),
        ("csv:  ", "path"),
    ],
)
def test_bad_sources(text: str, problem: str) -> None:
    message = check_metrics_source(text)
    assert message is not None and problem in message


def test_good_sources() -> None:
    assert check_metrics_source(r"regex:Epoch (?P<epoch>\d+)") is None
    assert check_metrics_source(r"regex:loss (?P<loss>\S+)") is None
    assert check_metrics_source("csv:lightning_logs/version_*/metrics.csv") is None


# Lightning CSVLogger: step rows and epoch rows, each with the other's cells empty.
LIGHTNING_CSV = """\
epoch,step,train_loss_step,train_loss_epoch,val_loss,val_acc,lr-Adam
0,49,0.81,,,,0.001
0,99,0.62,,,,
0,99,,,0.55,0.83,
0,99,,0.70,,,
1,149,0.50,,,,0.0005
"""


def test_csv_fold_lightning() -> None:
    folded = fold(LIGHTNING_CSV, {"lr-Adam": "lr"})
    # Lightning's own step column is the contract's: the optimizer step at the row's end.
    assert folded[0].values == {
        "lr": 0.001,
        "val_loss": 0.55,
        "val_acc": 0.83,
        "train_loss": 0.7,
        "step": 99.0,
    }
    assert folded[1].values == {"lr": 0.0005, "step": 149.0}


def test_csv_source_hands_on_finished_epochs(tmp_path: Path) -> None:
    logs = tmp_path / "lightning_logs"
    (logs / "version_0").mkdir(parents=True)
    old = logs / "version_0" / "metrics.csv"
    old.write_text(LIGHTNING_CSV)
    os.utime(old, (1, 1))  # a previous attempt's file: ignored
    source = CsvSource("lightning_logs/version_*/metrics.csv", tmp_path, {"lr-Adam": "lr"}, 1e9)
    assert source.poll() == []
    new = logs / "version_1" / "metrics.csv"
    new.parent.mkdir()
    new.write_text(LIGHTNING_CSV.split("1,149")[0])
    assert source.poll() == []  # epoch 0 may still grow: no later epoch yet
    new.write_text(LIGHTNING_CSV)
    (first,) = source.poll()
    assert first.epoch == 0 and first.values["train_loss"] == 0.7
    assert source.poll() == []
    (last,) = source.finish()
    assert last.epoch == 1


def test_the_helper_and_the_wrapper_agree_on_the_tag() -> None:
    from ddp_tui.scriptrun import report, stream

    assert report.TAG == stream.HELPER_TAG


def test_a_line_anchored_regex_matches_only_at_line_starts() -> None:
    source = r"regex:^Epoch (?P<epoch>\d+) loss (?P<loss>\S+)"
    text = (
        b"Epoch 1 loss 0.5\n"
        b"not at the start: Epoch 9 loss 9.0\n"
        b"Epoch 2 loss 0.4 Epoch 8 loss 8.0\n"
        b"Epoch 3 loss 0.3"
    )
    assert epochs(parse(source, text)) == [
        (1, {"train_loss": 0.5}),
        (2, {"train_loss": 0.4}),
        (3, {"train_loss": 0.3}),
    ]
    unanchored = r"regex:Epoch (?P<epoch>\d+) loss (?P<loss>\S+)"
    assert [e for e, _ in epochs(parse(unanchored, text))] == [1, 9, 2, 8, 3]
