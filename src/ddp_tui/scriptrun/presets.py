"""The line presets (``epoch-line``, ``key-value``, ``hf-dict``, ``tqdm``) and user regexes.

Each preset is a pure function of one line (the :class:`HfDict` preset and :class:`UserRegex`
keep a little state: the values between two whole epochs, a match count); :mod:`.stream` picks
the few lines worth their look out of the stream. Names in ``METRICS_PRESETS`` and the
``regex:``/``csv:`` prefixes are what the spec's ``metrics`` field accepts, and
:func:`check_metrics_source` is the app's check of such a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .columns import SAMPLES, canonical, normalise
from .records import EpochRecord, Record, StepRecord, collect, number

#: Values of ``metrics`` besides ``regex:PATTERN`` and ``csv:PATH``.
LINE_PRESETS = ("epoch-line", "key-value", "hf-dict", "tqdm", "step-line")
METRICS_PRESETS = ("auto", "helper", *LINE_PRESETS, "none")
REGEX_PREFIX = "regex:"
CSV_PREFIX = "csv:"


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# A value: a number, maybe a % or a seconds suffix, not glued to more word characters.
_VALUE = rf"(?<![\w.])({_NUM})(%|s(?!\w))?(?![\w.])"
_EPOCH_HEAD = re.compile(r"\bepoch\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*(?:/|of)\s*(\d+))?\s*\]?", re.I)
_KV_EPOCH = re.compile(r"(?<![\w./-])epoch\s*[=:]\s*(\d+)(?:\.0+)?(?![\w.])", re.I)
_KV_PAIR = re.compile(rf"(?<![\w./-])([A-Za-z_][\w./-]*)\s*[=:]\s*{_VALUE}")
_LOOSE_PAIR = re.compile(rf"([A-Za-z][A-Za-z0-9 _/.-]*?)\s*[:=]?\s*{_VALUE}")
_STEP = re.compile(
    r"\b(?:step|iter|iteration|batch)\b\s*[:=]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?", re.I
)
_BRACKET = re.compile(r"^\s*\[\s*(\d+)\s*/\s*(\d+)")
# An iteration loop's line (nanoGPT's ``iter 100: loss 4.2, time 20.5ms`` and its evaluation
# ``step 500: train loss 4.1, val loss 4.3``): the step word leads the line's own text, after
# at most a logging prefix that ends in ``:``, ``|``, ``]`` or ``-``.
_STEP_HEAD = re.compile(
    r"(?:^|[:|\]\-]\s*|^\s*\[\s*)(?:step|iter|iteration|it)\b\s*[:=#]?\s*(\d+)(?:\s*/\s*(\d+))?"
    r"\s*\]?\s*[:|,]?",
    re.I,
)
_TQDM = re.compile(
    r"(?P<desc>[^|]*?)\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*"
    r"\[(?P<inner>[^\]]*)\]"
)
_TQDM_EPOCH = re.compile(r"epoch\s*[:=]?\s*(\d+)", re.I)
_TQDM_RATE = re.compile(rf"({_NUM})\s*(it/s|s/it)")
_DICT_MARKS = str.maketrans("", "", "'\"{}")
# ``loss 0.52 (0.61)``: an AverageMeter's value and running average. The average is what a row
# takes: at an epoch's last line it is the epoch's mean (meters.py says more).
_RUNNING = re.compile(rf"(?<![\w.])({_NUM})\s*\(\s*({_NUM})\s*\)")


def _averages(text: str) -> str:
    """``loss 0.52 (0.61)`` -> ``loss 0.61``; a line without ``(`` is returned as it is."""
    return _RUNNING.sub(r"\2", text) if "(" in text else text


_HF_PAIR = re.compile(rf"""['"]([^'"]+)['"]\s*:\s*(?:np\.float\d*\()?({_NUM})""")


def _pairs(regex: re.Pattern[str], text: str) -> Iterator[tuple[str, str, bool]]:
    for m in regex.finditer(text):
        yield m.group(1), m.group(2), m.group(3) == "%"


def _without_epoch(pairs: Iterable[tuple[str, str, bool]]) -> Iterator[tuple[str, str, bool]]:
    return (p for p in pairs if normalise(p[0]) != "epoch")


def _step_record(epoch: int | None, text: str, values: dict[str, float]) -> StepRecord | None:
    """A step line (``step 40/100``, ``[640/60000 (1%)]``) inside an epoch, or None."""
    m = _STEP.search(text) or _BRACKET.search(text)
    if m is None:
        return None
    total = int(m.group(2)) if m.group(2) else None
    return StepRecord(
        epoch=epoch, step=int(m.group(1)), steps_per_epoch=total, loss=values.get("train_loss")
    )


def parse_epoch_line(line: str) -> Record | None:
    """``Epoch 3 - Avg Loss: 0.23, Accuracy: 92.3%`` (also ``Epoch [3/10] loss 0.2 acc 91%``)."""
    head = _EPOCH_HEAD.search(line)
    if head is None:
        return None
    epoch = int(head.group(1))
    # Quotes and braces off: ``epoch 0: {'accuracy': 0.65, 'f1': 0.79}`` (Accelerate's examples).
    rest = _averages(line[head.end() :].translate(_DICT_MARKS))
    values, samples = collect(_without_epoch(_pairs(_LOOSE_PAIR, rest)))
    step = _step_record(epoch, rest, values)
    if step is not None:
        return step
    if not values:
        return None
    return EpochRecord(epoch, values, samples=samples)


def parse_step_line(line: str) -> StepRecord | None:
    """``iter 100: loss 4.2, time 20.5ms`` or ``step 500: train loss 4.1, val loss 4.3``: a
    step of a loop with no epochs, with at least one value. Lines naming an epoch are left to
    the epoch presets."""
    head = _STEP_HEAD.search(line)
    if head is None or _EPOCH_HEAD.search(line) is not None:
        return None
    values, _ = collect(_pairs(_LOOSE_PAIR, line[head.end() :].translate(_DICT_MARKS)))
    values.pop("step", None)
    if not values:
        return None
    total = int(head.group(2)) if head.group(2) else None
    return StepRecord(
        step=int(head.group(1)),
        steps_per_epoch=total,
        loss=values.get("train_loss"),
        values=values,
    )


def parse_key_value(line: str) -> Record | None:
    """``epoch=3 loss=0.2 val_acc=0.9`` or ``epoch: 3, loss: 0.2``: the epoch is one of the keys."""
    found = _KV_EPOCH.search(line)
    if found is None:
        return None
    epoch = int(found.group(1))
    values, samples = collect(_without_epoch(_pairs(_KV_PAIR, _averages(line))))
    step = _step_record(epoch, line[found.end() :], values)
    if step is not None:
        return step
    if not values:
        return None
    return EpochRecord(epoch, values, samples=samples)


def parse_tqdm(line: str, emit: list[Record]) -> bool:
    """A tqdm bar: progress, and at 100% of an ``Epoch N`` bar the epoch (postfix values).

    ``Epoch 1: 100%|███| 50/50 [00:02<00:00, 20.1it/s, loss=0.3, acc=0.9]``
    """
    m = _TQDM.search(line)
    if m is None:
        return False
    e = _TQDM_EPOCH.search(m.group("desc"))
    epoch = int(e.group(1)) if e else None
    n, total = int(m.group("n")), int(m.group("total"))
    inner = m.group("inner")
    values, samples = collect(_without_epoch(_pairs(_KV_PAIR, inner)))
    rate = _TQDM_RATE.search(inner)
    steps_per_sec: float | None = None
    if rate is not None:
        r = float(rate.group(1))
        steps_per_sec = r if rate.group(2) == "it/s" else (1.0 / r if r > 0 else None)
    emit.append(
        StepRecord(
            epoch=epoch,
            step=n,
            steps_per_epoch=total or None,
            loss=values.get("train_loss"),
            steps_per_sec=steps_per_sec,
        )
    )
    if epoch is not None and total > 0 and n >= total:
        emit.append(EpochRecord(epoch, values, samples=samples))
    return True


class HfDict:
    """Hugging Face Trainer's log dicts: ``{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 1.0}``.

    HF counts epochs as fractions (0.5 = half of the first). A whole number ends an epoch; the
    train loss and learning rate logged before it (at fractions) fill that epoch's row, and a
    fraction past a whole number that never appeared closes that epoch too.
    """

    def __init__(self) -> None:
        self._carry: dict[str, float] = {}
        self._last_whole = 0

    def parse(self, line: str, emit: list[Record]) -> bool:
        if "{" not in line:
            return False
        raw = [(k, v) for k, v in _HF_PAIR.findall(line)]
        keys = {k for k, _ in raw}
        if "epoch" not in keys or "train_runtime" in keys:  # the run's summary: not an epoch
            return False
        epoch_value = next(float(v) for k, v in raw if k == "epoch")
        values, samples = collect((k, v, False) for k, v in raw if k != "epoch")
        whole = round(epoch_value)
        if abs(epoch_value - whole) < 1e-6 and whole >= 1:
            merged = {**self._carry, **values}
            emit.append(EpochRecord(whole, merged, samples=samples))
            self._last_whole = max(self._last_whole, whole)
            self._carry = {}
            return True
        passed = int(epoch_value)
        if passed >= 1 and passed > self._last_whole and self._carry:
            emit.append(EpochRecord(passed, self._carry))
            self._last_whole = passed
            self._carry = {}
        self._carry.update(values)
        emit.append(StepRecord(epoch=passed + 1, loss=values.get("train_loss")))
        return True


class UserRegex:
    """``regex:PATTERN``: named groups are columns (``epoch``, contract names and aliases,
    ``samples``, ``step``, ``steps_per_epoch``); other groups become extra columns.

    Without an ``epoch`` group every match is the next epoch (1, 2, ...).
    """

    _STEP_GROUPS = frozenset({"step", "steps_per_epoch"})

    def __init__(self, pattern: str) -> None:
        self.regex = re.compile(pattern.encode(), re.MULTILINE)
        self.extra_columns = extra_columns(pattern)
        self._count = 0
        # A leading ^ hides the pattern's literal start from re's fast search (10x slower);
        # without it re finds candidates fast, and a match counts only at a line's start.
        # Not with a "|": "^a|b" would change meaning.
        self._unanchored: re.Pattern[bytes] | None = None
        if pattern.startswith("^") and "|" not in pattern:
            self._unanchored = re.compile(pattern[1:].encode(), re.MULTILINE)

    def scan(self, text: bytes, start: int, end: int | None, emit: list[Record]) -> None:
        """Records from the matches in ``text[start:end]`` (whole lines, ``\\n``-separated)."""
        end = len(text) if end is None else end
        for m in self._matches(text, start, end):
            groups = {k: v.decode(errors="replace") for k, v in m.groupdict().items() if v}
            self._record(groups, emit)

    def _matches(self, text: bytes, pos: int, end: int) -> Iterator[re.Match[bytes]]:
        if self._unanchored is None:
            yield from self.regex.finditer(text, pos, end)
            return
        while pos < end:
            m = self._unanchored.search(text, pos, end)
            if m is None:
                return
            at = m.start()
            if at == 0 or text[at - 1] == 0x0A:  # at a line's start: what ^ would match
                yield m
                pos = max(m.end(), at + 1)
            else:  # an anchored match can only start at a later line
                newline = text.find(b"\n", at, end)
                if newline < 0:
                    return
                pos = newline + 1

    def _record(self, groups: dict[str, str], emit: list[Record]) -> None:
        values, samples = collect(
            (k, v.rstrip("% "), v.endswith("%"))
            for k, v in groups.items()
            if k != "epoch" and k not in self._STEP_GROUPS
        )
        epoch_text = groups.get("epoch")
        epoch = int(float(epoch_text)) if epoch_text and number(epoch_text) is not None else None
        if "step" in groups and number(groups["step"]) is not None:
            total = groups.get("steps_per_epoch")
            emit.append(
                StepRecord(
                    epoch=epoch,
                    step=int(float(groups["step"])),
                    steps_per_epoch=int(float(total)) if total and total.isdigit() else None,
                    loss=values.get("train_loss"),
                )
            )
            return
        if epoch is None:
            self._count += 1
            epoch = self._count
        extras = {k: v for k, v in groups.items() if k in self.extra_columns}
        emit.append(EpochRecord(epoch, values, extras, samples))


def extra_columns(pattern: str) -> tuple[str, ...]:
    """The named groups of a user regex that are no contract column: extra metrics.csv columns."""
    groups = re.compile(pattern).groupindex
    known = {"epoch", SAMPLES, *UserRegex._STEP_GROUPS}
    return tuple(g for g in groups if g not in known and canonical(g) is None)


def check_metrics_source(text: str) -> str | None:
    """Why ``text`` is no valid ``metrics`` value, or None when it is one."""
    if text in METRICS_PRESETS:
        return None
    if text.startswith(REGEX_PREFIX):
        pattern = text[len(REGEX_PREFIX) :]
        try:
            groups = re.compile(pattern).groupindex
            re.compile(pattern.encode())
        except re.error as exc:
            return f"the regex does not compile: {exc}"
        if "epoch" not in groups and not any(canonical(g) not in (None, SAMPLES) for g in groups):
            return (
                "the regex needs a named group for the epoch or a metric, "
                "e.g. (?P<epoch>\\d+) or (?P<train_loss>[\\d.]+)"
            )
        return None
    if text.startswith(CSV_PREFIX):
        if not text[len(CSV_PREFIX) :].strip():
            return "csv: needs the path of the CSV file the script writes (csv:logs/metrics.csv)"
        return None
    names = ", ".join(METRICS_PRESETS)
    return f"unknown metrics source {text!r}: use one of {names}, regex:PATTERN or csv:PATH"
