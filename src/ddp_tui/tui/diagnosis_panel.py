"""Run detail's Diagnosis panel: why an ended run ended, that a running run has stalled, and
why a pending run waits.

The texts are pure functions of the read model (:class:`~ddp_tui.remote.model.views.RunView` and
what the screen gathered: a fresh diagnosis, the heartbeats, the log's last lines, the
scheduler's account of why a pending run waits), so they are tested without an app. The
screen owns the keys that act on the panel (see :mod:`ddp_tui.tui.screens.detail`); the
panel only says which they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.stacks_view import STACKS_KEY

if TYPE_CHECKING:
    from ddp_tui.diagnosis import Diagnosis, Evidence
    from ddp_tui.diagnosis.stall import Heartbeat, SilentRank, Stall
    from ddp_tui.diagnosis.waiting import WaitExplanation
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.tui.logview import Stream

#: Key hints, named once: the screen binds the same keys (see DetailScreen.BINDINGS).
EVIDENCE_KEY = "g"
ESTIMATE_KEY = "t"
DIAGNOSE_KEY = "d"
CANCEL_KEY = "c"

#: How many of the log's newest lines a stalled run's panel quotes.
LAST_LINES = 3
#: Evidence and quoted lines are cut to this many characters: the panel stays a few rows.
LINE_CHARS = 110

_SEVERITY_STYLES = {"fix": "bold red", "info": "bold yellow", "ok": "bold blue"}


def evidence_stream(evidence: Evidence) -> Stream | None:
    """The log tab that holds ``evidence``, or None for the scheduler's state or run.json."""
    if evidence.file.endswith(".err"):
        return "err"
    if evidence.file.endswith(".out"):
        return "out"
    return None


def _cut(line: str, chars: int = LINE_CHARS) -> str:
    line = line.strip()
    return line if len(line) <= chars else line[: chars - 1] + "…"


def _title(text: Text, title: str, headline: str, style: str) -> None:
    text.append(f" {title} ", style=f"{style} reverse")
    text.append(f" {headline}", style=style)


def diagnosis_text(diagnosis: Diagnosis) -> Text:
    """An ended run's diagnosis: cause, what to do, and the evidence lines with their labels."""
    text = Text()
    _title(text, "Diagnosis", diagnosis.short, _SEVERITY_STYLES.get(diagnosis.severity, "bold"))
    text.append("\n cause: ", style="bold")
    text.append(diagnosis.cause)
    if diagnosis.advice:
        text.append("\n to do: ", style="bold")
        text.append(diagnosis.advice)
    for evidence in diagnosis.evidence:
        text.append("\n   ")
        text.append(evidence.label, style="cyan")
        if evidence.text:
            text.append(f"  {_cut(evidence.text)}", style="dim")
    if any(evidence_stream(e) for e in diagnosis.evidence):
        text.append(f"\n {EVIDENCE_KEY}", style="bold cyan")
        text.append(" shows the evidence in the log (again: the next one)", style="dim")
    return text


def no_diagnosis_text(run: RunView, diagnosing: bool) -> Text:
    """An ended run without a diagnosis: being computed, or no rule recognised its logs."""
    text = Text()
    _title(text, "Diagnosis", run.state.value, "bold")
    if diagnosing:
        text.append("\n reading the logs...", style="dim")
    else:
        text.append(
            "\n no known cause in the logs' tails: read them below "
            f"({DIAGNOSE_KEY} diagnoses again)",
            style="dim",
        )
    return text


def quiet(seconds: float) -> str:
    """A quiet time as a person says it: ``40 s``, ``12 min``, ``2 h 5 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _silent_rank(rank: SilentRank) -> str:
    where = f"rank {rank.rank}" + (f" on {rank.host}" if rank.host else "")
    if rank.quiet_sec is None:
        return f"{where} (never heard from)"
    at = f", at epoch {rank.epoch} step {rank.step}" if rank.epoch is not None else ""
    return f"{where} ({quiet(rank.quiet_sec)}{at})"


def _heartbeat(beat: Heartbeat, now: float) -> str:
    return (
        f"rank {beat.rank} on {beat.host}: {beat.phase} epoch {beat.epoch} step {beat.step},"
        f" {quiet(now - beat.t)} ago"
    )


def stall_text(
    stall: Stall,
    *,
    heartbeats: Sequence[Heartbeat] = (),
    last_lines: Sequence[tuple[str, str]] = (),
    now: float,
) -> Text:
    """A running run that stalled: for how long, the silent ranks (else the newest
    heartbeats), the log's last lines (``(tab label, line)``), and that it can be cancelled."""
    text = Text()
    _title(
        text,
        "Stalled",
        f"no output, progress or heartbeat for {quiet(stall.quiet_sec)}",
        "bold yellow",
    )
    if stall.silent_ranks:
        text.append("\n silent ranks: ", style="bold")
        text.append("; ".join(_silent_rank(r) for r in stall.silent_ranks))
    elif heartbeats:
        text.append("\n heartbeats: ", style="bold")
        text.append("; ".join(_heartbeat(b, now) for b in heartbeats))
    for label, line in last_lines:
        text.append(f"\n   {label} ", style="cyan")
        text.append(_cut(line), style="dim")
    text.append(f"\n {STACKS_KEY}", style="bold cyan")
    text.append(" shows where each rank waits (every rank's stack), ", style="dim")
    text.append(CANCEL_KEY, style="bold cyan")
    text.append(" cancels the run (asks first)", style="dim")
    return text


def pending_text(run: RunView, wait: WaitExplanation | None, asking: bool) -> Text:
    """A pending run: the scheduler's reason in words, what it waits for and what to do
    (from the reason alone), then on demand the scheduler's own account: the estimated
    start, the priority, the limit, the dependency or the reservation."""
    from ddp_tui.diagnosis.pending import pending_category
    from ddp_tui.diagnosis.waiting import wait_advice, wait_lines

    text = Text()
    reason = run.reason_label or "waiting for the scheduler"
    _title(text, "Pending", reason, "bold yellow")
    if run.reason and run.reason != reason:
        text.append(f" ({run.reason})", style="dim")
    if wait is None or wait.category is None:
        category = pending_category(run.reason)
        text.append("\n waits for: ", style="bold")
        text.append(category.words)
        text.append("\n what to do: ", style="bold")
        text.append(wait_advice(category, run.reason, run.job_id or "JOBID"))
    if asking:
        text.append("\n asking the scheduler why it waits...", style="dim")
    elif wait is None:
        text.append(f"\n {ESTIMATE_KEY}", style="bold cyan")
        text.append(" asks the scheduler why, and when it should start", style="dim")
    else:
        for line in wait_lines(wait)[1:]:  # the first names the job: the title has it
            label, sep, rest = line.partition(": ")
            text.append(f"\n {label}{sep}", style="bold")
            text.append(rest)
        text.append(f"\n ({ESTIMATE_KEY} asks again)", style="dim")
    return text


@dataclass
class PanelState:
    """What the screen gathered beyond the run itself (the panel draws from this)."""

    diagnosis: Diagnosis | None = None  # a fresh one from Cluster.diagnose (None: not yet)
    diagnosed_job: str | None = None  # the attempt it is for
    diagnosing: bool = False
    wait: WaitExplanation | None = None  # why the pending run waits (None: not asked yet)
    asking: bool = False
    heartbeats: list[Heartbeat] = field(default_factory=list)
    #: The followed run's stall as Run detail reads it: with the silent ranks named (the
    #: Jobs table's has none: it reads no heartbeats).
    stall: Stall | None = None
    evidence_index: int = 0  # the next evidence line the jump key shows

    def diagnosis_of(self, run: RunView) -> Diagnosis | None:
        """The freshest diagnosis of the run's latest attempt."""
        if self.diagnosis is not None and self.diagnosed_job == run.job_id:
            return self.diagnosis
        return run.diagnosis


def panel_text(
    run: RunView | None,
    state: PanelState,
    *,
    last_lines: Sequence[tuple[str, str]] = (),
    now: float,
) -> Text | None:
    """The panel's text for ``run``, or None where there is nothing to say (a healthy
    running run, a completed one)."""
    if run is None or run.kind == "preflight":
        return None  # a preflight's result is in the summary already
    if run.state is JobState.PENDING:
        return pending_text(run, state.wait, state.asking)
    stall = state.stall or run.stall
    if stall is not None and not run.state.is_terminal:
        return stall_text(stall, heartbeats=state.heartbeats, last_lines=last_lines, now=now)
    if not run.state.is_terminal:
        return None
    diagnosis = state.diagnosis_of(run)
    if diagnosis is not None:
        return None if diagnosis.severity == "ok" else diagnosis_text(diagnosis)
    if run.state is JobState.COMPLETED:
        return None
    return no_diagnosis_text(run, state.diagnosing)


class DiagnosisPanel(Static):
    """The panel at the top of Run detail; hidden while it has nothing to say."""

    DEFAULT_CSS = """
    DiagnosisPanel {
        height: auto;
        max-height: 12;
        padding: 0 1 0 0;
        margin-bottom: 1;
        background: $boost;
        display: none;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)

    def show_text(self, text: Text | None) -> None:
        self.display = text is not None
        if text is not None:
            self.update(text)
