"""Messages the background workers post. Workers never touch widgets; they post these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.remote.cluster import Cluster, RunDetail, RunView, Snapshot
    from ddp_tui.remote.verification import Check
    from ddp_tui.spec import FieldError


@dataclass
class Connected(Message):
    """The cluster facade is open."""

    cluster: Cluster


@dataclass
class ConnectFailed(Message):
    """Opening the cluster failed; the app retries by itself."""

    error: str
    retry_in: float | None


@dataclass
class SnapshotReady(Message):
    """A refresh finished. A burst of them coalesces: only the newest matters."""

    snapshot: Snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


@dataclass
class RefreshFailed(Message):
    """A refresh raised; the header shows it and the poller backs off."""

    error: str


@dataclass
class DetailReady(Message):
    """New data for the open run (incremental: never replaces an earlier one)."""

    detail: RunDetail


@dataclass
class FollowFailed(Message):
    """Following the open run failed this time."""

    error: str


@dataclass
class ChecksReady(Message):
    """The verification checklist of one run."""

    run_id: str
    checks: list[Check]
    show: bool = True


@dataclass
class PreviewReady(Message):
    """The rendered script (or None) and the field errors of the current form."""

    script: str | None
    errors: Sequence[FieldError]
    note: str = ""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PreviewReady)


@dataclass
class Submitted(Message):
    """A submit, sweep or preflight went through."""

    runs: list[RunView]
    what: str


@dataclass
class SubmitRejected(Message):
    """The facade refused the spec; the errors name the fields."""

    errors: Sequence[FieldError]


@dataclass
class ComparisonReady(Message):
    """The scaling comparison of one group."""

    group: str
    frame: pd.DataFrame
    extra: dict[str, Any] | None = None


@dataclass
class ActionDone(Message):
    """A cancel or retry went through; ``select`` is a run to put the cursor on."""

    text: str
    select: str | None = None
