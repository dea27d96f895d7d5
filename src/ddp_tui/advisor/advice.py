"""The advice: the size to run, and why (stub while the model is written)."""

from __future__ import annotations

from ddp_tui.advisor.inputs import AdvisorInputs
from ddp_tui.advisor.result import Advice


def advise(inputs: AdvisorInputs) -> Advice:
    """The group's advice (see :mod:`ddp_tui.advisor`)."""
    raise NotImplementedError
