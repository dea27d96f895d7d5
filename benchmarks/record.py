"""What every benchmark shares: its ``--quick`` option, and the results file a full run leaves.

A quick run (``--quick``) shrinks the workload so that the benchmark finishes in seconds and
goes through the same code paths and prints the same table; it proves the benchmark runs and
asserts nothing about speed (the suite runs every quick mode: tests/benchmarks). A full run
writes ``benchmarks/results/<name>.json``: the machine (cores, load average before and after),
the git revision, how long it took, and every figure with its reference and their ratio.
``make bench-report`` prints every results file as one table (``python benchmarks/record.py``).

Use::

    parser = argparse.ArgumentParser(...)
    add_quick_option(parser)
    args = parser.parse_args()
    record = Record("submit", quick=args.quick)
    ...
    record.figure("retry, locked against bare", locked_s, bare_s, unit="s")
    record.save()
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def add_quick_option(parser: argparse.ArgumentParser) -> None:
    """``--quick``: the smallest workload that goes through the benchmark's code paths."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small workload, in seconds: proves the benchmark runs; writes no results file",
    )


@dataclass
class Figure:
    """One measured figure beside its reference (measured in the same run)."""

    name: str
    value: float
    reference: float | None = None
    unit: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.reference is None or self.reference == 0:
            return None
        return self.value / self.reference


def _load() -> float:
    return os.getloadavg()[0]


def _revision() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


@dataclass
class Record:
    """A benchmark run's figures; :meth:`save` writes them (a full run only)."""

    name: str
    quick: bool = False
    figures: list[Figure] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    load_before: float = field(default_factory=_load)

    def figure(
        self,
        name: str,
        value: float,
        reference: float | None = None,
        *,
        unit: str = "",
        note: str = "",
    ) -> Figure:
        """Add one figure; returns it (its ratio, for the benchmark's own table)."""
        fig = Figure(name, value, reference, unit, note)
        self.figures.append(fig)
        return fig

    def save(self) -> Path | None:
        """Write ``benchmarks/results/<name>.json`` (nothing for a quick run); its path."""
        if self.quick:
            return None
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{self.name}.json"
        data = {
            "benchmark": self.name,
            "revision": _revision(),
            "machine": {
                "cores": os.cpu_count(),
                "load_before": round(self.load_before, 2),
                "load_after": round(_load(), 2),
            },
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1),
            "figures": [{**asdict(f), "ratio": f.ratio} for f in self.figures],
        }
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


def _number(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def report(results: Path = RESULTS) -> str:
    """Every results file as one table: benchmark, figure, value, reference, ratio, and
    each benchmark's revision, machine and duration."""
    rows = [("benchmark", "figure", "value", "reference", "ratio", "unit")]
    heads: list[str] = []
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text())
        m = data.get("machine", {})
        heads.append(
            f"{data['benchmark']}: {data.get('revision', '?')}, {data.get('started', '?')}, "
            f"{data.get('seconds', '?')} s, {m.get('cores', '?')} cores, load "
            f"{m.get('load_before', '?')} -> {m.get('load_after', '?')}"
        )
        for f in data.get("figures", []):
            rows.append(
                (
                    data["benchmark"],
                    f["name"],
                    _number(f.get("value")),
                    _number(f.get("reference")),
                    "-" if f.get("ratio") is None else f"{f['ratio']:.2f}x",
                    f.get("unit", ""),
                )
            )
    if len(rows) == 1:
        return f"no results in {results} (run `make bench`)"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *heads])


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
