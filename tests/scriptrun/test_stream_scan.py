"""The stdout scan's candidate selection (scriptrun/stream.py): the few C searches that pick the
lines a preset looks at find every kind of metric line in a read full of other log lines, a
read gives the same records whole or cut anywhere, and a flood of step lines costs one parse per
read even where the read completes a line the previous one cut."""

from __future__ import annotations

import pytest

from ddp_tui.scriptrun.records import EpochRecord, Record, StepRecord
from ddp_tui.scriptrun.stream import StdoutParser

# Log lines of no preset's kind that hold the needles' first bytes (``p``, ``T``, ``:``, ``@``)
# and a step word's neighbours, so that each search has to look past a false start.
NOISE = (
    b"[2026-11-24 08:00:01,123][TRACE] user@host: [cache] hit rate 0.93 | Tokens 4096\n"
    b"2026-11-24T08:00:02 INFO: prefetch queue depth 3, pinned memory: [on]\n"
)
# One of each kind of line, in an order a real run could print them.
METRIC_LINES = (
    b"Train: 0 [   0/2 (  0%)]  Loss: 2.00 (2.00)  Time: 0.017s,  59.24/s  LR: 1.000e-01\n"
    b"Train: 0 [   1/2 (100%)]  Loss: 1.57 (1.50)  Time: 0.017s,  59.24/s  LR: 1.000e-01\n"
    b"Test: [   1/1]  Time: 0.010 (0.010)  Loss:  0.6900 (0.6900)  Acc@1: 50.0000 (50.0000)\n"
    b"Epoch: [1][ 2/2]\tTime  0.123 ( 0.456)\tLoss 7.06e+00 (7.00e+00)\tAcc@1  25.00 ( 25.00)\n"
    b" * Acc@1 30.000 Acc@5 100.000\n"
    b"Epoch 3 - Avg Loss: 0.23, Accuracy: 92.3%\n"
    b"epoch=4 loss=0.2 val_acc=0.9\n"
    b"{'eval_loss': 0.41, 'eval_accuracy': 0.88, 'epoch': 5.0}\n"
    b"\rEpoch 6:  50%|#####     | 1/2 [00:01<00:01, 2.00it/s, loss=0.4]"
    b"\rEpoch 6: 100%|##########| 2/2 [00:02<00:00, 2.00it/s, loss=0.3]\n"
    b"iter 100: loss 4.2340, time 20.51ms\n"
    b"step 500: train loss 4.1, val loss 4.3\n"
)


def parse(*reads: bytes) -> list[Record]:
    parser = StdoutParser("auto")
    out: list[Record] = []
    for data in reads:
        out += parser.feed(data)
    return out + parser.finish()


def test_every_kind_of_metric_line_is_found_among_other_lines() -> None:
    records = parse(NOISE * 200 + METRIC_LINES + NOISE * 200)
    assert sorted({r.epoch for r in records if isinstance(r, EpochRecord)}) == [0, 1, 3, 4, 5, 6]
    assert [r.step for r in records if isinstance(r, StepRecord) and r.epoch is None] == [100, 500]


@pytest.mark.parametrize("size", [1, 5, 64, 333])
def test_a_read_gives_the_same_records_whole_or_cut_anywhere(size: int) -> None:
    log = NOISE * 3 + METRIC_LINES + NOISE * 3 + METRIC_LINES.replace(b"\n", b"\r\n")
    whole = parse(log)
    assert len(whole) > 20, whole  # something to compare
    assert parse(*(log[i : i + size] for i in range(0, len(log), size))) == whole


def test_a_flood_cut_across_reads_costs_a_parse_per_read() -> None:
    flood = b"".join(b"step %d | loss 0.5 | tok/s 1000\n" % i for i in range(600))
    cut = flood.index(b"step 300 ") + 4  # the second read completes line 300
    steps = [r.step for r in parse(flood[:cut], flood[cut:]) if isinstance(r, StepRecord)]
    assert steps == [299, 599]  # each read's last line, not line 300 on its own
