"""Run detail's text blocks: the summary, the progress line and the metrics table's cells.

Pure functions of the read model (no widgets), so that the screen
(:mod:`ddp_tui.tui.screens.detail`) only lays them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from ddp_tui.tui.formatting import duration, number, rate, size, state_text

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import Progress, RunView


def run_size(run: RunView) -> str:
    spec = run.spec
    return size(int(getattr(spec, "nodes", 1)), int(getattr(spec, "gpus_per_node", 1)))


#: metrics.csv column -> (table header, how to format)
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("epoch", "Epoch"),
    ("train_loss", "Train loss"),
    ("train_acc", "Train acc"),
    ("val_loss", "Val loss"),
    ("val_acc", "Val acc"),
    ("val_mae", "Val MAE"),
    ("val_rmse", "Val RMSE"),
    ("lr", "LR"),
    ("epoch_time_sec", "Epoch time"),
    ("throughput_samples_per_sec", "Samples/s"),
    ("gpu_mem_peak_mib", "Peak MiB"),
    ("world_size", "World"),
)


def metric_cell(column: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column in ("epoch", "world_size") and math.isfinite(value):
        return str(int(value))  # (int() of an infinite cell in a damaged file would raise)
    if column == "epoch_time_sec":
        # A small script's epochs can be sub-second: m:ss would show them all as 0:00.
        return f"{value:.2f}s" if value < 10 else duration(value)
    if column == "throughput_samples_per_sec":
        return rate(value)
    if column == "gpu_mem_peak_mib":
        return f"{value:.0f}"
    return number(value)


def metric_cells(row: Mapping[str, float | None]) -> list[str]:
    """A metrics.csv row's cells; a step window (a loop with no epochs) shows its step in the
    Epoch column as ``it 40``, so one table serves both."""
    cells = [metric_cell(key, row.get(key)) for key, _ in METRIC_COLUMNS]
    step = row.get("step")
    if row.get("epoch") is None and step is not None and math.isfinite(step):
        cells[0] = f"it {int(step)}"
    return cells


def summary_text(run: RunView | None, run_json: Mapping[str, object] | None, run_id: str) -> Text:
    """The summary block: state, attempts, hosts, world size, backend, rendezvous."""
    text = Text()
    if run is None:
        text.append(f" {run_id}", style="bold")
        text.append("  waiting for the run to appear in a refresh...", style="dim")
        return text
    text.append(f" {run.name}", style="bold")
    text.append("  ")
    text.append_text(state_text(run.state))
    if run.reason:
        text.append(f" ({run.reason})", style="dim")
    text.append(f"  {run_size(run)}  elapsed {duration(run.elapsed_sec)}")
    text.append(f"  {run.run_id}", style="dim")
    text.append("\n attempts: ")
    if run.attempts:
        text.append(", ".join(f"#{a.attempt} job {a.job_id}" for a in run.attempts), style="cyan")
    else:
        text.append("none", style="dim")
    if run.group:
        text.append(f"   group {run.group}", style="dim")
    spec = run.spec
    if spec.entry == "script":
        text.append("\n script: ")
        text.append(f"{spec.script} {spec.script_args}".strip(), style="bold")
        where = "in place" if spec.code_mode == "in-place" else f"snapshot of {spec.project_dir}"
        text.append(f"   {where}, metrics {spec.metrics}", style="dim")
    hosts: Sequence[str] = run.hosts
    world = run.world_size
    backend = run.backend
    rendezvous = run.rendezvous
    if run_json:
        listed = run_json.get("hosts")
        if not hosts and isinstance(listed, list):
            hosts = [str(h) for h in listed]
        world = world or _int_or_none(run_json.get("world_size"))
        backend = backend or _str_or_none(run_json.get("backend"))
        rendezvous = rendezvous or _str_or_none(run_json.get("rendezvous"))
    observed = run_json.get("observed") if run_json else None
    if isinstance(observed, Mapping) and observed.get("group") not in (None, "unknown"):
        # What the ranks formed, not what they were launched as (a user's script, observed).
        world = _int_or_none(observed.get("world_size"))
        backend = _str_or_none(observed.get("backend"))
        hosts = [str(h) for h in observed.get("hosts") or ()] or hosts
        text.append_text(observed_text(observed))
    sources = run_json.get("metric_sources") if run_json else None
    if isinstance(sources, Mapping) and sources:
        text.append_text(sources_text(sources))
    if run.note:
        text.append(f"\n {run.note}", style="bold yellow")
    for damage in run.damage:  # what makes it DAMAGED, file by file
        text.append(f"\n DAMAGED {damage}", style="bold red")
    if run.preflight is not None:
        text.append(f"\n {run.preflight.describe()}", style="bold")
        hosts = hosts or run.preflight.hosts
        world = world or run.preflight.world_size
        backend = backend or run.preflight.backend
    text.append("\n hosts: ")
    text.append(", ".join(hosts) if hosts else "-", style="bold")
    text.append(f"   world size: {world if world is not None else '-'}")
    text.append(f"   backend: {backend or '-'}")
    text.append(f"   rendezvous: {rendezvous or '-'}")
    return text


def observed_text(observed: Mapping[str, object]) -> Text:
    """The line on what a user's script's ranks formed: green when one group, red when not."""
    text = Text("\n observed: ")
    reason = str(observed.get("reason") or observed.get("group"))
    if observed.get("group") == "formed":
        text.append(reason, style="green")
        devices = observed.get("devices")
        if isinstance(devices, list) and devices:
            text.append(f" on {', '.join(str(d) for d in devices)}", style="dim")
        sync = observed.get("sync")
        if isinstance(sync, Mapping) and sync.get("state") == "never":  # a group, N models
            text.append(f", but never synchronised gradients: {sync.get('reason')}", "bold red")
    else:
        launched = observed.get("launched")
        alone = isinstance(launched, int) and launched > 1
        text.append(f"the ranks trained alone: {reason}" if alone else reason, style="bold red")
    frameworks = observed.get("frameworks")
    if isinstance(frameworks, Mapping) and frameworks:
        text.append(f"   ({', '.join(str(f) for f in frameworks)})", style="dim")
    return text


def sources_text(sources: Mapping[str, object]) -> Text:
    """Where a script's metrics columns came from (run.json's ``metric_sources``), by source:
    `` metrics from: summary.csv (train_loss, val_acc)  observed (epoch_time_sec)``."""
    by_source: dict[str, list[str]] = {}
    for column, source in sources.items():
        by_source.setdefault(str(source), []).append(str(column))
    text = Text("\n metrics from: ")
    for i, (source, columns) in enumerate(by_source.items()):
        text.append("  " if i else "")
        text.append(source, style="bold")
        text.append(f" ({', '.join(columns)})", style="dim")
    return text


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def progress_text(run: RunView | None, progress: Progress | None) -> Text:
    if run is not None and run.preflight is not None:
        return Text(f" {run.state.value.lower()}: {run.preflight.describe()}")
    if run is not None and run.by_steps:  # a script with no epochs: its steps, and an ETA
        ended = f"ended {run.state.value}: " if run.state.is_terminal else ""
        loss = f"  loss {number(progress.loss)}" if progress is not None and not ended else ""
        return Text(f" {ended}{run.epoch_label}{loss}")
    if run is not None and run.state.is_terminal:
        # The bar keeps the last step reached; the label says the run is over.
        return Text(f" ended {run.state.value}: {run.epochs_done}/{run.epochs_total} epochs")
    if progress is None:
        if run is not None and run.epochs_total:
            return Text(f" epoch {run.epochs_done}/{run.epochs_total}")
        return Text(" no progress yet", style="dim")
    total = f"/{run.epochs_total}" if run is not None and run.epochs_total else ""
    of = f"/{progress.steps_per_epoch}" if progress.steps_per_epoch else ""
    return Text(
        f" epoch {progress.epoch}{total}  step {progress.step}{of}"
        f"  loss {number(progress.loss)}  {rate(progress.samples_per_sec)}"
    )
