"""Run detail's Resources tab: the telemetry summary per device and per host, an idle-GPU
flag, and plots over time of GPU memory, GPU utilisation and the job's host memory.

It shows a :class:`~ddp_tui.resources.ResourceView` as the facade builds it (see
docs/architecture.md); the texts are pure functions so that tests can read them without an
app. The detail is followed at about one second, so :meth:`ResourcesPane.show` redraws only
when the view changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from ddp_tui.resources import (
    IDLE_UTIL_PCT,
    RESOURCE_TABLE_HEADER,
    ResourceView,
    Series,
    attempts_text,
    idle_devices,
    resources_table,
)
from ddp_tui.tui.formatting import duration

__all__ = ["ResourcesPane", "flag_text", "status_text"]

#: Past this many series a legend would hide the plot: the lines are drawn unlabelled.
MAX_LABELLED = 8

WAITING = "No resource samples yet: the sampler writes its first within a few seconds of the start."


def flag_text(view: ResourceView | None) -> Text | None:
    """The idle-GPU flag of a running job, e.g. ``idle GPU: n1 gpu0 at <=5% for 4 min``;
    None when no device is idle (or the run is not running)."""
    if view is None:
        return None
    idle = idle_devices(view)
    if not idle:
        return None
    parts = [
        f"{d.host} gpu{d.index} at <={IDLE_UTIL_PCT:.0f}% for {round(d.idle_sec / 60)} min"
        for d in idle
    ]
    return Text("idle GPU: " + "; ".join(parts), style="bold yellow")


def status_text(view: ResourceView | None) -> Text:
    """What stands above the table: the idle flag, why there is nothing (instead of an
    empty table), how much was sampled and from where, and the sampler's notes."""
    if view is None:
        return Text(WAITING, style="dim")
    text = Text()
    flag = flag_text(view)
    if flag is not None:
        text.append_text(flag)
        text.append("\n")
    summary = view.summary
    if view.empty_reason:
        text.append(view.empty_reason, style="yellow")
    else:
        span = (
            duration(summary.last_t - summary.first_t)
            if summary.first_t is not None and summary.last_t is not None
            else "-"
        )
        line = f"{summary.samples} samples over {span}, every {view.interval_sec}s"
        if summary.attempts:
            line += "; " + attempts_text(summary.attempts)
        if summary.gpu_sources:
            line += "; GPU source " + ", ".join(summary.gpu_sources)
        if not summary.devices:
            line += "; no GPU samples"
        text.append(line, style="dim")
    for note in summary.notes:
        if note not in (view.empty_reason or ""):  # the reason may quote them already
            text.append("\nsampler: " + note, style="yellow")
    return text


def _draw(widget: PlotextPlot, title: str, series: Sequence[Series], ylim: float | None) -> None:
    plt = widget.plt
    plt.clear_data()
    plt.clear_figure()
    plt.title(title)
    plt.xlabel("min")
    labelled = len(series) <= MAX_LABELLED
    for one in series:
        if one.x:
            label = one.label if labelled else None
            plt.plot(list(one.x), list(one.y), label=label, marker="braille")
    if ylim is not None:
        plt.ylim(0, ylim)
    widget.refresh()


class ResourcesPane(Vertical):
    """The Resources tab's content; feed it with :meth:`show`."""

    DEFAULT_CSS = """
    ResourcesPane {
        height: 1fr;
    }
    ResourcesPane #resources-status {
        height: auto;
        padding: 0 1;
    }
    ResourcesPane #resources-table {
        height: auto;
        max-height: 10;
    }
    ResourcesPane #resources-plots {
        height: 1fr;
        min-height: 10;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view: ResourceView | None = None
        self.draws = 0  # how many times the view was drawn (tests: no redraw without news)

    def compose(self) -> ComposeResult:
        yield Static(status_text(None), id="resources-status")
        table: DataTable[str] = DataTable(id="resources-table", zebra_stripes=True)
        yield table
        with Horizontal(id="resources-plots"):
            yield PlotextPlot(id="plot-gpu-mem")
            yield PlotextPlot(id="plot-gpu-util")
            yield PlotextPlot(id="plot-host-mem")

    def on_mount(self) -> None:
        table = self.query_one("#resources-table", DataTable)
        for label in RESOURCE_TABLE_HEADER:
            table.add_column(label, key=label)
        self._draw()

    def show(self, view: ResourceView | None) -> bool:
        """Show ``view``; False (nothing redrawn) when it equals the one shown."""
        if view == self.view:
            return False
        self.view = view
        self._draw()
        return True

    def _draw(self) -> None:
        view = self.view
        self.draws += 1
        self.query_one("#resources-status", Static).update(status_text(view))
        table: DataTable[str] = self.query_one("#resources-table", DataTable)
        table.clear()
        has_rows = view is not None and not view.empty_reason and not view.summary.empty
        table.display = has_rows
        if view is not None and has_rows:
            for row in resources_table(view.summary):
                table.add_row(*row)
        self.query_one("#resources-plots").display = has_rows
        gpu = view is not None and bool(view.gpu_memory or view.gpu_util)
        # A CPU run has no GPU series: the host plot takes the width (the status says why).
        self.query_one("#plot-gpu-mem").display = gpu
        self.query_one("#plot-gpu-util").display = gpu
        if view is None or not has_rows:
            return
        if gpu:
            gpu_mem = self.query_one("#plot-gpu-mem", PlotextPlot)
            _draw(gpu_mem, "GPU memory MiB", view.gpu_memory, None)
            _draw(self.query_one("#plot-gpu-util", PlotextPlot), "GPU util %", view.gpu_util, 100)
        host = self.query_one("#plot-host-mem", PlotextPlot)
        _draw(host, "Host memory MiB (job RSS)", view.host_memory, None)
