"""The one owner of cluster I/O in the app: every call on the facade runs here, in order.

The facade (:class:`~ddp_tui.remote.api.ClusterAPI`) is not thread-safe and most of its calls
wait on the network, so no screen calls it. One worker thread runs :meth:`ClusterIO.serve`:
queued requests first, in the order they came, then the refresh when it is due, then the
followed run's new output at the follow cadence. A screen (or widget) asks with a
:class:`Request` (:meth:`ClusterIO.ask`); the result goes back by message to the one that asked,
and a failure as :class:`~ddp_tui.tui.messages.RequestFailed`, which bubbles to the app's
notification.
See docs/architecture.md, "How data flows".

Following: the Run detail screen registers its run (:meth:`ClusterIO.follow`). A refresh then
carries ``follow=`` for it, and between refreshes (which keep the scheduler's pace, never below
:data:`~ddp_tui.tui.pacing.MIN_INTERVAL`) the run alone is read at the follow cadence. Either
way the :class:`~ddp_tui.remote.model.views.RunDetail` goes to that screen as ``DetailReady``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ddp_tui.tui.formatting import describe_error, failure_title
from ddp_tui.tui.messages import (
    DetailReady,
    EventsClaimed,
    FollowFailed,
    ForeignJobsReady,
    RefreshFailed,
    RequestFailed,
    SnapshotReady,
)
from ddp_tui.tui.pacing import SLICE, poll_delay

if TYPE_CHECKING:
    from textual.message import Message
    from textual.message_pump import MessagePump

    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.model.views import Snapshot
    from ddp_tui.spec import ExperimentSpec

T = TypeVar("T")

#: Run detail reads its run about once a second ...
FOLLOW_INTERVAL = 1.0
#: ... and every few seconds once the run has ended (late log lines still arrive).
FOLLOW_IDLE_INTERVAL = 5.0
FOLLOW_MAX_BACKOFF = 30.0


def follow_delay(interval: float, failures: int, ended: bool) -> float:
    """Seconds until the followed run is read again: doubled per failure up to 30 s."""
    if failures:
        return float(min(FOLLOW_MAX_BACKOFF, interval * 2 ** min(failures, 10)))
    return max(interval, FOLLOW_IDLE_INTERVAL) if ended else interval


def _failure(what: str, error: Exception) -> RequestFailed:
    return RequestFailed(what, describe_error(error), failure_title(what, error))


@dataclass(frozen=True)
class Request(Generic[T]):
    """What a screen asks of the I/O owner: ``call(cluster)`` runs on its thread, and
    ``reply(result)`` goes back as a message to whoever asked.

    ``what`` names the request in a failure ("Verify failed"); ``failed`` may turn an error
    into a message of its own (else ``RequestFailed``). A request with a ``key`` replaces a
    queued one of the same asker with the same key: only the newest preview or comparison
    matters."""

    what: str
    call: Callable[[ClusterAPI], T]
    reply: Callable[[T], Message]
    _: KW_ONLY
    key: Hashable | None = None
    failed: Callable[[Exception], Message | None] | None = None


@dataclass(eq=False)
class _Queued:
    key: Hashable | None
    reply_to: MessagePump
    run: Callable[[ClusterAPI], Message]


@dataclass(eq=False)
class _Follow:
    reply_to: MessagePump
    run_id: str
    interval: float
    due: float = 0.0  # monotonic; 0: at once
    failures: int = 0
    #: A new registration: the facade forgets what it sent before, for this screen has none
    #: of it (reopening a run's detail showed only lines written since it was last open).
    fresh: bool = True


@dataclass
class _Pace:
    """The refresh loop's state (only the serving thread writes it, under the lock)."""

    due: float = 0.0  # monotonic; 0: at once
    failures: int = 0
    soon: bool = False  # refresh_soon() was called since the current refresh began


class ClusterIO:
    """Owns the facade; runs every call on it on one thread. See the module docstring."""

    def __init__(
        self,
        cluster: ClusterAPI,
        app: MessagePump,
        *,
        refresh_interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cluster = cluster
        self._app = app  # refresh results go here, and replies whose asker has gone
        self.refresh_interval = refresh_interval
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[_Queued] = deque()
        self._follow: _Follow | None = None
        self._pace = _Pace()
        self._snapshot: Snapshot | None = None  # the newest, for the follow pace
        #: Whether each refresh lists the user's other jobs too (the Jobs screen's ``a``):
        #: one more squeue and sacct per refresh, so only while they are shown.
        self.all_jobs = False

    # -- what the facade says without I/O (safe from the UI thread) -----------------

    @property
    def cluster(self) -> ClusterAPI:
        """The facade owned here: call it only on this owner's thread."""
        return self._cluster

    @property
    def location(self) -> str:
        return self._cluster.location

    def default_spec(self) -> ExperimentSpec:
        """The profile's defaults (pure: no call to the cluster)."""
        return self._cluster.default_spec()

    # -- requests, from the UI thread -------------------------------------------------

    def ask(self, reply_to: MessagePump, request: Request[Any]) -> None:
        """Run ``request.call(cluster)`` on the I/O thread; post ``request.reply(result)`` to
        ``reply_to`` (see :class:`Request`)."""

        def run(cluster: ClusterAPI) -> Message:
            try:
                result = request.call(cluster)
            except Exception as error:  # every failure goes back to the asker
                own = request.failed(error) if request.failed is not None else None
                return own or _failure(request.what, error)
            return request.reply(result)

        key = request.key
        with self._cond:
            if key is not None:
                self._queue = deque(
                    r for r in self._queue if r.key != key or r.reply_to is not reply_to
                )
            self._queue.append(_Queued(key, reply_to, run))
            self._cond.notify()

    def refresh_soon(self) -> None:
        """Refresh now (after a submit, cancel or retry, or f5), with the backoff reset."""
        with self._cond:
            self._pace.failures = 0
            self._pace.due = 0.0
            self._pace.soon = True
            self._cond.notify()

    def follow(self, reply_to: MessagePump, run_id: str, interval: float = FOLLOW_INTERVAL) -> None:
        """Read ``run_id``'s new output every ``interval`` s for ``reply_to`` (one at a time:
        a newer registration replaces the older)."""
        with self._cond:
            current = self._follow
            if current is not None and current.reply_to is reply_to and current.run_id == run_id:
                return
            self._follow = _Follow(reply_to, run_id, interval)
            self._cond.notify()

    def unfollow(self, reply_to: MessagePump) -> None:
        with self._cond:
            if self._follow is not None and self._follow.reply_to is reply_to:
                self._follow = None

    @property
    def followed(self) -> str | None:
        """The run being followed, if any."""
        follow = self._follow
        return follow.run_id if follow is not None else None

    # -- the I/O thread -----------------------------------------------------------------

    def serve(self, cancelled: Callable[[], bool]) -> None:
        """The loop of the I/O thread, until ``cancelled()`` (checked every 0.2 s: the app's
        exit waits for this thread)."""
        while not cancelled():
            step = self._next()
            if step is not None:
                step()

    def _next(self) -> Callable[[], None] | None:
        """The next thing to do, or None after waiting a slice for one."""
        with self._cond:
            if self._queue:
                request = self._queue.popleft()
                return lambda: self._answer(request)
            now = self._clock()
            follow = self._follow
            if now >= self._pace.due:
                self._pace.soon = False
                return lambda: self._refresh(follow)
            if follow is not None and now >= follow.due:
                return lambda: self._follow_once(follow)
            due = self._pace.due if follow is None else min(self._pace.due, follow.due)
            self._cond.wait(min(SLICE, max(0.0, due - now)))
            return None

    def _answer(self, request: _Queued) -> None:
        try:
            message = request.run(self._cluster)
        except Exception as error:  # a reply that failed to build: still answer
            message = _failure("Request", error)
        self._post(request.reply_to, message)

    def _post(self, reply_to: MessagePump, message: Message) -> None:
        # The asker may have closed meanwhile (a dismissed screen): the app still hears of a
        # failure or a submit.
        if not reply_to.post_message(message) and reply_to is not self._app:
            self._app.post_message(message)

    def _refresh(self, follow: _Follow | None) -> None:
        active = True
        unread = 0
        try:
            self._start_over(follow)
            followed = follow.run_id if follow else None
            if self.all_jobs:
                listing = self._cluster.user_jobs(follow=followed)
                snapshot = listing.snapshot
                self._app.post_message(ForeignJobsReady(listing.foreign, listing.error))
            else:
                snapshot = self._cluster.refresh(follow=followed)
        except Exception as error:  # an outage must never end the loop
            failures = self._pace.failures + 1
            self._app.post_message(RefreshFailed(describe_error(error)))
        else:
            failures = self._pace.failures + 1 if snapshot.error else 0
            active = any(run.state.is_active for run in snapshot.runs)
            unread = snapshot.unread
            self._snapshot = snapshot
            if snapshot.events:  # before the snapshot, which may coalesce with the next
                self._app.post_message(EventsClaimed(snapshot.events))
            self._app.post_message(SnapshotReady(snapshot))
            self._followed_in(snapshot, follow)
        delay = poll_delay(self.refresh_interval, failures, active)
        if unread:
            delay = 0.0  # older runs are still being read: go on at once
        with self._cond:
            if not self._pace.soon:  # else refresh_soon() came meanwhile: refresh at once
                self._pace.failures = failures
                self._pace.due = self._clock() + delay

    def _followed_in(self, snapshot: Snapshot, follow: _Follow | None) -> None:
        if follow is None:
            return
        detail = snapshot.detail
        if detail is not None and detail.run_id == follow.run_id:
            follow.failures = 0
            follow.reply_to.post_message(DetailReady(detail))
            # The refresh read the run: the next follow-only read is a whole tick away.
            follow.due = self._clock() + self._follow_delay(follow)

    def _follow_once(self, follow: _Follow) -> None:
        try:
            self._start_over(follow)
            detail = self._cluster.follow(follow.run_id)
        except Exception as error:  # shown on the screen; following goes on
            follow.failures += 1
            follow.reply_to.post_message(FollowFailed(describe_error(error)))
        else:
            follow.failures = 0
            follow.reply_to.post_message(DetailReady(detail))
        follow.due = self._clock() + self._follow_delay(follow)

    def _start_over(self, follow: _Follow | None) -> None:
        if follow is not None and follow.fresh:
            self._cluster.restart_follow(follow.run_id)
            follow.fresh = False

    def _follow_delay(self, follow: _Follow) -> float:
        snapshot = self._snapshot
        runs = snapshot.runs if snapshot is not None else ()
        run = next((run for run in runs if run.run_id == follow.run_id), None)
        return follow_delay(
            follow.interval, follow.failures, run is not None and run.state.is_terminal
        )

    def close(self) -> None:
        """Close the facade (once the app has ended and this thread with it)."""
        self._cluster.close()
