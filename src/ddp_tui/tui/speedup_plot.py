"""Compare's speedup plot: measured speedup against ideal, and once the advice is in, the
model's predicted speedup with its low and high bounds (up to the largest size it predicts).

:func:`speedup_lines` is pure (tests read the lines without a terminal); :func:`draw_speedup`
hands them to plotext.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (world size, measured speedup, predicted, predicted low, predicted high), as
#: ``ddp_tui.advisor.report.speedup_series`` gives them.
SeriesPoint = tuple[int, float | None, float | None, float | None, float | None]
Line = list[tuple[float, float]]

#: Each line's legend label and look (None: no legend entry, e.g. the second bound).
_LOOK: dict[str, tuple[str | None, str, str]] = {
    "ideal": ("ideal", "braille", "gray"),
    "predicted": ("predicted", "braille", "cyan"),
    "low": ("low/high", "braille", "blue"),
    "high": (None, "braille", "blue"),
    "measured": ("measured", "hd", "green"),
}


def _points(pairs: Sequence[tuple[float | None, float | None]]) -> Line:
    return sorted((float(x), float(y)) for x, y in pairs if x is not None and y is not None)


def speedup_lines(
    rows: Sequence[Mapping[str, float | None]], series: Sequence[SeriesPoint] = ()
) -> dict[str, Line]:
    """The plot's lines by name (``measured``, ``ideal``; with ``series`` also ``predicted``,
    ``low`` and ``high``); a line without points is left out.

    ``rows``: the comparison's rows (``world_size``, ``speedup``); ``series``: the advice's.
    Ideal is against the smallest measured size, as the comparison's speedup is."""
    measured = _points([(r.get("world_size"), r.get("speedup")) for r in rows])
    if series:
        measured = _points([(w, m) for w, m, _, _, _ in series]) or measured
    sizes = sorted({w for w, _ in measured} | {float(p[0]) for p in series})
    base = measured[0][0] if measured else (sizes[0] if sizes else None)
    lines: dict[str, Line] = {
        "ideal": [(w, w / base) for w in sizes] if base else [],
        "predicted": _points([(w, p) for w, _, p, _, _ in series]),
        "low": _points([(w, lo) for w, _, _, lo, _ in series]),
        "high": _points([(w, hi) for w, _, _, _, hi in series]),
        "measured": measured,
    }
    return {name: points for name, points in lines.items() if points}


def draw_speedup(plt: Any, lines: Mapping[str, Line]) -> None:
    """Draw ``lines`` on a plotext figure (``PlotextPlot.plt``), cleared first."""
    plt.clear_data()
    plt.clear_figure()
    plt.title("Speedup")
    plt.xlabel("world size")
    for name, (label, marker, color) in _LOOK.items():
        points = lines.get(name)
        if not points:
            continue
        xs, ys = [x for x, _ in points], [y for _, y in points]
        plt.plot(xs, ys, label=label, marker=marker, color=color)
    sizes = sorted({x for points in lines.values() for x, _ in points})
    if sizes:
        plt.xticks(sizes, [f"{x:g}" for x in sizes])
