"""Bounded accumulators: memory statistics on 64 MiB bins, means, and plot series.

However long a job runs these stay small: a memory accumulator holds one count per 64 MiB
bin the samples fell in (at most the memory range / 64 MiB), a series at most
:data:`~ddp_tui.resources.summary.MAX_POINTS` points.
"""

from __future__ import annotations

from ddp_tui.resources.summary import MAX_POINTS, MODE_BIN_MIB, MemoryStats, Series


class _Bin:
    __slots__ = ("count", "high", "low", "total")

    def __init__(self, value: float) -> None:
        self.count = 0
        self.total = 0.0
        self.low = value
        self.high = value

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def mean(self) -> float:
        # Clamped: a float sum can round a bin's mean past its edge, out of the bin.
        return min(max(self.total / self.count, self.low), self.high)


class MemoryAcc:
    """Count, sum, peak and per-64-MiB-bin counts: bounded by the memory range."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.peak: float | None = None
        self.bins: dict[int, _Bin] = {}

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.peak = value if self.peak is None else max(self.peak, value)
        key = int(value // MODE_BIN_MIB)
        bin_ = self.bins.get(key)
        if bin_ is None:
            bin_ = self.bins[key] = _Bin(value)
        bin_.add(value)

    def stats(self) -> MemoryStats:
        if not self.count:
            return MemoryStats(0, None, None, None)
        _key, top = max(self.bins.items(), key=lambda kv: (kv[1].count, kv[0]))
        return MemoryStats(self.count, self.peak, self.total / self.count, top.mean())


class MeanAcc:
    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.peak: float | None = None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.count += 1
        self.total += value
        self.peak = value if self.peak is None else max(self.peak, value)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


class SeriesAcc:
    """At most MAX_POINTS points: each point stands for ``stride`` samples; past the bound,
    adjacent pairs merge and the stride doubles, so old and new points keep one resolution.

    ``t`` is kept in epoch seconds and turned into minutes at the end: the run's first
    sample (the axis' origin) may come from a file read later.
    """

    def __init__(self, *, peak: bool) -> None:
        self.peak = peak  # merge by max (memory) rather than by mean (utilisation)
        self.t: list[float] = []
        self.y: list[float] = []
        self.w: list[int] = []
        self.stride = 1
        self.pending: tuple[float, float, int] | None = None

    def _merge(
        self, a: tuple[float, float, int], b: tuple[float, float, int]
    ) -> tuple[float, float, int]:
        (ta, ya, wa), (tb, yb, wb) = a, b
        w = wa + wb
        y = max(ya, yb) if self.peak else (ya * wa + yb * wb) / w
        return ((ta * wa + tb * wb) / w, y, w)

    def add(self, t: float, y: float) -> None:
        point = (t, y, 1)
        self.pending = point if self.pending is None else self._merge(self.pending, point)
        if self.pending[2] < self.stride:
            return
        pt, py, pw = self.pending
        self.pending = None
        self.t.append(pt)
        self.y.append(py)
        self.w.append(pw)
        if len(self.t) >= MAX_POINTS:  # with a pending point, still at most MAX_POINTS
            self._halve()

    def _halve(self) -> None:
        points = list(zip(self.t, self.y, self.w, strict=True))
        merged = [
            self._merge(points[i], points[i + 1]) if i + 1 < len(points) else points[i]
            for i in range(0, len(points), 2)
        ]
        self.t = [p[0] for p in merged]
        self.y = [p[1] for p in merged]
        self.w = [p[2] for p in merged]
        self.stride *= 2

    def series(self, label: str, origin: float) -> Series:
        points = list(zip(self.t, self.y, strict=True))
        if self.pending is not None:
            points.append(self.pending[:2])
        return Series(
            label,
            tuple((t - origin) / 60.0 for t, _ in points),
            tuple(y for _, y in points),
        )
