"""Why a run failed, why it is pending, and whether it has stalled: pure rules, no I/O.

The facade reads what the rules need (the run's state, ``run.json``, the tails of its
logs, heartbeat times) and hands it over; see docs/architecture.md, "Diagnosis".
"""

from typing import TYPE_CHECKING, Any

from ddp_tui.diagnosis.model import (
    DIAGNOSIS_VERSION,
    TAIL_BYTES,
    Diagnosis,
    Evidence,
    LogTail,
    RunFacts,
)
from ddp_tui.diagnosis.pending import pending_reason

if TYPE_CHECKING:
    from ddp_tui.diagnosis.classifier import classify


def __getattr__(name: str) -> Any:
    # The rules compile their patterns when imported (about 60 ms). The app's views need
    # only the types above, so starting the app does not pay for the rules; the first
    # diagnosis does.
    if name == "classify":
        from ddp_tui.diagnosis.classifier import classify

        return classify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DIAGNOSIS_VERSION",
    "TAIL_BYTES",
    "Diagnosis",
    "Evidence",
    "LogTail",
    "RunFacts",
    "classify",
    "pending_reason",
]
