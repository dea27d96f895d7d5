"""The scaling advisor: why a group's efficiency drops, what each size would cost, which to run.

Pure domain code (numbers in, no I/O): :func:`advise` takes :class:`AdvisorInputs` (a group's
runs read by :mod:`ddp_tui.advisor.measure`, and the preflights' all-reduce tables) and answers
an :class:`Advice`; :mod:`ddp_tui.advisor.report` writes it as JSON, Markdown or CSV. The facade
(``Cluster.advise``) reads the run directories and hands them over. ``docs/advisor.md`` says
how each number is measured and modelled.
"""

from __future__ import annotations

from ddp_tui.advisor.advice import advise
from ddp_tui.advisor.inputs import AdvisorInputs, Breakdown, FabricSample, RankTime, SizeRun
from ddp_tui.advisor.result import (
    Advice,
    Change,
    Measured,
    ModelFacts,
    Predicted,
    Recommendation,
    SizeAdvice,
    Straggler,
)

__all__ = [
    "Advice",
    "AdvisorInputs",
    "Breakdown",
    "Change",
    "FabricSample",
    "Measured",
    "ModelFacts",
    "Predicted",
    "RankTime",
    "Recommendation",
    "SizeAdvice",
    "SizeRun",
    "Straggler",
    "advise",
]
