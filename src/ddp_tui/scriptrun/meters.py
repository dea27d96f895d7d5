"""Meter lines: the ``value (running average)`` logs of timm and of pytorch/examples' ImageNet.

These scripts log through an ``AverageMeter`` per quantity, most often through ``logging`` to
stderr::

    Train: 0 [   1/2 (100%)]  Loss: 1.57 (1.50)  Time: 0.017s,  59.24/s  LR: 1.000e-01
    Test: [   1/1]  Time: 0.010 (0.010)  Loss:  0.6900 (0.6900)  Acc@1: 50.0000 (50.0000)
    Epoch: [0][ 1/2]\tTime  0.123 ( 0.456)\tLoss 7.06e+00 (7.06e+00)\tAcc@1  25.00 ( 25.00)
     * Acc@1 25.000 Acc@5 100.000

A row takes the running average (the number in parentheses), not the last batch's value: the
meter averages over the epoch so far, so at the epoch's last line it is the epoch's mean, the
figure the script itself writes into its summary (timm's ``summary.csv`` holds
``losses_m.avg``). The ``Train``/``Epoch`` lines give the epoch's ``train_*`` values and the
``lr``; the ``Test`` lines after them and the `` * `` summary give its ``val_*`` values. An
epoch's training values are handed on at its last batch (``100%``, or ``N/N``) or at the first
evaluation line after it, so its row is timed at the end of its training, not at its first line.
"""

from __future__ import annotations

import re

from .records import EpochRecord, Record, StepRecord, as_fraction, number

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# ``Train: 0 [   1/2 (100%)]`` (timm) or ``Epoch: [0][ 1/2]`` (pytorch/examples), never the
# MNIST example's ``Train Epoch: 1 [640/60000 (1%)]`` (samples, not batches: a step line).
_TRAIN_HEAD = re.compile(
    r"(?:\bTrain:\s*(\d+)\s*|\bEpoch:\s*\[\s*(\d+)\s*\]\s*)"
    r"\[\s*(\d+)\s*/\s*(\d+)\s*(?:\(\s*(\d+)%\s*\))?\s*\]"
)
# ``Test: [   1/1]``, ``Test (EMA): [ 1/1]``, ``Eval: [1/4]``, ``Val: [ 2/2]``.
_EVAL_HEAD = re.compile(
    r"\b(?:Test|Eval|Val|Valid|Validation)\b[^:\[\]\n]{0,20}:\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]"
)
# pytorch/examples' summary after an evaluation: `` * Acc@1 25.000 Acc@5 100.000``.
_SUMMARY = re.compile(r"(?:^|[\s:])\*\s+(?=[A-Za-z])")
# ``Loss: 1.57 (1.50)``, ``Loss 7.06e+00 (7.06e+00)``, ``Acc@1  25.00 ( 25.00)``, ``LR: 1e-01``.
_METER = re.compile(
    rf"(?<![\w@])([A-Za-z][\w@]*)\s*:?\s*(?<![\w.])({_NUM})(?![\w.@])"
    rf"(?:\s*\(\s*({_NUM})\s*\))?"
)
# What every meter line holds, checked before any regex.
_HINTS = ("Train:", "Epoch:", "Test", "Eval", "Val", "*")
# The meters' names -> the quantity (``loss``, ``acc``) or column (``lr``) they are.
_QUANTITIES = {
    "loss": "loss",
    "acc@1": "acc",
    "prec@1": "acc",
    "top1": "acc",
    "top_1": "acc",
    "acc1": "acc",
    "lr": "lr",
}


def meter_values(text: str, phase: str) -> dict[str, float]:
    """``Loss: 1.57 (1.50)  Acc@1: 25.0 (20.0)`` -> ``{"<phase>_loss": 1.50, "<phase>_acc": 0.2}``:
    the running average where the meter prints one, else the value."""
    values: dict[str, float] = {}
    for m in _METER.finditer(text):
        quantity = _QUANTITIES.get(m.group(1).lower())
        if quantity is None:
            continue
        value = number(m.group(3) or m.group(2))
        if value is None:
            continue
        column = "lr" if quantity == "lr" else f"{phase}_{quantity}"
        values[column] = as_fraction(column, value)
    return values


class MeterLines:
    """The state of one stream's meter lines: the epoch being trained and evaluated."""

    def __init__(self) -> None:
        self._epoch: int | None = None  # the last training epoch seen (script numbering)
        self._train: dict[str, float] = {}  # its values not handed on yet
        self._val: dict[str, float] = {}  # its evaluation's values not handed on yet

    def parse(self, line: str, emit: list[Record]) -> bool:
        """Whether ``line`` is a meter line; its records go to ``emit``."""
        if not any(hint in line for hint in _HINTS):  # most lines: a few substring tests
            return False
        head = _TRAIN_HEAD.search(line)
        if head is not None:
            self._train_line(head, line, emit)
            return True
        head = _EVAL_HEAD.search(line)
        if head is not None:
            if self._epoch is None:  # an evaluation before any training: no row to join
                return True
            self._hand_on_train(emit)
            self._val.update(meter_values(line[head.end() :], "val"))
            if int(head.group(1)) >= int(head.group(2)):
                self._hand_on_val(emit)
            return True
        summary = _SUMMARY.search(line)
        if summary is not None and self._epoch is not None:
            values = meter_values(line[summary.end() :], "val")
            if values:
                self._hand_on_train(emit)
                self._val.update(values)
                self._hand_on_val(emit)
                return True
        return False

    def finish(self, emit: list[Record]) -> None:
        """Hand on what the last lines left (the script has ended)."""
        self._hand_on_train(emit)
        self._hand_on_val(emit)

    def _train_line(self, head: re.Match[str], line: str, emit: list[Record]) -> None:
        epoch = int(head.group(1) or head.group(2))
        batch, total = int(head.group(3)), int(head.group(4))
        if epoch != self._epoch:
            self._hand_on_train(emit)
            self._hand_on_val(emit)
            self._epoch = epoch
        values = meter_values(line[head.end() :], "train")
        self._train.update(values)
        emit.append(
            StepRecord(
                epoch=epoch, step=batch, steps_per_epoch=total or None,
                loss=values.get("train_loss"),
            )
        )  # fmt: skip
        # timm numbers batches from 0 (its last is N-1 of N at 100%); pytorch/examples from 1.
        last = head.group(5) == "100" or (total > 0 and batch >= total)
        if last:
            self._hand_on_train(emit)

    def _hand_on_train(self, emit: list[Record]) -> None:
        if self._train and self._epoch is not None:
            emit.append(EpochRecord(self._epoch, dict(self._train)))
        self._train = {}

    def _hand_on_val(self, emit: list[Record]) -> None:
        if self._val and self._epoch is not None:
            emit.append(EpochRecord(self._epoch, dict(self._val)))
        self._val = {}
