"""The GPU check's report: steps with their targets, evidence and numbers, as JSON and Markdown.

The report is written again after every step, so a check cut off by its time limit still leaves
everything it measured so far.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, SKIP = "pass", "FAIL", "skip"
PENDING = "pending"  # not judged yet: a step that ends so passes (settle)


@dataclass
class Target:
    """One number against the figure it must reach."""

    what: str
    value: float | None
    target: float
    unit: str = ""

    @property
    def met(self) -> bool:
        return self.value is not None and self.value >= self.target


@dataclass
class Step:
    """One part of the check: what it found, in numbers and in the lines that prove it."""

    name: str
    title: str
    status: str = PENDING
    seconds: float = 0.0
    summary: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)  # caption -> verbatim text

    def fail(self, why: str) -> None:
        self.status = FAIL
        self.summary = f"{self.summary}; {why}" if self.summary else why

    def skip(self, why: str) -> None:
        """Not run on purpose (no CUDA, nothing to show, no time left), unless it failed."""
        if self.status != FAIL:
            self.status = SKIP
        self.summary = f"{self.summary}; {why}" if self.summary else why

    def settle(self) -> None:
        """A step that ran and found nothing wrong passes, unless a target was missed."""
        if self.status == PENDING:
            self.status = PASS
        missed = [t.what for t in self.targets if not t.met]
        if missed and self.status == PASS:
            self.fail("missed: " + ", ".join(missed))


@dataclass
class Report:
    mode: str  # "cuda" or "cpu"
    started_at: float = field(default_factory=time.time)
    device: dict[str, Any] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.status != FAIL for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        steps = []
        for s in self.steps:
            d = asdict(s)
            d["targets"] = [{**asdict(t), "met": t.met} for t in s.targets]
            steps.append(d)
        return {
            "schema": 1,
            "mode": self.mode,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "seconds": round(time.time() - self.started_at, 1),
            "ok": self.ok,
            "device": self.device,
            "carried": self.carried,
            "steps": steps,
        }

    def to_markdown(self) -> str:
        dev = self.device
        lines = [
            "# ddp-tui GPU check",
            "",
            f"- **Device:** {dev.get('summary', 'unknown')}",
            f"- **Started:** {self.to_json()['started_at']}, "
            f"{time.time() - self.started_at:.0f} s in all",
            "- **Carried wheels:** " + (", ".join(self.carried) if self.carried else "none"),
            f"- **Verdict:** {'all passed' if self.ok else 'FAILED'}",
            "",
            "| step | status | time | summary |",
            "|---|---|---|---|",
        ]
        for s in self.steps:
            lines.append(f"| {s.title} | {s.status} | {s.seconds:.0f} s | {_cell(s.summary)} |")
        for s in self.steps:
            lines += ["", f"## {s.title}", "", f"**{s.status}**: {s.summary}"]
            if s.targets:
                lines += ["", "| target | value | needed | met |", "|---|---|---|---|"]
                for t in s.targets:
                    value = (
                        "-"
                        if t.value is None
                        else f"{t.value:,.3g}"
                        if t.value < 10
                        else (f"{t.value:,.0f}")
                    )
                    lines.append(
                        f"| {t.what} | {value} {t.unit} | >= {t.target:,g} {t.unit} | "
                        f"{'yes' if t.met else 'NO'} |"
                    )
            if s.details:
                lines.append("")
                lines += [f"- {k}: {_cell(_short(v))}" for k, v in s.details.items()]
            for caption, text in s.evidence.items():
                lines += ["", f"{caption}:", "", "```", text.rstrip(), "```"]
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu-check.json").write_text(json.dumps(self.to_json(), indent=2) + "\n")
        (out / "gpu-check.md").write_text(self.to_markdown())


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_short(v) for v in value)
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
