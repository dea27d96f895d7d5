"""The scan of rank 0's output: whole lines out of pipe reads, helper lines, and the few lines
a preset should look at, found without Python work per line. Stdout gets everything
(:class:`StdoutParser`); stderr only tqdm bars (:class:`BarParser`), where tqdm draws them.

A read is scanned in one pass of a few C searches, where it lies (a range, no copy) or, when
the previous read cut a line, joined to that line's start. ``\\r`` ends a line like ``\\n``
does (tqdm redraws with it). The helper's ``@ddp-tui`` lines are authoritative: once one is
seen, the presets and the user regex stop, and what they read from the lines before it is
dropped.
"""

from __future__ import annotations

import json
import re
from itertools import islice

from .columns import canonical, is_contract_column
from .meters import MeterLines
from .presets import (
    LINE_PRESETS,
    REGEX_PREFIX,
    HfDict,
    UserRegex,
    parse_epoch_line,
    parse_key_value,
    parse_step_line,
    parse_tqdm,
)
from .records import EpochRecord, Record, StepRecord, collect

HELPER_TAG = "@ddp-tui"
_TAG = HELPER_TAG.encode()
_HELPER_LINE = re.compile(rb"@ddp-tui (\{[^\r\n]*\})")
_MAX_LINE = 1 << 20  # a longer line is dropped: no metric line is that long
#: What a line worth a preset's look holds: an epoch, or a meter line's head (meters.py:
#: timm's ``Train: 0 [``, every ``Test: [``/``Eval: [``, pytorch/examples' `` * Acc@1 25.0``/
#: ``Prec@1 ``). Each needle is a literal regex, a pass over a read only where a ``memchr``
#: finds its first byte: the regex engine's literal scan is 2-6x faster than ``bytes.find`` on
#: them (CPython's find crawls where the needle's bytes are common in logs: `` ``, ``[``,
#: digits); one regex of the four as alternatives is 8x slower than the four (no literal scan).
_NEEDLES = (b"poch", b"Train:", b": [", b"@1 ")
_NEEDLE_RES = tuple((needle[:1], re.compile(re.escape(needle))) for needle in _NEEDLES)
#: A step of an iteration loop (``iter 100: loss 4.2``, ``step 500: ...``): every such line of a
#: read while it holds at most :data:`_STEP_LINES_PER_READ` of them; past that (a loop logging
#: every step at megabytes a second) only the read's last, so that a flood of step lines costs
#: one parse per read rather than one per line (benchmarks/bench_script_metrics.py).
# step, Step; iter, Iter, iteration: one regex pass (a third of two bytes.find passes' time).
_STEP_WORD = re.compile(rb"te[pr]")
# The same to its line's end: a match per line, its end found in the same C call.
_STEP_LINE = re.compile(rb"te[pr][^\r\n]*")
_STEP_LINES_PER_READ = 16


def _line_start(text: bytes, start: int, pos: int) -> int:
    """Where the line holding ``pos`` starts, ``start`` at the earliest."""
    # The \r search only back to the \n: a read without \r is not scanned whole per line.
    start = max(text.rfind(b"\n", start, pos) + 1, start)
    return max(text.rfind(b"\r", start, pos) + 1, start)


def _line_end(text: bytes, pos: int, end: int) -> int:
    """Where the line holding ``pos`` ends (its ``\n`` or ``\r``), or ``end``."""
    newline = text.find(b"\n", pos, end)
    end = newline if newline >= 0 else end
    cr = text.find(b"\r", pos, end)  # only up to the \n, as in _line_start
    return cr if cr >= 0 else end


def _last_step_word(text: bytes, start: int, end: int) -> int:
    """Where the last :data:`_STEP_WORD` of ``text[start:end]`` starts (-1: none), looked for
    in a growing tail of the range: ``rfind`` of each spelling crawls over a whole read where
    one is absent (a loop logs ``step`` or ``iter``, seldom both)."""
    size = 1024
    while True:
        low = max(start, end - size)
        last = -1
        for m in _STEP_WORD.finditer(text, low, end):
            last = m.start()
        if last >= 0 or low == start:
            return last
        size *= 8


def _candidate_lines(text: bytes, start: int, end: int) -> list[str]:
    """The lines of ``text[start:end]`` worth a preset's look, in order: those that name an
    epoch (``Epoch``, ``epoch``) or a step (``step``, ``iter``: an iteration loop's lines) and
    those a lone ``\r`` ends or starts (tqdm's redraws).

    Only a few passes touch every byte: a regex for each of :data:`_NEEDLES`, one for
    :data:`_STEP_WORD` (up to a flood's 17th line) and a ``memchr`` for ``\r``, over the range
    (no copy); per-line work is for the lines found.
    """
    found: dict[int, int] = {}
    for first, needle in _NEEDLE_RES:
        pos = text.find(first, start, end)
        m = needle.search(text, pos, end) if pos >= 0 else None
        while m is not None:
            line_end = _line_end(text, m.start(), end)
            found[_line_start(text, start, m.start())] = line_end
            m = needle.search(text, line_end, end)
    steps = list(islice(_STEP_LINE.finditer(text, start, end), _STEP_LINES_PER_READ + 1))
    if len(steps) > _STEP_LINES_PER_READ:  # a flood: the read's last one only
        pos = _last_step_word(text, start, end)
        found[_line_start(text, start, pos)] = _line_end(text, pos, end)
    else:
        for m in steps:
            found[_line_start(text, start, m.start())] = m.end()
    pos = text.find(b"\r", start, end)
    while pos >= 0:
        if not text.startswith(b"\n", pos + 1):  # \r\n ends an ordinary line
            found[_line_start(text, start, pos)] = pos
            if pos + 1 < end:
                found[pos + 1] = _line_end(text, pos + 1, end)
        pos = text.find(b"\r", pos + 1, end)
    return [text[a : found[a]].decode(errors="replace") for a in sorted(found) if found[a] > a]


def _helper_record(payload: bytes) -> Record | None:
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("event") == "step":
        return StepRecord(
            epoch=_int_or_none(data.get("epoch")),
            step=_int_or_none(data.get("step")),
            steps_per_epoch=_int_or_none(data.get("steps_per_epoch")),
            loss=_float_or_none(data.get("loss")),
            helper=True,
        )
    epoch = _int_or_none(data.get("epoch"))
    metrics = data.get("metrics")
    if data.get("event") != "epoch" or epoch is None or not isinstance(metrics, dict):
        return None
    values, samples = collect(
        (str(k), str(v), False) for k, v in metrics.items() if isinstance(v, int | float)
    )
    extras = {
        str(k): str(v)
        for k, v in metrics.items()
        if canonical(str(k)) is None and not is_contract_column(str(k)) and k != "epoch"
    }
    return EpochRecord(epoch, values, extras, samples, helper=True)


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class _LineStream:
    """Whole lines out of one pipe's reads, handed to :meth:`_scan` as ranges of the read."""

    def __init__(self) -> None:
        self._tail = b""  # a line cut by the end of the last read

    def _lines(self, data: bytes, out: list[Record]) -> None:
        """Scan the lines ``data`` completes, in one scan: where they lie in ``data`` (a
        range, no copy), or joined to the line cut by the previous read. One scan, not the cut
        line's and the rest's, costs half (each scan has its fixed passes, and its own step
        line to parse in a flood) for a copy of the read (a ``memcpy``)."""
        last = _line_start(data, 0, len(data))  # just past the last line end
        if last == 0:  # no line ends here: all of it continues the cut line
            self._tail += data
            if len(self._tail) > _MAX_LINE:
                self._tail = b""
            return
        if self._tail:
            text = self._tail + data[:last]
            self._scan(text, 0, len(text), out)
        else:
            self._scan(data, 0, last, out)
        self._tail = data[last:]

    def _last_line(self, out: list[Record]) -> None:
        """Scan a last line without a newline, at the end of the stream."""
        if self._tail:
            rest, self._tail = self._tail + b"\n", b""
            self._scan(rest, 0, len(rest), out)

    def _scan(self, text: bytes, start: int, end: int, out: list[Record]) -> None:
        raise NotImplementedError


class StdoutParser(_LineStream):
    """The parsing of one stream for one ``metrics`` value (not ``csv:``).

    Helper lines are parsed always and are authoritative: once one is seen, presets and the
    user regex stop.
    """

    def __init__(self, source: str, stream: str = "stdout") -> None:
        super().__init__()
        # Where its records' values came from (run.json's metric_sources). Helper lines are
        # read on stdout only: report.py prints them there.
        self.stream = stream
        self.presets: tuple[str, ...] = ()
        self.regex: UserRegex | None = None
        self.enabled = source != "none"
        if source == "auto":
            self.presets = LINE_PRESETS
        elif source in LINE_PRESETS:
            self.presets = (source,)
        elif source.startswith(REGEX_PREFIX):
            self.regex = UserRegex(source[len(REGEX_PREFIX) :])
        self.helper_seen = False
        self._hf = HfDict()
        self._meters = MeterLines()

    @property
    def extra_columns(self) -> tuple[str, ...]:
        return self.regex.extra_columns if self.regex else ()

    def feed(self, data: bytes) -> list[Record]:
        """Records from the lines ``data`` completes (bytes as read from the pipe)."""
        if not self.enabled or not data:
            return []
        out: list[Record] = []
        helper_before = self.helper_seen
        self._lines(data, out)
        return self._overruled(out, helper_before)

    def finish(self) -> list[Record]:
        """Records from a last line without a newline, at the end of the stream."""
        if not self.enabled:
            return []
        out: list[Record] = []
        helper_before = self.helper_seen
        self._last_line(out)
        if "epoch-line" in self.presets and not self.helper_seen:
            self._meters.finish(out)
        return self._overruled(out, helper_before)

    def _overruled(self, out: list[Record], helper_before: bool) -> list[Record]:
        """Drop what presets read from the lines before the first helper line."""
        if self.helper_seen and not helper_before:
            out = [r for r in out if r.helper]
        for r in out:
            if not r.source:
                r.source = "helper" if r.helper else "regex" if self.regex else self.stream
        return out

    def _scan(self, text: bytes, start: int, end: int, out: list[Record]) -> None:
        """Records from the whole lines in ``text[start:end]``."""
        # A single-byte search first: memchr, an order faster than the tag's search.
        helper = self.stream == "stdout"
        if helper and text.find(b"@", start, end) >= 0 and text.find(_TAG, start, end) >= 0:
            for m in _HELPER_LINE.finditer(text, start, end):
                record = _helper_record(m.group(1))
                if record is not None:
                    out.append(record)
                    self.helper_seen = True
        if self.helper_seen:
            return
        if self.regex is not None:
            if text.find(b"\r", start, end) >= 0:  # the user's ^ and $ know only \n
                self.regex.scan(text[start:end].replace(b"\r", b"\n"), 0, None, out)
            else:
                self.regex.scan(text, start, end, out)
        if self.presets:
            for line in _candidate_lines(text, start, end):
                self._line(line, out)

    def _line(self, line: str, out: list[Record]) -> None:
        if HELPER_TAG in line:  # a helper's line is the helper's (on stderr: nobody's)
            return
        presets = self.presets
        if "tqdm" in presets and "%|" in line and parse_tqdm(line, out):
            return
        if "hf-dict" in presets and self._hf.parse(line, out):
            return
        # Before the epoch-line preset, which would read ``Epoch: [0][ 1/2] ... Loss 7.06
        # (6.9)`` as a step only: a meter line is an epoch log of a plain loop too.
        if "epoch-line" in presets and self._meters.parse(line, out):
            return
        parsers = (
            ("key-value", parse_key_value),
            ("epoch-line", parse_epoch_line),
            ("step-line", parse_step_line),
        )
        for name, parse in parsers:
            if name in presets:
                record = parse(line)
                if record is not None:
                    out.append(record)
                    return


class BarParser(_LineStream):
    """The parsing of rank 0's stderr: tqdm bars only (tqdm and Hugging Face draw them there).

    A read is searched once for ``%|`` (every default tqdm bar has it); only the lines that
    hold it get the ``tqdm`` preset's look, so a read without a bar costs one ``bytes.find``.
    """

    def feed(self, data: bytes) -> list[Record]:
        """Records from the bars ``data`` completes (bytes as read from the pipe)."""
        out: list[Record] = []
        if data:
            self._lines(data, out)
        return out

    def finish(self) -> list[Record]:
        """Records from a last bar without a line end, at the end of the stream."""
        out: list[Record] = []
        self._last_line(out)
        return out

    def _scan(self, text: bytes, start: int, end: int, out: list[Record]) -> None:
        pos = text.find(b"%|", start, end)
        while pos >= 0:
            line_end = _line_end(text, pos, end)
            line = text[_line_start(text, start, pos) : line_end]
            parse_tqdm(line.decode(errors="replace"), out)
            pos = text.find(b"%|", line_end, end)
        for r in out:
            if isinstance(r, EpochRecord):
                r.source = "stderr"
