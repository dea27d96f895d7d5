"""The advice as JSON (``ddp-tui advise --json``), Markdown and CSV (the comparison exports)."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from typing import Any

from ddp_tui.advisor.inputs import PARTS, Breakdown
from ddp_tui.advisor.result import Advice, SizeAdvice
from ddp_tui.advisor.words import duration


def _breakdown(b: Breakdown | None) -> dict[str, Any] | None:
    if b is None:
        return None
    return {**{p: getattr(b, p) for p in PARTS}, "inferred": list(b.inferred)}


def _size(s: SizeAdvice) -> dict[str, Any]:
    measured = None
    if s.measured is not None:
        m = s.measured
        measured = {
            "run_id": m.run_id,
            "epoch_time_sec": m.epoch_time_sec,
            "throughput": m.throughput,
            "speedup": m.speedup,
            "efficiency": m.efficiency,
            "breakdown": _breakdown(m.breakdown),
        }
    return {
        "world_size": s.world_size,
        "nodes": s.nodes,
        "gpus_per_node": s.gpus_per_node,
        "measured": measured,
        "predicted": asdict(s.predicted) if s.predicted is not None else None,
        "backtest_error": s.backtest_error,
        "fits_partition": s.fits_partition,
    }


def advice_json(advice: Advice) -> dict[str, Any]:
    """The whole advice as JSON-able data (print it with
    :func:`ddp_tui.reports.text.strict_json`)."""
    return {
        "group": advice.group,
        "threshold": advice.threshold,
        "deadline_sec": advice.deadline_sec,
        "sizes": [_size(s) for s in advice.sizes],
        "recommendation": asdict(advice.recommendation),
        "changes": [asdict(c) for c in advice.changes],
        "stragglers": [asdict(s) for s in advice.stragglers],
        "model": asdict(advice.model) if advice.model is not None else None,
        "notes": list(advice.notes),
    }


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


def _time(value: float | None) -> str:
    return "" if value is None else duration(value)


#: What marks a share the advisor worked out rather than measured.
INFERRED_MARK = "*"


def share_text(b: Breakdown, part: str) -> str:
    """``27%``, or ``27%*`` where the part was inferred."""
    return f"{b.share(part):.0%}{INFERRED_MARK if part in b.inferred else ''}"


def breakdown_shares(b: Breakdown | None) -> str:
    """``compute 61% data 4% comm 27%* other 8%``; a ``*`` marks an inferred part."""
    if b is None:
        return ""
    return " ".join(f"{p.removesuffix('_sec')} {share_text(b, p)}" for p in PARTS)


def size_table_rows(advice: Advice) -> list[dict[str, str]]:
    """The sizes as the Markdown table's text cells."""
    rows: list[dict[str, str]] = []
    for s in advice.sizes:
        m, p = s.measured, s.predicted
        rows.append(
            {
                "world": str(s.world_size) + ("" if s.fits_partition else " (>partition)"),
                "shape": f"{s.nodes}x{s.gpus_per_node}",
                "measured": _time(m.epoch_time_sec) if m else "",
                "predicted": _time(p.epoch_time_sec) if p else "",
                "range": f"{_time(p.epoch_time_low_sec)}-{_time(p.epoch_time_high_sec)}"
                if p
                else "",
                "efficiency": _pct(m.efficiency) if m else "",
                "predicted_efficiency": _pct(p.efficiency) if p else "",
                "gpu_hours": f"{p.gpu_hours_per_epoch:.3g}" if p else "",
                "backtest": _signed(s.backtest_error),
                "breakdown": breakdown_shares(m.breakdown) if m else "",
            }
        )
    return rows


_HEADERS = {
    "world": "World",
    "shape": "NxG",
    "measured": "Epoch (measured)",
    "predicted": "Epoch (predicted)",
    "range": "Predicted range",
    "efficiency": "Eff. (measured)",
    "predicted_efficiency": "Eff. (predicted)",
    "gpu_hours": "GPU-h/epoch",
    "backtest": "Backtest error",
    "breakdown": "Breakdown (measured)",
}


def advice_markdown(advice: Advice) -> str:
    """The advice as a Markdown section (comparison.md, and ``ddp-tui advise``)."""
    rec = advice.recommendation
    lines = [f"## Scaling advice: {advice.group}", ""]
    head = f"**Run at world size {rec.world_size}.**" if rec.world_size else "**No advice yet.**"
    lines += [f"{head} {rec.reason[:1].upper()}{rec.reason[1:]}.", ""]
    rows = size_table_rows(advice)
    if rows:
        keys = list(_HEADERS)
        lines.append("| " + " | ".join(_HEADERS[k] for k in keys) + " |")
        lines.append("| " + " | ".join("---" for _ in keys) + " |")
        for row in rows:
            lines.append("| " + " | ".join(row[k] for k in keys) + " |")
        lines += [
            "",
            "Backtest error: the size's epoch time predicted from the other sizes' runs, "
            "against what it measured. `*`: a part inferred, not measured.",
            "",
        ]
    if advice.changes:
        lines += ["### Changes the measurements support", ""]
        lines += [f"- {c.text}." for c in advice.changes]
        lines.append("")
    if advice.stragglers:
        lines += ["### Stragglers", ""]
        lines += [
            f"- rank {s.rank} on {s.host}: {s.slower_by:.0%} slower than the median rank "
            f"(world size {s.world_size}, {s.run_id})"
            for s in advice.stragglers
        ]
        lines.append("")
    if advice.model is not None:
        m = advice.model
        lines += ["### What the model rests on", ""]
        if m.grad_bytes:
            lines.append(f"- gradients: {m.grad_bytes / 2**20:.1f} MiB in {m.buckets} bucket(s)")
        for kind, link in m.links.items():
            lines.append(
                f"- {kind} link: bus bandwidth {link['busbw_gbps']:.3g} GB/s, latency "
                f"{link['alpha_sec'] * 1e6:.0f} us per ring step ({link['source']})"
            )
        if m.gamma is not None:
            lines.append(f"- overlap of backward and all-reduce: gamma {m.gamma:.2f} (fitted)")
        else:
            lines.append("- overlap of backward and all-reduce: not fitted (no overlap assumed)")
        if m.thread_gain is not None:
            how = (
                "measured: the calibration on one thread"
                if m.thread_gain_measured
                else ("assumed: no run measured it")
            )
            lines.append(
                f"- a CPU rank's compute speed on c cores: c ** {m.thread_gain:.2f} ({how})"
            )
        if m.slowdown is not None and m.slowdown > 1.05:
            lines.append(
                f"- in training the all-reduce ran {m.slowdown:.2f}x slower than the link's "
                "measure (it shares the CPU, memory or PCIe with the compute)"
            )
        lines.append("")
    if advice.notes:
        lines += ["### Notes", ""]
        lines += [f"- {n}" for n in advice.notes]
        lines.append("")
    return "\n".join(lines)


CSV_COLUMNS = (
    "world_size",
    "nodes",
    "gpus_per_node",
    "run_id",
    "measured_epoch_time_sec",
    "measured_efficiency",
    "compute_sec",
    "data_sec",
    "comm_sec",
    "other_sec",
    "inferred",
    "predicted_epoch_time_sec",
    "predicted_epoch_time_low_sec",
    "predicted_epoch_time_high_sec",
    "predicted_speedup",
    "predicted_efficiency",
    "gpu_hours_per_epoch",
    "backtest_error",
    "recommended",
    "fits_partition",
)


def advice_csv(advice: Advice) -> str:
    """One row per size, full precision, empty cells for what is unknown."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for s in advice.sizes:
        m, p = s.measured, s.predicted
        b = m.breakdown if m else None
        writer.writerow(
            {
                "world_size": s.world_size,
                "nodes": s.nodes,
                "gpus_per_node": s.gpus_per_node,
                "run_id": m.run_id if m else "",
                "measured_epoch_time_sec": m.epoch_time_sec if m else "",
                "measured_efficiency": m.efficiency if m and m.efficiency is not None else "",
                **{part: getattr(b, part) if b else "" for part in PARTS},
                "inferred": " ".join(b.inferred) if b else "",
                "predicted_epoch_time_sec": p.epoch_time_sec if p else "",
                "predicted_epoch_time_low_sec": p.epoch_time_low_sec if p else "",
                "predicted_epoch_time_high_sec": p.epoch_time_high_sec if p else "",
                "predicted_speedup": p.speedup if p else "",
                "predicted_efficiency": p.efficiency if p else "",
                "gpu_hours_per_epoch": p.gpu_hours_per_epoch if p else "",
                "backtest_error": "" if s.backtest_error is None else s.backtest_error,
                "recommended": "yes" if s.world_size == advice.recommendation.world_size else "",
                "fits_partition": "yes" if s.fits_partition else "no",
            }
        )
    return buf.getvalue()


def speedup_series(
    advice: Advice,
) -> list[tuple[int, float | None, float | None, float | None, float | None]]:
    """For the plot: (world size, measured speedup, predicted, predicted low, predicted high)."""
    return [
        (
            s.world_size,
            s.measured.speedup if s.measured else None,
            s.predicted.speedup if s.predicted else None,
            s.predicted.speedup_low if s.predicted else None,
            s.predicted.speedup_high if s.predicted else None,
        )
        for s in advice.sizes
    ]
