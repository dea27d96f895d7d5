"""The Textual app: connects the cluster facade, hands it to the one owner of cluster I/O
(:mod:`ddp_tui.tui.cluster_io`), and hosts the screens."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message_pump import MessagePump
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from ddp_tui.tui.cluster_io import ClusterIO, Request
from ddp_tui.tui.formatting import describe_error, failure_title
from ddp_tui.tui.header import Status
from ddp_tui.tui.messages import (
    ActionDone,
    Connected,
    ConnectFailed,
    EventsClaimed,
    ForeignJobsReady,
    Notice,
    RefreshFailed,
    RequestFailed,
    SnapshotReady,
    Submitted,
)
from ddp_tui.tui.notifications import AppNotifications
from ddp_tui.tui.pacing import DEFAULT_INTERVAL, MIN_INTERVAL, sleep_unless_cancelled
from ddp_tui.tui.prompter import TuiPrompter

if TYPE_CHECKING:
    from ddp_tui.config import Profile
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView, Snapshot
    from ddp_tui.spec import ExperimentSpec, PartitionInfo

#: Opens the facade, in a worker thread; the prompter answers SSH questions through modals.
ClusterFactory = Callable[[TuiPrompter], "ClusterAPI"]

CONNECT_RETRY_MAX = 60.0


class DdpTuiApp(App[None]):
    """ddp-tui. Attributes flow down (``snapshot``, ``status``); workers post messages up."""

    CSS_PATH = "app.tcss"
    TITLE = "ddp-tui"
    BINDINGS = [
        Binding("question_mark,f1", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("f5", "refresh_now", "Refresh", show=False),
    ]

    #: The newest refresh; screens watch it.
    snapshot: var[Snapshot | None] = var(None, always_update=True)
    #: What the header shows.
    status: var[Status] = var(Status())
    #: The user's other jobs (not ddp-tui's) while the Jobs screen lists them (``a``);
    #: None while it does not.
    foreign: var[tuple[UserJob, ...] | None] = var(None, always_update=True)
    #: Why the last listing of them failed, if it did.
    foreign_error: var[str | None] = var(None)

    def __init__(
        self,
        cluster_factory: ClusterFactory,
        *,
        profile: Profile | None = None,
        refresh_interval: float | None = None,
        clock: Callable[[], float] = time.time,
        connect_retry: bool = True,
    ) -> None:
        super().__init__()
        self.cluster_factory = cluster_factory
        self.profile = profile
        interval = refresh_interval
        if interval is None:
            interval = profile.poll_interval_sec if profile is not None else DEFAULT_INTERVAL
        self.refresh_interval = max(MIN_INTERVAL, interval)
        self.clock = clock
        self.connect_retry = connect_retry
        #: The one owner of cluster I/O, once connected: every facade call goes through it.
        self.io: ClusterIO | None = None
        self.prompter = TuiPrompter(self)
        self.partitions: list[PartitionInfo] = []
        self._pending_selection: str | None = None
        #: Delivers the notification events this app instance claimed.
        self.notifications = AppNotifications(self, profile)

    @property
    def cluster(self) -> ClusterAPI | None:
        """The connected facade (None until connected). Only ``io`` may call it."""
        return self.io.cluster if self.io is not None else None

    def get_default_screen(self) -> Screen[Any]:
        from ddp_tui.tui.screens.jobs import JobsScreen

        return JobsScreen()

    def on_mount(self) -> None:
        # After the first frame: the connect worker imports the whole facade (job templates,
        # ssh, the diagnosis rules), and a thread importing holds the GIL the first paint
        # needs. The frame is on the terminal first; the connection starts one frame later.
        self.call_after_refresh(self.connect)

    # -- connecting and polling --------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, group="connect", description="Connect")
    def connect(self) -> None:
        worker = get_current_worker()
        delay = 2.0
        while not worker.is_cancelled:
            try:
                cluster = self.cluster_factory(self.prompter)
            except Exception as error:  # shown in the header; retried with backoff
                retry = self.connect_retry and not self.prompter.declined
                self.post_message(ConnectFailed(describe_error(error), delay if retry else None))
                if not retry or not sleep_unless_cancelled(worker, delay):
                    return
                delay = min(CONNECT_RETRY_MAX, delay * 2)
                continue
            try:
                # The facade is not shared yet: this thread may still call it.
                self.partitions = list(cluster.partitions())  # sinfo, cached by the facade
            except Exception:  # they only fill a picker; validation reports the rest
                self.partitions = []
            self.post_message(Connected(cluster))
            return

    @on(Connected)
    def _connected(self, message: Connected) -> None:
        self.io = ClusterIO(message.cluster, self, refresh_interval=self.refresh_interval)
        self.status = Status(location=message.cluster.location, connection="ok", last_refresh=None)
        self._serve(self.io)

    @on(ConnectFailed)
    def _connect_failed(self, message: ConnectFailed) -> None:
        note = (
            f"retrying in {message.retry_in:.0f}s"
            if message.retry_in is not None
            else "f5 or the palette's Reconnect retries"
        )
        self.status = Status(
            location=self.status.location if self.io else "not connected",
            connection="not connected",
            error=f"{message.error} ({note})",
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="refresh", description="Refresh")
    def _serve(self, io: ClusterIO) -> None:
        """The I/O owner's thread: refreshes, follows and every request, one at a time."""
        worker = get_current_worker()
        io.serve(lambda: worker.is_cancelled)

    def refresh_soon(self) -> None:
        """Refresh now (after a submit, cancel or retry)."""
        if self.io is not None:
            self.io.refresh_soon()

    def ask(self, reply_to: MessagePump, request: Request[Any]) -> bool:
        """Queue a request to the I/O owner (see :meth:`ClusterIO.ask`); False, with a
        notification, while not connected."""
        if self.io is None:
            self.notify(
                "not connected yet; the header shows the connection state",
                title=f"{request.what} failed",
                severity="error",
                markup=False,
            )
            return False
        self.io.ask(reply_to, request)
        return True

    @on(SnapshotReady)
    def _snapshot_ready(self, message: SnapshotReady) -> None:
        snapshot = message.snapshot
        healthy = snapshot.error is None
        self.snapshot = snapshot
        self.status = Status(
            location=snapshot.location,
            version=snapshot.scheduler_version,
            connection=snapshot.connection,
            last_refresh=self.clock() if healthy else self.status.last_refresh,
            error=snapshot.error,
            stalled=snapshot.stalled,
        )

    @on(ForeignJobsReady)
    def _foreign_ready(self, message: ForeignJobsReady) -> None:
        if self.io is not None and self.io.all_jobs:  # else an answer to a listing turned off
            self.foreign = message.jobs
            self.foreign_error = message.error

    def list_all_jobs(self, on: bool) -> None:
        """List the user's other jobs with each refresh (``on``), or stop; refreshes now."""
        if self.io is None:
            return
        self.io.all_jobs = on
        if not on:
            self.foreign, self.foreign_error = None, None
        self.io.refresh_soon()

    @on(EventsClaimed)
    def _events_claimed(self, message: EventsClaimed) -> None:
        self.notifications.deliver(message.events)

    @on(RefreshFailed)
    def _refresh_failed(self, message: RefreshFailed) -> None:
        current = self.status
        self.status = Status(
            location=current.location,
            version=current.version,
            connection="refresh failed",
            last_refresh=current.last_refresh,
            error=message.error,
            stalled=current.stalled,  # the last refresh's count stands until the next
        )

    # -- the one worker-failure handler -------------------------------------------

    @on(Worker.StateChanged)
    def _worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.worker_state_changed(event)

    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker of every screen ends up here: failures become notifications."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        what = worker.description or worker.name or "background task"
        message = describe_error(error) if error is not None else "unknown error"
        self.notify(
            message, title=failure_title(what, error), severity="error", markup=False, timeout=8
        )
        if worker.group == "refresh" and self.io is not None:
            self._serve(self.io)  # the loop catches its own errors; restart it if it ever dies

    @on(RequestFailed)
    def _request_failed(self, message: RequestFailed) -> None:
        self.notify(message.error, title=message.title, severity="error", markup=False, timeout=8)

    @on(Notice)
    def _notice(self, message: Notice) -> None:
        self.notify(message.text, title=message.title, markup=False)

    @on(Submitted)
    def _submitted(self, message: Submitted) -> None:
        # Only when the screen that submitted had closed before the answer came.
        self.runs_submitted(message.runs, message.what)

    # -- run actions, shared by the jobs and detail screens -------------------------

    def run_by_id(self, run_id: str) -> RunView | None:
        snapshot = self.snapshot
        if snapshot is None:
            return None
        return next((run for run in snapshot.runs if run.run_id == run_id), None)

    def take_selection(self) -> str | None:
        """A run the jobs table should put its cursor on (once), e.g. after a submit."""
        run_id = self._pending_selection
        if run_id is not None and self.run_by_id(run_id) is not None:
            self._pending_selection = None
            return run_id
        return None

    def runs_submitted(self, runs: Sequence[RunView], what: str) -> None:
        if runs:
            self._pending_selection = runs[0].run_id
            jobs = ", ".join(run.job_id or "?" for run in runs)
            names = runs[0].name if len(runs) == 1 else f"{len(runs)} runs"
            self.notify(f"{names} {what}: job {jobs}", title="Submitted", markup=False)
        self.refresh_soon()

    def open_run(self, run_id: str) -> None:
        from ddp_tui.tui.screens.detail import DetailScreen

        self.push_screen(DetailScreen(run_id))

    def default_spec(self) -> ExperimentSpec:
        """The profile's defaults for this scheduler."""
        if self.io is not None:
            return self.io.default_spec()
        from ddp_tui.config import Profile, default_spec

        return default_spec(self.profile or Profile())

    def open_compose(self, spec: ExperimentSpec | None = None, title: str = "Compose") -> None:
        from ddp_tui.tui.screens.compose import ComposeScreen

        self.push_screen(
            ComposeScreen(spec or self.default_spec(), title=title, partitions=self.partitions)
        )

    def open_compare(self, run_id: str | None = None) -> None:
        from ddp_tui.tui.screens.compare import CompareScreen

        run = self.run_by_id(run_id) if run_id else None
        self.push_screen(CompareScreen(run.group if run is not None else None))

    def edit_run(self, run_id: str, changes: Mapping[str, object] | None = None) -> None:
        """Compose a copy of the run; ``changes``: spec fields to set in it (a usage
        report's right-sizing), each checked by Compose as if typed."""
        run = self.run_by_id(run_id)
        if run is None:
            self.notify("That run is not in the last refresh yet.", severity="warning")
            return
        if not changes:
            self.open_compose(run.spec, title=f"Edit {run.name}")
            return
        from ddp_tui.spec import SpecError

        try:
            spec = run.spec.replace(**changes)
        except (SpecError, TypeError, ValueError) as exc:
            self.notify(f"Cannot right-size {run.name}: {exc}", severity="error", markup=False)
            return
        said = ", ".join(f"{k}={v}" for k, v in changes.items())
        self.open_compose(spec, title=f"Right-size {run.name} ({said})")

    def open_job(self, job: UserJob) -> None:
        """Open a job that is not ddp-tui's: its logs, why it waits, what it used."""
        from ddp_tui.tui.screens.job import JobScreen

        self.push_screen(JobScreen(job))

    def confirm_cancel_job(self, job: UserJob, *, whole_array: bool = False) -> None:
        """Ask, then cancel a job that is not ddp-tui's (``whole_array``: every task of its
        job array, with one scancel of the array's id)."""
        from ddp_tui.tui.modals import ConfirmModal

        if not job.state.is_active and not whole_array:
            self.notify(
                f"Job {job.job_id} is {job.state.value}: only queued or running jobs can be "
                "cancelled.",
                severity="warning",
                markup=False,
            )
            return
        target = (job.array_job_id or job.job_id) if whole_array else job.job_id
        what = f"job array {target}" if whole_array else f"job {target}"

        def answered(confirmed: bool | None) -> None:
            if not confirmed:
                return

            def cancel(cluster: ClusterAPI) -> str:
                cluster.cancel_job(target)
                return f"Cancelled {what} ({job.name})."

            self.ask(self, Request("Cancel", cancel, ActionDone))

        self.push_screen(
            ConfirmModal(
                f"Cancel {what} ({job.name})? ddp-tui did not submit it.",
                yes="Cancel it",
                no="Keep",
            ),
            answered,
        )

    def confirm_cancel(self, run_id: str) -> None:
        from ddp_tui.tui.modals import ConfirmModal

        run = self.run_by_id(run_id)
        if run is None:
            self.notify("That run is not in the last refresh yet.", severity="warning")
            return
        if not run.state.is_active:
            self.notify(
                f"{run.name} is {run.state.value}: only queued or running runs can be cancelled.",
                severity="warning",
                markup=False,
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_run(run_id, run.name)

        job = f" (job {run.job_id})" if run.job_id else ""
        self.push_screen(
            ConfirmModal(f"Cancel {run.name}{job}?", yes="Cancel run", no="Keep"), answered
        )

    def cancel_run(self, run_id: str, name: str) -> None:
        self.ask(
            self,
            Request(
                "Cancel",
                lambda cluster: cluster.cancel(run_id),
                lambda jobs: ActionDone(f"Cancelled {name} (job {', '.join(jobs)})."),
            ),
        )

    def retry_run(self, run_id: str) -> None:
        run = self.run_by_id(run_id)
        if run is not None and run.state.is_active:
            self.notify(
                f"{run.name} is still {run.state.value}; cancel it first (c).",
                severity="warning",
                markup=False,
            )
            return
        seen = len(run.attempts) if run is not None else None
        self.ask(
            self,
            Request(
                "Retry",
                # The attempts the user saw: a second press, or another instance's retry
                # since, is refused with the winning job's id instead of doubling it.
                lambda cluster: cluster.retry(run_id, seen=seen),
                lambda run: ActionDone(
                    f"Retrying {run.name}: job {run.job_id} resumes from its checkpoint.",
                    run.run_id,
                ),
            ),
        )

    @on(ActionDone)
    def _action_done(self, message: ActionDone) -> None:
        if message.select:
            self._pending_selection = message.select
        self.notify(message.text, markup=False)
        self.refresh_soon()

    # -- app actions ------------------------------------------------------------

    def action_help(self) -> None:
        from ddp_tui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_refresh_now(self) -> None:
        if self.io is None:
            self.action_reconnect()
        else:
            self.refresh_soon()

    def action_reconnect(self) -> None:
        if self.io is None:
            self.prompter.declined = False
            self.status = Status(location="connecting...", connection="connecting")
            self.connect()

    def action_jobs(self) -> None:
        while len(self.screen_stack) > 1 and not isinstance(self.screen, _jobs_screen_type()):
            self.pop_screen()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("New experiment", "Compose a run: model, data, size", self.open_compose)
        yield SystemCommand("Jobs", "Back to the table of runs", self.action_jobs)
        yield SystemCommand("Compare sizes", "Speedup and efficiency of a sweep", self.open_compare)
        yield SystemCommand("Refresh now", "Poll the scheduler now", self.action_refresh_now)
        yield SystemCommand("Reconnect", "Open the connection again", self.action_reconnect)
        yield SystemCommand("Help", "Keys of every screen", self.action_help)
        from ddp_tui.tui.screens.jobs import JobsScreen

        if isinstance(screen, JobsScreen):
            yield SystemCommand(
                "Show or hide finished runs",
                "Toggle finished runs in the table",
                screen.action_toggle_finished,
            )
            yield SystemCommand("Filter runs", "Type to filter the table", screen.action_filter)


def _jobs_screen_type() -> type[Screen[Any]]:
    from ddp_tui.tui.screens.jobs import JobsScreen

    return JobsScreen


def run_app(
    cluster_factory: ClusterFactory,
    *,
    profile: Profile | None = None,
    refresh_interval: float | None = None,
) -> int:
    """Run the app until the user quits; the CLI's entry point. Returns the exit status."""
    app = DdpTuiApp(cluster_factory, profile=profile, refresh_interval=refresh_interval)
    try:
        app.run()
    finally:
        if app.io is not None:
            with contextlib.suppress(Exception):  # best effort: the app already ended
                app.io.close()
    return app.return_code or 0
