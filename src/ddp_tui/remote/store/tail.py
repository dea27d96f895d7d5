"""Incremental readers for files that grow: logs, ``metrics.csv``, ``progress.jsonl``.

A reader keeps a byte offset and turns each :class:`ReadResult` into the complete
new lines since the last one. The caller builds the :class:`FileRead` requests
(``reader.request()``), answers them in one :class:`Batch` with the other reads of
a refresh, and feeds every result back (``reader.read_new(result)``). Over SSH that
is one round trip for every file of every run.

What never breaks a reader: a partial last line (held back until its newline
arrives), invalid UTF-8 (decoded with U+FFFD), a truncated file (size below the
offset) or a rotated one (new inode, or the file vanished and came back); the last
two restart the reader at byte 0, bump ``generation`` and ask for a re-read.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ddp_tui.jobfiles import json_objects, row_position
from ddp_tui.remote.backends.executor import Batch, Executor, FileRead, ReadResult

T = TypeVar("T")

#: Bytes read per request; a reader that is further behind catches up over refreshes.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
#: A "line" longer than this is emitted in pieces so memory stays bounded.
MAX_LINE_BYTES = 1024 * 1024


class IncrementalFile:
    """Complete new lines of a growing text file, from a byte offset.

    ``tail_bytes`` starts a reader of a big existing file near its end (a log of
    1 GB need not be read from byte 0): the first result then only measures the
    file, the next read starts ``tail_bytes`` before the end and drops the first,
    cut-off line.
    """

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        tail_bytes: int | None = None,
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.tail_bytes = tail_bytes
        #: Bumped on every restart (truncation, rotation); consumers drop what they kept.
        self.generation = 0
        #: True when the last result was discarded and the file should be read again now.
        self.needs_reread = False
        #: True when the last read stopped short of the file's end (``max_bytes``).
        self.behind = False
        self._offset = 0
        self._pending = b""
        self._inode: int | None = None
        self._started = False
        self._gone = False
        self._skip_first_line = False
        #: Jump to the tail when more than 2 x tail_bytes behind (logs only: metrics must
        #: not lose rows).
        self.skip_behind = False

    @property
    def offset(self) -> int:
        """Bytes consumed so far (including the held-back partial line)."""
        return self._offset

    @property
    def pending_text(self) -> str:
        """The partial last line, e.g. a progress bar still being drawn."""
        return _decode(self._pending)

    def request(self) -> FileRead:
        """The read that brings this reader up to date."""
        return FileRead(self.path, self._offset, self.max_bytes)

    def reset(self) -> None:
        """Start again from byte 0 (the caller also drops what it kept)."""
        self._offset = 0
        self._pending = b""
        self._inode = None
        self._started = False
        self._gone = False
        self._skip_first_line = False
        self.generation += 1

    def read_new(self, result: ReadResult) -> list[str]:
        """The complete lines that ``result`` adds, without their line endings."""
        self.needs_reread = False
        req = result.request
        if req.path != self.path or req.offset != self._offset:
            return []  # answered for an older state of this reader (e.g. before a restart)
        st = result.stat
        self.behind = st is not None and not st.is_dir and st.size > req.offset + len(result.data)
        if st is None:
            # Absent: not created yet, or removed by a rotation. Whatever appears
            # under this name next is a new file.
            if self._started:
                self._gone = True
            return []
        if st.is_dir:
            return []
        if self._started and (
            self._gone
            or st.size < self._offset
            or (self._inode is not None and st.inode and st.inode != self._inode)
        ):
            self.reset()
            self.needs_reread = True
            return []
        if not self._started:
            self._started = True
            self._inode = st.inode or None
            if self.tail_bytes is not None and st.size > self.tail_bytes and self._offset == 0:
                self._offset = st.size - self.tail_bytes
                self._skip_first_line = True
                self.needs_reread = True
                return []
        elif self.skip_behind and self.tail_bytes is not None:
            behind = st.size - self._offset - len(result.data)
            if behind > 2 * self.tail_bytes:
                # A log growing faster than we follow: show its tail, say what was skipped.
                skipped = st.size - self.tail_bytes - self._offset
                self._offset = st.size - self.tail_bytes
                self._pending = b""
                self._skip_first_line = True
                self.needs_reread = True
                return [f"[... {skipped / 2**20:.1f} MiB not shown ...]"]
        return self._consume(result.data)

    def read_from(self, executor: Executor) -> list[str]:
        """Convenience for one file: read it now (re-reading once after a restart)."""
        return _read_settled(self, executor)

    def _consume(self, data: bytes) -> list[str]:
        if not data:
            return []
        self._offset += len(data)
        parts = (self._pending + data).split(b"\n")
        self._pending = parts.pop()
        if self._skip_first_line and parts:
            parts.pop(0)
            self._skip_first_line = False
        if len(self._pending) > MAX_LINE_BYTES:
            parts.append(self._pending)
            self._pending = b""
        return [_decode(p) for p in parts]


def _decode(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]  # CRLF files
    return raw.decode("utf-8", "replace")


MetricsRow = dict[str, float | None]


def parse_metrics_row(header: list[str], line: str) -> MetricsRow | None:
    """One ``metrics.csv`` row as floats (None for empty cells); None if malformed."""
    if not line.strip():
        return None
    if '"' in line:  # quoting is rare (a damaged file): the csv module's rules then
        try:
            fields = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            return None
    else:  # the trainer's rows: plain numbers, split directly (several times faster)
        fields = line.split(",")
    if len(fields) != len(header):
        return None
    row: MetricsRow = {}
    for name, cell in zip(header, fields, strict=True):
        try:  # (float() takes surrounding blanks; a blank or empty cell is None)
            row[name] = float(cell) if cell else None
        except ValueError:
            row[name] = None
    return row


def parse_header(line: str) -> list[str]:
    return [c.strip() for c in line.lstrip("\ufeff").split(",")]


def parse_metrics_csv(text: str) -> list[MetricsRow]:
    """Every complete row of a whole ``metrics.csv`` text (a partial last row is ignored)."""
    lines = text.split("\n")
    lines.pop()  # the part after the last newline is incomplete (or empty)
    if not lines:
        return []
    header = parse_header(lines[0].rstrip("\r"))
    rows: list[MetricsRow] = []
    for line in lines[1:]:
        row = parse_metrics_row(header, line.rstrip("\r"))
        if row is not None:
            rows.append(row)
    return rows


#: The columns Run detail plots (the loss, its quality metric, throughput); a followed
#: run's :class:`PlotSample` keeps these.
PLOT_COLUMNS = (
    "train_loss",
    "val_loss",
    "train_acc",
    "val_acc",
    "val_rmse",
    "throughput_samples_per_sec",
)
#: Buckets a :class:`PlotSample` keeps per column: each gives at most two points, so a
#: plotted line has at most ``2 * PLOT_BUCKETS + 2`` points whatever the number of rows.
PLOT_BUCKETS = 250
#: One column's plot: the epochs and the values, in the file's order.
PlotSeries = tuple[tuple[float, ...], tuple[float, ...]]
_Point = tuple[int, float, float]  # row index, epoch, value


class PlotSample:
    """A bounded sample of metrics rows for plotting, kept up to date row by row.

    Consecutive rows fall into buckets of ``stride`` rows; each bucket keeps, per column,
    its lowest and its highest point, and the first and the last point are always kept.
    Past :data:`PLOT_BUCKETS` buckets, adjacent pairs merge and the stride doubles.
    Extremes rather than an even stride: a loss spike or a collapse of one epoch stays on
    the plot at any length, where every k-th row would skip it; and unlike LTTB this needs
    only the new rows (O(columns) per row), so the app never walks the whole file again.
    The result depends only on the rows, not on how they arrived.
    """

    def __init__(
        self, columns: tuple[str, ...] = PLOT_COLUMNS, *, buckets: int = PLOT_BUCKETS
    ) -> None:
        if buckets < 2 or buckets % 2:
            raise ValueError(f"buckets must be even and at least 2, not {buckets}")
        self.columns = columns
        self.max_buckets = buckets
        self.stride = 1
        self.rows = 0
        self._buckets = 0
        self._lo: dict[str, list[_Point | None]] = {c: [] for c in columns}
        self._hi: dict[str, list[_Point | None]] = {c: [] for c in columns}
        self._first: dict[str, _Point] = {}
        self._last: dict[str, _Point] = {}
        self._series: tuple[int, dict[str, PlotSeries]] | None = None

    def add_all(self, rows: Sequence[MetricsRow]) -> None:
        for row in rows:
            self.add(row)

    def add(self, row: MetricsRow) -> None:
        index = self.rows
        self.rows += 1
        bucket = index // self.stride
        if bucket == self._buckets:
            if self._buckets == self.max_buckets:
                self._halve()
                bucket = index // self.stride
            if bucket == self._buckets:
                self._buckets += 1
                for c in self.columns:
                    self._lo[c].append(None)
                    self._hi[c].append(None)
        x = row_position(row)  # its epoch, or a step window's step
        if x is None:
            return  # nothing to place it at
        isfinite, los, his, last = math.isfinite, self._lo, self._hi, self._last
        for c in self.columns:
            y = row.get(c)
            if y is None or not isfinite(y):
                continue
            point = (index, x, y)
            lo, hi = los[c], his[c]
            if (low := lo[bucket]) is None or y < low[2]:
                lo[bucket] = point
            if (high := hi[bucket]) is None or y > high[2]:
                hi[bucket] = point
            if c not in last:
                self._first[c] = point
            last[c] = point

    def _halve(self) -> None:
        for c in self.columns:
            lo, hi = self._lo[c], self._hi[c]
            self._lo[c] = [_lower(lo[i], lo[i + 1]) for i in range(0, len(lo), 2)]
            self._hi[c] = [_higher(hi[i], hi[i + 1]) for i in range(0, len(hi), 2)]
        self._buckets //= 2
        self.stride *= 2

    def series(self) -> dict[str, PlotSeries]:
        """Each column's points in the file's order (columns without any are left out)."""
        if self._series is not None and self._series[0] == self.rows:
            return self._series[1]
        out: dict[str, PlotSeries] = {}
        for c in self.columns:
            if c not in self._first:
                continue
            points = {p[0]: p for p in (*self._lo[c], *self._hi[c]) if p is not None}
            points[self._first[c][0]] = self._first[c]
            points[self._last[c][0]] = self._last[c]
            ordered = [points[i] for i in sorted(points)]
            out[c] = (tuple(p[1] for p in ordered), tuple(p[2] for p in ordered))
        self._series = (self.rows, out)
        return out


def _lower(a: _Point | None, b: _Point | None) -> _Point | None:
    if a is None or b is None:
        return a or b
    return b if b[2] < a[2] else a


def _higher(a: _Point | None, b: _Point | None) -> _Point | None:
    if a is None or b is None:
        return a or b
    return b if b[2] > a[2] else a


def plot_sample(rows: Sequence[MetricsRow]) -> dict[str, PlotSeries]:
    """The plot sample of these rows at once (what a :class:`MetricsReader` with
    ``sample=True`` has after reading them)."""
    sample = PlotSample()
    sample.add_all(rows)
    return sample.series()


class _ParsedFile(Generic[T]):
    """An :class:`IncrementalFile` whose new lines are parsed into items of type T."""

    def __init__(self, file: IncrementalFile) -> None:
        self.file = file
        self._generation = file.generation

    @property
    def generation(self) -> int:
        return self.file.generation

    @property
    def needs_reread(self) -> bool:
        return self.file.needs_reread

    def request(self) -> FileRead:
        return self.file.request()

    def read_new(self, result: ReadResult) -> list[T]:
        """Items that ``result`` adds; after a restart the kept state starts again."""
        lines = self.file.read_new(result)
        if self.file.generation != self._generation:
            self._generation = self.file.generation
            self._restart()
        return self._parse(lines)

    def read_from(self, executor: Executor) -> list[T]:
        return _read_settled(self, executor)

    def _restart(self) -> None:
        raise NotImplementedError

    def _parse(self, lines: list[str]) -> list[T]:
        raise NotImplementedError


class MetricsReader(_ParsedFile[MetricsRow]):
    """``metrics.csv`` rows as they are appended; ``rows`` holds all of them so far, and
    with ``sample=True`` a :class:`PlotSample` of them is kept as they arrive."""

    def __init__(
        self, path: str, *, max_bytes: int | None = DEFAULT_MAX_BYTES, sample: bool = False
    ) -> None:
        super().__init__(IncrementalFile(path, max_bytes=max_bytes))
        self.header: list[str] | None = None
        self.rows: list[MetricsRow] = []
        self._sampled = sample
        self.sample: PlotSample | None = PlotSample() if sample else None

    def _restart(self) -> None:
        self.header = None
        self.rows = []
        self.sample = PlotSample() if self._sampled else None

    def _parse(self, lines: list[str]) -> list[MetricsRow]:
        new: list[MetricsRow] = []
        for line in lines:
            if self.header is None:
                if line.strip():
                    self.header = parse_header(line)
                continue
            row = parse_metrics_row(self.header, line)
            if row is not None:
                new.append(row)
        self.rows.extend(new)
        if self.sample is not None:
            self.sample.add_all(new)
        return new


class JsonLinesReader(_ParsedFile[dict[str, Any]]):
    """JSON objects from a ``.jsonl`` file; malformed lines and non-objects are skipped."""

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        tail_bytes: int | None = None,
    ) -> None:
        super().__init__(IncrementalFile(path, max_bytes=max_bytes, tail_bytes=tail_bytes))
        #: The newest object read so far.
        self.latest: dict[str, Any] | None = None

    def _restart(self) -> None:
        self.latest = None

    def _parse(self, lines: list[str]) -> list[dict[str, Any]]:
        out = json_objects(lines)
        if out:
            self.latest = out[-1]
        return out


class _Settling(Protocol[T]):
    @property
    def needs_reread(self) -> bool: ...
    def request(self) -> FileRead: ...
    def read_new(self, result: ReadResult) -> list[T]: ...


def _read_settled(reader: _Settling[T], executor: Executor) -> list[T]:
    """Read one file now, once more after a restart (at most three reads)."""
    new: list[T] = []
    for _ in range(3):
        res = executor.run_batch(Batch(reads=[reader.request()])).reads[0]
        new = reader.read_new(res)
        if not reader.needs_reread:
            break
    return new


class ProgressReader(JsonLinesReader):
    """``progress.jsonl``; only the newest lines matter, so a big file is read from its tail."""

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        tail_bytes: int | None = 64 * 1024,
    ) -> None:
        super().__init__(path, max_bytes=max_bytes, tail_bytes=tail_bytes)


class LogReader(IncrementalFile):
    """A job's ``.out``/``.err``: lines as written, starting near the end of a big log."""

    def __init__(
        self,
        path: str,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        tail_bytes: int | None = 2 * 1024 * 1024,
    ) -> None:
        super().__init__(path, max_bytes=max_bytes, tail_bytes=tail_bytes)
        self.skip_behind = True


@dataclass(frozen=True)
class LogChunk:
    """Some of a log as whole lines: its tail, or what came after an offset. Stateless, so
    that a screen and a command line each keep their own place (``offset``) in the file."""

    path: str
    lines: tuple[str, ...] = ()
    #: The partial last line (a progress bar still being drawn): not consumed, the next read
    #: starts at its first byte.
    partial: str = ""
    #: Where the next read starts: after the last whole line.
    offset: int = 0
    #: The file's size; None where it does not exist (yet), or cannot be read (``error``).
    size: int | None = None
    #: The file is shorter than the offset asked (cut, or replaced): read its tail again.
    restarted: bool = False
    error: str = ""

    @property
    def behind(self) -> bool:
        """More was written than this chunk holds: ask again from :attr:`offset`."""
        return self.size is not None and self.size > self.offset + len(self.partial.encode())


def chunk_request(path: str, offset: int | None, max_bytes: int) -> FileRead:
    """The read of ``path``'s last ``max_bytes`` (``offset`` None), or of what follows
    ``offset``, at most ``max_bytes`` of it. A tail reads one byte more, the one before it:
    whether its first line starts whole."""
    if offset is None:
        return FileRead(path, -(max_bytes + 1), max_bytes + 1)
    return FileRead(path, offset, max_bytes)


def log_chunk(result: ReadResult) -> LogChunk:
    """The whole lines of a :func:`chunk_request`'s answer. A tail drops its first line,
    cut off by the read; a line longer than the read is given in pieces, never stuck."""
    req = result.request
    st = result.stat
    asked = max(req.offset, 0)
    if st is None or st.is_dir:
        return LogChunk(req.path, offset=asked, error=result.error)
    if req.offset >= 0 and st.size < req.offset:
        return LogChunk(req.path, offset=0, size=st.size, restarted=True)
    start = req.offset if req.offset >= 0 else max(0, st.size + req.offset)
    data = result.data
    if req.offset < 0 and start > 0:
        cut = data.find(b"\n")
        if cut >= 0:  # the first line began before the read: drop its end
            start += cut + 1
            data = data[cut + 1 :]
    parts = data.split(b"\n")
    partial = parts.pop()
    if not parts and req.max_bytes is not None and len(partial) >= req.max_bytes:
        parts, partial = [partial], b""  # one line longer than a read: give this piece
    return LogChunk(
        req.path,
        lines=tuple(_decode(p) for p in parts),
        partial=_decode(partial),
        offset=start + len(data) - len(partial),
        size=st.size,
    )
