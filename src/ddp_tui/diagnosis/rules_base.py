"""What every rule module shares: the rule type and how a diagnosis is put together."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ddp_tui.diagnosis.logscan import Hit, Line, Scan
from ddp_tui.diagnosis.model import MAX_EVIDENCE_CHARS, Diagnosis, Evidence

#: A rule looks at one run and answers its diagnosis, or None when it does not apply.
Rule = Callable[[Scan], Diagnosis | None]

#: The Jobs reason column and ``ddp-tui ls`` have room for this much.
SHORT_CHARS = 32

#: The job states in which a job may still produce output: nothing to diagnose yet
#: (stalls and pending reasons are told elsewhere).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "COMPLETING",
        "CONFIGURING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SUSPENDED",
        "STOPPED",
        "SIGNALING",
        "STAGE_OUT",
        "UNKNOWN",
    }
)


def clip(text: str, limit: int = SHORT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis where it was cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def state_of(scan: Scan) -> str:
    """The job state's word, upper case: "CANCELLED" for "CANCELLED by 0"."""
    words = (scan.facts.state or scan.facts.raw_state).split()
    return words[0].upper() if words else ""


def scheduler_evidence(scan: Scan) -> Evidence:
    """The job's state itself as evidence: ``scheduler: CANCELLED by 1000 (exit 0)``."""
    facts = scan.facts
    text = facts.raw_state or facts.state or "?"
    if facts.exit_code is not None:
        text += f" (exit code {facts.exit_code})"
    if facts.reason and facts.reason not in ("None", text):
        text += f", reason {facts.reason}"
    return Evidence("scheduler", None, text[:MAX_EVIDENCE_CHARS])


def evidence_of(items: Iterable[Hit | Line | Evidence | None]) -> tuple[Evidence, ...]:
    """Evidence for hits and lines, in order, each once."""
    out: list[Evidence] = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, Hit):
            ev = item.line.evidence()
        elif isinstance(item, Line):
            ev = item.evidence()
        else:
            ev = item
        if ev not in out:
            out.append(ev)
    return tuple(out)


def make(
    code: str,
    short: str,
    cause: str,
    advice: str,
    evidence: Iterable[Hit | Line | Evidence | None],
    severity: str = "fix",
) -> Diagnosis:
    """A diagnosis with its short form clipped to the column's width."""
    return Diagnosis(
        code=code,
        short=clip(short),
        cause=cause,
        advice=advice,
        evidence=evidence_of(evidence),
        severity=severity,
    )


def rank_words(hit: Hit | Line, host: str = "") -> str:
    """ "rank 1" / "rank 1 on n2" / "" for a hit whose rank is known from its prefix."""
    line = hit.line if isinstance(hit, Hit) else hit
    if line.rank is None:
        return ""
    return f"rank {line.rank}" + (f" on {host}" if host else "")
