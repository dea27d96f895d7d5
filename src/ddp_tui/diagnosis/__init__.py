"""Why a run failed, why it is pending, and whether it has stalled: pure rules, no I/O.

The facade reads what the rules need (the run's state, ``run.json``, the tails of its
logs, heartbeat times) and hands it over; see docs/architecture.md, "Diagnosis".
"""

from ddp_tui.diagnosis.classify import classify
from ddp_tui.diagnosis.model import (
    DIAGNOSIS_VERSION,
    TAIL_BYTES,
    Diagnosis,
    Evidence,
    LogTail,
    RunFacts,
)
from ddp_tui.diagnosis.pending import pending_reason

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
