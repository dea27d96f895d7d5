"""``ddp-tui diff RUN_A RUN_B``: two runs side by side, as Markdown tables or JSON.

The two runs are found by id, prefix or job id, and the facade's
:class:`~ddp_tui.reports.outcomes.RunDiff` is printed as :func:`diff_text` says. pandas is
imported only when the command runs: the diff is a data frame.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from ddp_tui.cli.lookup import RUN_HELP, resolve_run
from ddp_tui.reports.text import strict_json

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.reports.outcomes import RunDiff

#: The per-epoch columns the text shows (the JSON has every column either run wrote).
_EPOCH_COLUMNS = ("train_loss",)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``diff``'s parser."""
    d = sub.add_parser(
        name,
        help="two runs side by side: the spec fields that differ, their outcomes, and "
        "their validation metric per epoch",
    )
    d.add_argument("run_a", help=RUN_HELP)
    d.add_argument("run_b", help="the other run, the same way")
    d.add_argument("--json", action="store_true", help="print the diff as JSON")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the diff of the two runs (exit 2 when both name the same run)."""
    a, b = resolve_run(cluster, args.run_a), resolve_run(cluster, args.run_b)
    if a.run_id == b.run_id:
        print(f"ddp-tui: diff needs two different runs: both name {a.run_id}", file=sys.stderr)
        return 2
    print(diff_text(cluster.diff(a.run_id, b.run_id), as_json=args.json), end="")
    return 0


def diff_text(diff: RunDiff, *, as_json: bool = False) -> str:
    """The diff as Markdown tables (fields, outcomes, metrics per epoch), or as JSON."""
    return strict_json(diff_doc(diff)) + "\n" if as_json else _markdown(diff)


def _rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """One object per epoch: ``epoch`` and every column, None where a run has no value."""
    return [{str(k): _cell(v) for k, v in r.items()} for r in df.reset_index().to_dict("records")]


def _cell(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def diff_doc(diff: RunDiff) -> dict[str, Any]:
    """The diff as JSON-able data: ``fields`` and ``outcomes`` as ``{name: {"a", "b"}}``,
    ``epochs`` one object per epoch with ``<column>_a`` and ``<column>_b``."""
    return {
        "run_a": diff.run_a,
        "run_b": diff.run_b,
        "metric": diff.metric,
        "higher_is_better": diff.direction > 0,
        "hours_unit": diff.hours_unit,
        "fields": {name: {"a": a, "b": b} for name, a, b in diff.fields},
        "outcomes": {name: {"a": a, "b": b} for name, a, b in diff.summary},
        "epochs": _rows(diff.metrics),
    }


def _better(diff: RunDiff, name: str, a: Any, b: Any) -> str:
    """Which side the metric favours ("A", "B" or "" for a tie or a missing value)."""
    if name not in ("final_val", "best_val") or a is None or b is None or a == b:
        return ""
    return "A" if (a - b) * diff.direction > 0 else "B"


def _markdown(diff: RunDiff) -> str:
    import pandas as pd

    from ddp_tui.reports.outcomes import hours_column, value_text
    from ddp_tui.reports.results import to_markdown

    out = [f"A: {diff.run_a}", f"B: {diff.run_b}", ""]
    if diff.fields:
        fields = pd.DataFrame(
            [(n, value_text(n, a), value_text(n, b)) for n, a, b in diff.fields],
            columns=["field", "A", "B"],
        )
        out.append(to_markdown(fields, index=False))
    else:
        out += ["No spec field differs (labels such as the name aside).", ""]
    word = "higher" if diff.direction > 0 else "lower"
    out.append(f"Metric: {diff.metric} ({word} is better).")
    out.append("")
    names = {
        "final_val": f"final {diff.metric}",
        "best_val": f"best {diff.metric}",
        "gpu_hours": hours_column(diff.hours_unit),
    }
    outcomes = pd.DataFrame(
        [
            (names.get(n, n), _summary_text(n, a), _summary_text(n, b), _better(diff, n, a, b))
            for n, a, b in diff.summary
        ],
        columns=["outcome", "A", "B", "better"],
    )
    out.append(to_markdown(outcomes, index=False))
    shown = [c for c in (diff.metric, *_EPOCH_COLUMNS) if f"{c}_a" in diff.metrics.columns]
    if shown and len(diff.metrics):
        epochs = diff.metrics[[f"{c}_{s}" for c in shown for s in ("a", "b")]]
        epochs = epochs.rename(
            columns={f"{c}_{s}": f"{c} {s.upper()}" for c in shown for s in "ab"}
        )
        out.append(to_markdown(epochs, formats={c: "{:.4f}" for c in epochs.columns}))
    else:
        out.append("No epoch has a metric yet.\n")
    return "\n".join(out)


_SUMMARY_FORMATS = {
    "final_val": "{:.4f}",
    "best_val": "{:.4f}",
    "wall_sec": "{:.0f}",
    "gpu_hours": "{:.3g}",
    "throughput": "{:.1f}",
    "cpu_used": "{:.0%}",
    "mem_used": "{:.0%}",
}


def _summary_text(name: str, value: Any) -> str:
    if value is None:
        return "-"
    fmt = _SUMMARY_FORMATS.get(name)
    return fmt.format(value) if fmt and isinstance(value, int | float) else str(value)
