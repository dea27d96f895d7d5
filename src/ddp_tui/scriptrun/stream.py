"""The scan of rank 0's output: whole lines out of pipe reads, helper lines, and the few lines
a preset should look at, found without Python work per line. Stdout gets everything
(:class:`StdoutParser`); stderr only tqdm bars (:class:`BarParser`), where tqdm draws them.

A read is scanned where it lies (``bytes.find`` over ranges, no copies); only the line cut by
the previous read is joined with its rest. ``\\r`` ends a line like ``\\n`` does (tqdm redraws
with it). The helper's ``@ddp-tui`` lines are authoritative: once one is seen, the presets and
the user regex stop, and what they read from the lines before it is dropped.
"""

from __future__ import annotations

import json
import re

from .columns import canonical, is_contract_column
from .presets import (
    LINE_PRESETS,
    REGEX_PREFIX,
    HfDict,
    UserRegex,
    parse_epoch_line,
    parse_key_value,
    parse_tqdm,
)
from .records import EpochRecord, Record, StepRecord, collect

HELPER_TAG = "@ddp-tui"
_TAG = HELPER_TAG.encode()
_HELPER_LINE = re.compile(rb"@ddp-tui (\{[^\r\n]*\})")
_MAX_LINE = 1 << 20  # a longer line is dropped: no metric line is that long


def _line_start(text: bytes, start: int, pos: int) -> int:
    """Where the line holding ``pos`` starts, ``start`` at the earliest."""
    return max(text.rfind(b"\n", start, pos), text.rfind(b"\r", start, pos), start - 1) + 1


def _line_end(text: bytes, pos: int, end: int) -> int:
    """Where the line holding ``pos`` ends (its ``\n`` or ``\r``), or ``end``."""
    ends = [i for i in (text.find(b"\n", pos, end), text.find(b"\r", pos, end)) if i >= 0]
    return min(ends) if ends else end


def _candidate_lines(text: bytes, start: int, end: int) -> list[str]:
    """The lines of ``text[start:end]`` worth a preset's look, in order: those that name an
    epoch (``Epoch``, ``epoch``) and those a lone ``\r`` ends or starts (tqdm's redraws).

    Only two passes touch every byte: ``bytes.find`` for ``poch`` and a ``memchr`` for
    ``\r``, over the range (no copy); per-line work is for the lines found.
    """
    found: dict[int, int] = {}
    pos = text.find(b"poch", start, end)
    while pos >= 0:
        line_start = _line_start(text, start, pos)
        line_end = _line_end(text, pos, end)
        found[line_start] = line_end
        pos = text.find(b"poch", line_end, end)
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
        """Scan the lines ``data`` completes. They are scanned where they lie in ``data``
        (ranges, no copy); only the line cut by the previous read is joined with its rest."""
        first = _line_end(data, 0, len(data))
        if first == len(data):  # no line ends here: all of it continues the cut line
            self._tail += data
            if len(self._tail) > _MAX_LINE:
                self._tail = b""
            return
        head = self._tail + data[: first + 1]
        self._scan(head, 0, len(head), out)
        last = _line_start(data, first, len(data))  # just past the last line end
        if last > first + 1:
            self._scan(data, first + 1, last, out)
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

    def __init__(self, source: str) -> None:
        super().__init__()
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
        return self._overruled(out, helper_before)

    def _overruled(self, out: list[Record], helper_before: bool) -> list[Record]:
        """Drop what presets read from the lines before the first helper line."""
        if self.helper_seen and not helper_before:
            return [r for r in out if r.helper]
        return out

    def _scan(self, text: bytes, start: int, end: int, out: list[Record]) -> None:
        """Records from the whole lines in ``text[start:end]``."""
        # A single-byte search first: memchr, an order faster than the tag's search.
        if text.find(b"@", start, end) >= 0 and text.find(_TAG, start, end) >= 0:
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
        presets = self.presets
        if "tqdm" in presets and "%|" in line and parse_tqdm(line, out):
            return
        if "hf-dict" in presets and self._hf.parse(line, out):
            return
        for name, parse in (("key-value", parse_key_value), ("epoch-line", parse_epoch_line)):
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
