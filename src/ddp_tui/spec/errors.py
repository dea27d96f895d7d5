"""The errors a spec check reports: one per problem, each naming its field."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddp_tui.errors import DdpTuiError


@dataclass(frozen=True)
class FieldError:
    """One problem with one field: ``message`` says what is allowed and what was given."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SpecError(DdpTuiError, ValueError):
    """A spec that cannot be used; ``errors`` lists every problem."""

    title = "Spec"

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid spec")
