"""A usage report as text: what ``ddp-tui usage`` prints and Run detail shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddp_tui.reports.efficiency import report_rows
from ddp_tui.reports.text import aligned

if TYPE_CHECKING:
    from ddp_tui.reports.efficiency import UsageReport


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def usage_text(report: UsageReport) -> str:
    """The report as ``ddp-tui usage`` prints it: a head line, each figure with its value and
    source, the nodes' peaks, the suggestion with its reasons, and notes."""
    who = f"{report.run_id} (job {report.job_id})" if report.run_id else f"job {report.job_id}"
    limit = f" of {_clock(report.time_limit_sec)}" if report.time_limit_sec else ""
    ran = "ran" if report.ended else "running for"
    head = f"{who}: {report.state}, {ran} {_clock(report.elapsed_sec)}{limit}"
    if report.nodes:
        head += f" on {', '.join(report.nodes)}"
    lines = [head]
    rows: list[tuple[str, ...]] = list(report_rows(report))
    lines += aligned(("what", "value", "source"), rows)
    if report.per_node:
        lines.append("peak memory by node:")
        lines += [f"  {n.node}  {n.peak_mib:.0f} MiB  {n.bound}: {n.how}" for n in report.per_node]
    lines.append("next time:" if report.ended else "next time (once the job has ended):")
    for s in report.suggestion.all():
        value = f"{s.option}: no suggestion" if s.value is None else f"{s.option}={s.value}"
        lines.append(f"  {value}  ({s.reason})")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"
