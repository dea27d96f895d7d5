"""``ddp-tui resources RUN``: a run's resource telemetry (GPU and host memory, utilisation:
peak, average, mode) as a table, JSON or CSV."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run
from ddp_tui.reports.text import aligned

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.resources import ResourceSummary

#: Columns of RESOURCE_TABLE_HEADER that hold text (left-aligned); the rest are numbers.
_TEXT_COLUMNS = 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``resources``'s parser."""
    res = sub.add_parser(
        name, help="a run's GPU and host memory and utilisation: peak, average, mode"
    )
    add_run_argument(res)
    res_fmt = res.add_mutually_exclusive_group()
    res_fmt.add_argument("--json", action="store_true", help="print the summary as JSON")
    res_fmt.add_argument("--csv", action="store_true", help="print the table as CSV")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the run's resource summary in the format asked for."""
    view = resolve_run(cluster, args.run)
    fmt = "json" if args.json else "csv" if args.csv else "table"
    text = resources_text(
        cluster.resources(view.run_id),
        run_id=view.run_id,
        job_id=view.job_id,
        state=view.state.value,
        telemetry_sec=view.spec.telemetry_sec,
        fmt=fmt,
    )
    print(text, end="")
    return 0


def resources_text(
    summary: ResourceSummary,
    *,
    run_id: str,
    job_id: str | None,
    state: str,
    telemetry_sec: int,
    fmt: str = "table",
) -> str:
    """The output of ``ddp-tui resources``; ``fmt`` is ``"table"``, ``"json"`` or ``"csv"``.

    ``state`` is the run's JobState value: with no samples, it says why there are none.
    """
    from ddp_tui.reports.text import strict_json
    from ddp_tui.resources import (
        RESOURCE_TABLE_HEADER,
        attempts_text,
        empty_reason,
        resources_table,
    )

    reason = empty_reason(telemetry_sec=telemetry_sec, state=state, summary=summary)
    if fmt == "json":
        doc = {"run_id": run_id, "state": state, "empty_reason": reason}
        return strict_json({**doc, **dataclasses.asdict(summary)}) + "\n"
    rows = resources_table(summary)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(RESOURCE_TABLE_HEADER)
        writer.writerows(rows)
        return out.getvalue()
    head = f"{run_id} (job {job_id or '-'}): {state}"
    if reason is not None:
        return f"{head}\n{reason}\n"
    first, last = summary.first_t, summary.last_t
    span = (last - first) / 60.0 if first is not None and last is not None else 0.0
    head += f", {summary.samples} samples over {span:.1f} min"
    if summary.attempts:
        head += ", " + attempts_text(summary.attempts)
    lines = [head, *aligned(RESOURCE_TABLE_HEADER, rows, text_columns=_TEXT_COLUMNS)]
    if summary.gpu_sources:
        lines.append("GPU source: " + ", ".join(summary.gpu_sources))
    lines += [f"note: {note}" for note in summary.notes]
    return "\n".join(lines) + "\n"
