"""Compare's Advice panel: the size to run and why, each size measured and predicted, the
changes the measurements support, the stragglers and the notes (an
:class:`~ddp_tui.advisor.Advice`, as ``Cluster.advise`` answers it).

The texts are pure functions of the advice, so tests read them without an app; the panel
scrolls, so a long list of notes never pushes the rest of Compare off the screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ddp_tui.advisor.inputs import PARTS
from ddp_tui.advisor.report import INFERRED_MARK, share_text
from ddp_tui.advisor.result import gpu_hours
from ddp_tui.tui.formatting import duration, number, size

if TYPE_CHECKING:
    from ddp_tui.advisor import Advice, Breakdown, SizeAdvice

#: The breakdown's parts as the table's columns, in the reports' order.
PART_COLUMNS = tuple(
    (part, {"compute_sec": "Comp", "data_sec": "Data", "comm_sec": "Comm"}.get(part, "Other"))
    for part in PARTS
)
#: The mark of the recommended size's row.
PICK_MARK = "▶"

WAITING = "Advice: working out the model from the group's runs..."


def seconds_text(value: float | None) -> str:
    """An epoch time: ``0.42s``, ``12.3s``, then ``m:ss`` from a minute (``-``: unknown)."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    return duration(value)


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def efficiency_text(entry: SizeAdvice) -> Text:
    """The measured efficiency where the size was run, else the predicted one with its
    bounds (``~82% 75-88``); coloured like the comparison's column."""
    measured, predicted = entry.measured, entry.predicted
    if measured is not None and measured.efficiency is not None:
        value, shown = measured.efficiency, _percent(measured.efficiency)
    elif predicted is not None:
        value = predicted.efficiency
        low, high = sorted((predicted.efficiency_low, predicted.efficiency_high))
        shown = f"~{_percent(value)} {low * 100:.0f}-{high * 100:.0f}"
    else:
        return Text("-")
    style = "green" if value >= 0.9 else "yellow" if value >= 0.7 else "red"
    return Text(shown, style=style)


def gpu_hours_text(entry: SizeAdvice) -> str:
    """GPU-hours per epoch: measured where the size was run, else predicted."""
    if entry.measured is not None:
        return number(gpu_hours(entry.world_size, entry.measured.epoch_time_sec), 3)
    if entry.predicted is not None:
        return number(entry.predicted.gpu_hours_per_epoch, 3)
    return "-"


def share_cells(breakdown: Breakdown | None) -> list[str]:
    """Each part's share of the epoch, ``*``-marked where it was inferred."""
    if breakdown is None:
        return ["-"] * len(PART_COLUMNS)
    return [share_text(breakdown, part) for part, _ in PART_COLUMNS]


def sizes_table(advice: Advice) -> Table:
    """One row per size, measured and predicted, smallest first; the recommended one marked."""
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, header_style="bold")
    table.add_column("World", justify="right", no_wrap=True)
    # Short headers: the panel is 86 columns, and a squeezed table runs its headers together.
    table.add_column("Meas", justify="right", no_wrap=True)
    table.add_column("Pred", justify="right", no_wrap=True)
    table.add_column("Efficiency", no_wrap=True)
    table.add_column("GPU-h/ep", justify="right", no_wrap=True)
    table.add_column("Backtest", justify="right", no_wrap=True)
    for _, label in PART_COLUMNS:
        table.add_column(label, justify="right", no_wrap=True)
    pick = advice.recommendation.world_size
    for entry in sorted(advice.sizes, key=lambda s: s.world_size):
        measured, predicted = entry.measured, entry.predicted
        error = entry.backtest_error
        picked = entry.world_size == pick
        table.add_row(
            f"{PICK_MARK if picked else ' '}{entry.world_size}",
            seconds_text(measured.epoch_time_sec if measured else None),
            seconds_text(predicted.epoch_time_sec if predicted else None),
            efficiency_text(entry),
            gpu_hours_text(entry),
            "-" if error is None else f"{error * 100:+.0f}%",
            *share_cells(measured.breakdown if measured else None),
            style="bold" if picked else None if entry.fits_partition else "dim",
        )
    return table


def headline_text(advice: Advice) -> Text:
    """The recommendation: the size and the reason, with the threshold and deadline kept to."""
    rec = advice.recommendation
    text = Text()
    text.append(" Advice ", style="bold green reverse" if rec.world_size else "bold reverse")
    if rec.world_size is not None:
        text.append(f" run {rec.world_size}", style="bold green")
        if rec.nodes is not None and rec.gpus_per_node is not None:
            text.append(f" ({size(rec.nodes, rec.gpus_per_node)})", style="bold green")
    else:
        text.append(" no size to recommend", style="bold")
    kept = f"efficiency >= {_percent(advice.threshold)}"
    if advice.deadline_sec is not None:
        kept += f", deadline {duration(advice.deadline_sec)}"
    text.append(f"  ({kept})", style="dim")
    text.append(f"\n {rec.reason}")
    return text


def _section(title: str, lines: list[str], style: str = "") -> Group | None:
    """A titled list; an item that wraps stays indented under its bullet."""
    if not lines:
        return None
    table = Table.grid(padding=(0, 1, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column(style=style)
    for line in lines:
        table.add_row(" •", line)
    return Group(Text(title, style="bold"), table)


def legend_text(advice: Advice) -> Text:
    """What the table's marks and columns mean."""
    text = Text()
    breakdowns = [s.measured.breakdown for s in advice.sizes if s.measured is not None]
    inferred = any(b is not None and b.inferred for b in breakdowns)
    legend = "Comp..Other: shares of the measured epoch"
    if inferred:
        legend += f"; {INFERRED_MARK} inferred, not measured"
    if any(not s.fits_partition for s in advice.sizes):
        legend += "; dim rows: past the partition's size, never recommended"
    text.append(
        f"{PICK_MARK} recommended; Meas, Pred: epoch time measured and predicted; predicted"
        f" efficiency ~value low-high; {legend}",
        style="dim",
    )
    return text


def details(advice: Advice) -> list[Group]:
    """The changes (each with its number), the stragglers and the notes; those there are."""
    sections = (
        _section("Changes", [c.text for c in advice.changes]),
        _section(
            "Stragglers",
            [
                f"rank {s.rank} on {s.host} at world size {s.world_size}:"
                f" {s.slower_by * 100:.0f}% slower than the median rank (busy"
                f" {number(s.busy_median_sec, 3)} s a step, the median"
                f" {number(s.median_busy_sec, 3)} s)"
                for s in advice.stragglers
            ],
        ),
        _section("Notes", list(advice.notes), style="dim"),
    )
    return [section for section in sections if section is not None]


def advice_renderable(advice: Advice) -> RenderableType:
    """The whole panel for ``advice``."""
    return Group(
        headline_text(advice), Text(), sizes_table(advice), legend_text(advice), *details(advice)
    )


def failure_text(reason: str) -> Text:
    """One line: why there is no advice (the comparison above still stands)."""
    text = Text()
    text.append(" Advice ", style="bold yellow reverse")
    text.append(f" none: {reason}", style="yellow")
    return text


class AdvicePanel(VerticalScroll):
    """Compare's Advice panel (scrolls: focus it with tab, then the arrow keys)."""

    DEFAULT_CSS = """
    AdvicePanel {
        height: 1fr;
        padding: 0 1;
        background: $boost;
    }
    AdvicePanel > Static {
        width: auto;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text(WAITING, style="dim"), id="advice-body")

    def _show(self, renderable: RenderableType) -> None:
        self.query_one("#advice-body", Static).update(renderable)

    def show_waiting(self) -> None:
        self._show(Text(WAITING, style="dim"))

    def show_advice(self, advice: Advice) -> None:
        self._show(advice_renderable(advice))

    def show_failure(self, reason: str) -> None:
        self._show(failure_text(reason))
