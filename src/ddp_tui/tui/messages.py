"""Messages the background threads post. Threads never touch widgets; they post these.

Results of a request to the I/O owner (:mod:`ddp_tui.tui.cluster_io`) go to the screen or
widget that asked and do not bubble; failures and notices bubble on to the app, which shows
them (so a screen may handle one, e.g. to end a busy state, and still let the app notify)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.diagnosis import Diagnosis
    from ddp_tui.diagnosis.waiting import WaitExplanation
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.events import NotifyEvent
    from ddp_tui.remote.model.views import Check, RunDetail, RunView, Snapshot
    from ddp_tui.remote.submit.plan import SubmitPlan
    from ddp_tui.reports.efficiency import UsageReport
    from ddp_tui.spec import FieldError
    from ddp_tui.tui.speedup_plot import SeriesPoint


@dataclass
class Connected(Message):
    """The cluster facade is open."""

    cluster: ClusterAPI


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
class EventsClaimed(Message):
    """A refresh claimed notification events for this process to deliver. Never coalesced
    (unlike :class:`SnapshotReady`): each event is delivered by exactly one process."""

    events: tuple[NotifyEvent, ...]


@dataclass
class RefreshFailed(Message):
    """A refresh raised; the header shows it and the poller backs off."""

    error: str


@dataclass
class DetailReady(Message, bubble=False):
    """New data for the open run (incremental: never replaces an earlier one)."""

    detail: RunDetail


@dataclass
class FollowFailed(Message, bubble=False):
    """Following the open run failed this time."""

    error: str


@dataclass
class ChecksReady(Message, bubble=False):
    """The verification checklist of one run."""

    run_id: str
    checks: list[Check]


@dataclass
class DiagnosisReady(Message, bubble=False):
    """A fresh diagnosis of one run's latest attempt (None: no rule recognised it)."""

    run_id: str
    diagnosis: Diagnosis | None


@dataclass
class ForeignJobsReady(Message):
    """The user's other jobs (not ddp-tui's), listed with a refresh while ``a`` is on."""

    jobs: tuple[UserJob, ...]
    error: str | None = None


@dataclass
class UsageReady(Message, bubble=False):
    """What one ended run's job used against what it held, and what to ask for next time."""

    run_id: str
    report: UsageReport


@dataclass
class WaitReady(Message, bubble=False):
    """Why one pending run waits, and when it should start, as its scheduler said."""

    run_id: str
    wait: WaitExplanation


@dataclass
class PreviewReady(Message, bubble=False):
    """The plan of the form numbered ``seq`` (None: the form did not convert, or not
    connected), with every field error (the form's conversion errors first)."""

    seq: int
    plan: SubmitPlan | None
    errors: Sequence[FieldError]
    form: dict[str, str]  # the form it was planned from
    note: str = ""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PreviewReady)


@dataclass
class Submitted(Message, bubble=False):
    """A submit, sweep or preflight went through."""

    runs: list[RunView]
    what: str


@dataclass
class SubmitRejected(Message, bubble=False):
    """The facade refused the spec; the errors name the fields."""

    errors: Sequence[FieldError]


@dataclass
class ComparisonReady(Message, bubble=False):
    """The scaling comparison of one group."""

    group: str
    frame: pd.DataFrame
    extra: dict[str, Any] | None = None


@dataclass
class AdviceReady(Message, bubble=False):
    """The scaling advice of one group, or (``advice`` None) why there is none in one line:
    Compare's Advice panel says it, and the comparison above it still stands."""

    group: str
    advice: Advice | None
    #: The plot's points (``ddp_tui.advisor.report.speedup_series``), worked out off the UI.
    series: list[SeriesPoint] = field(default_factory=list)
    error: str = ""


@dataclass
class ActionDone(Message):
    """A cancel or retry went through; ``select`` is a run to put the cursor on."""

    text: str
    select: str | None = None


@dataclass
class Notice(Message):
    """Something finished that the user should hear of (an export, a saved script)."""

    text: str
    title: str = ""


@dataclass
class RequestFailed(Message):
    """A request to the I/O owner raised; ``what`` names it ("Verify"), ``title`` is the
    notification's (:func:`~ddp_tui.tui.formatting.failure_title`)."""

    what: str
    error: str
    title: str
