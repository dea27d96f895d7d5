"""Compare's overlay plot: one metric per epoch, one line per run of the group, with a legend
of what differs between them (:attr:`ddp_tui.reports.outcomes.Outcomes.labels`).

:func:`overlay_metrics` and :func:`overlay_lines` are pure (tests read the lines without a
terminal); :func:`draw_overlay` hands them to plotext, as
:func:`~ddp_tui.tui.speedup_plot.draw_speedup` does Compare's speedup plot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ddp_tui.jobfiles import METRICS_COLUMNS
from ddp_tui.tui.speedup_plot import Line

if TYPE_CHECKING:
    from ddp_tui.reports.outcomes import Outcomes

#: At most this many lines: a terminal plot of more is a tangle, and plotext's colours
#: repeat. The runs drawn are the first in the table's order (sort by the metric to see
#: the best ones).
MAX_LINES: Final = 10
#: What a line's legend adds for the group's best run.
BEST_MARK: Final = " (best)"
#: Columns of metrics.csv that are not a metric to plot against the epoch.
_NOT_PLOTTED: Final = frozenset({"epoch", "step", "world_size"})


def overlay_metrics(outcomes: Outcomes) -> list[str]:
    """The metrics any run wrote, the group's own first, then metrics.csv's columns in
    their order, then a script's own columns by name."""
    names = {name for series in outcomes.series.values() for name in series} - _NOT_PLOTTED
    contract = [c for c in METRICS_COLUMNS if c in names and c != outcomes.metric]
    others = sorted(names - set(contract) - {outcomes.metric})
    first = [outcomes.metric] if outcomes.metric in names else []
    return [*first, *contract, *others]


def overlay_lines(outcomes: Outcomes, metric: str, limit: int = MAX_LINES) -> dict[str, Line]:
    """Legend label -> the run's (epoch, value) points of ``metric``, for the first
    ``limit`` runs in the frame's order that have any; the best run's label says so."""
    lines: dict[str, Line] = {}
    for run_id in (str(i) for i in outcomes.frame.index):
        points = outcomes.series.get(run_id, {}).get(metric, ())
        if not points:
            continue
        if len(lines) == limit:
            break
        label = outcomes.labels.get(run_id, run_id)
        if run_id == outcomes.best:
            label += BEST_MARK
        lines[label] = [(float(epoch), value) for epoch, value in points]
    return lines


def overlay_x(outcomes: Outcomes) -> str:
    """``step`` where no run of the group has an epoch (scripts with no epochs: their step
    windows are the points), else ``epoch``."""
    frame = outcomes.frame
    if "epochs_done" not in frame or frame.empty:
        return "epoch"
    return "epoch" if frame["epochs_done"].fillna(0).astype(int).any() else "step"


def draw_overlay(
    plt: Any, lines: Mapping[str, Line], metric: str, runs: int, x: str = "epoch"
) -> None:
    """Draw ``lines`` on a plotext figure (``PlotextPlot.plt``), cleared first; ``runs``:
    how many runs the group has (the title says when fewer are drawn); ``x``: what the points
    lie at, ``epoch`` or, for scripts with no epochs, ``step`` (:func:`overlay_x`)."""
    plt.clear_data()
    plt.clear_figure()
    shown = f" ({len(lines)} of {runs} runs)" if len(lines) < runs else ""
    plt.title(f"{metric} per {x}{shown}")
    plt.xlabel(x)
    for label, points in lines.items():
        plt.plot([x for x, _ in points], [y for _, y in points], label=label, marker="braille")
    epochs = sorted({x for points in lines.values() for x, _ in points})
    if 0 < len(epochs) <= 20:
        plt.xticks(epochs, [f"{x:g}" for x in epochs])
