"""The rule for a hang the NCCL flight recorder caught: which call, who never came.

The facade reads the ranks' dumps (``nccl_trace/<job id>/rank_<N>``, written when a
collective times out) and hands over their analysis (:mod:`ddp_tui.diagnosis.flight_recorder`)
as ``RunFacts.flight``. It comes before the rules that read network failures and NCCL's own
timeout and error lines: those say that a collective timed out (and a peer's closed
connection follows a hang), the dumps say which one and who is missing. It comes after
out-of-memory and a full disk: a rank that died of those leaves no dump, and the others'
hang is only their consequence.
"""

from __future__ import annotations

import re

from ddp_tui.diagnosis.flight_recorder import FlightReport, Hang
from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import MAX_EVIDENCE_CHARS, Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import make
from ddp_tui.diagnosis.text import rank_ranges

#: The watchdog's own line, shown beside the dumps where the log has it.
_WATCHDOG = clue(
    r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out",
    "Watchdog caught collective operation timeout",
    "before timing out",
)
_SPACES = re.compile(r"\s+")
#: Evidence lines: the stuck call on one entering rank, then each absent rank's last entry.
_EVIDENCE_RANKS = 4


def _evidence(report: FlightReport, hang: Hang) -> list[Evidence]:
    out: list[Evidence] = []
    first = hang.entered[0]
    dump = report.dumps.get(first)
    if dump is not None:
        text = f"rank {first}: {hang.entry.label()} ({hang.entry.shape})"
        out.append(Evidence(dump.name, None, _SPACES.sub(" ", text)[:MAX_EVIDENCE_CHARS]))
    for rank, entry in hang.mismatched[:_EVIDENCE_RANKS]:
        d = report.dumps.get(rank)
        if d is not None:
            out.append(Evidence(d.name, None, f"rank {rank}: {entry.label()} ({entry.shape})"))
    for absent in hang.absent[:_EVIDENCE_RANKS]:
        d = report.dumps.get(absent.rank)
        if d is None:
            continue
        newest = reversed(absent.last)
        lasts = "; ".join(e.label(group=e.group != hang.group.name) for e in newest)
        text = f"rank {absent.rank} last: {lasts}" if lasts else f"rank {absent.rank}: no entries"
        out.append(Evidence(d.name, None, text[:MAX_EVIDENCE_CHARS]))
    return out


def _advice(hang: Hang) -> str:
    if hang.absent:
        return (
            "Look at what the missing ranks did after their last call (their own log lines, "
            "`ddp-tui stacks` while it hangs): a data-dependent branch, an exception caught "
            "on one rank, or uneven data that gives one rank fewer steps. Every rank must "
            "make the same collectives in the same order. torchfrtrace reads the dumps in "
            "full (docs/flight-recorder.md)."
        )
    if hang.mismatched:
        return (
            "Every rank must call the same collective with the same sizes and types at the "
            "same point: look for a shape that depends on the rank's data, or ranks that "
            "take different branches."
        )
    if hang.no_dump:
        return (
            "Look for the ranks without a dump first: their own errors in the logs (a rank "
            "that died, or was killed, writes none)."
        )
    return (
        "Every rank was inside the call: suspect the network or a GPU, not the code. "
        "Run `ddp-tui preflight` on the same nodes, and set NCCL_DEBUG=INFO (nccl_env) to "
        "see which transport NCCL uses."
    )


def collective_hang(scan: Scan) -> Diagnosis | None:
    report = scan.facts.flight
    if report is None or not report.hangs:
        return None
    hang = report.hangs[0]
    cause = hang.sentence + "."
    if len(report.hangs) > 1:
        others = ", ".join(h.what.removeprefix("NCCL ") for h in report.hangs[1:3])
        cause += f" Also stuck: {others}."
    if report.unreadable:
        cause += f" Unreadable dumps: {_unreadable_words(report)}."
    if report.not_read:
        cause += (
            f" Ranks {rank_ranges(report.not_read)} were not read (ddp-tui reads the first "
            f"{report.world_size - len(report.not_read)} ranks' dumps)."
        )
    return make(
        "nccl-hang",
        hang.short,
        cause,
        _advice(hang),
        [*_evidence(report, hang), scan.find(_WATCHDOG)],
    )


def _unreadable_words(report: FlightReport) -> str:
    items = sorted(report.unreadable.items())
    text = "; ".join(f"rank {r}: {why}" for r, why in items[:2])
    return text + (f"; {len(items) - 2} more" if len(items) > 2 else "")
