"""A job of the user that ddp-tui did not submit (``a`` on Jobs lists them): what Slurm says of
it, its ``.out`` and ``.err`` followed live from the paths Slurm records, its batch script where
Slurm keeps it, why it waits (while pending) and what it used (once ended). ``c`` cancels it;
``b`` brings it in: a run of it, opened in Run detail, to follow, diagnose and retry like
ddp-tui's own (:mod:`ddp_tui.remote.runs.adoption`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Footer, RichLog, Static, TabbedContent, TabPane

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.cluster_io import FOLLOW_INTERVAL, Request
from ddp_tui.tui.formatting import duration
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import UsageReady, WaitReady
from ddp_tui.tui.screens.base import BaseScreen

if TYPE_CHECKING:
    from collections.abc import Callable

    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.remote.runs.user_jobs import JobLog

#: The log streams, each a tab: (stream, key, label).
_STREAMS = (("out", "1", "Output (.out)"), ("err", "2", "Errors (.err)"))


@dataclass
class JobScriptRead(Message, bubble=False):
    """The job's batch script, or why it cannot be had."""

    text: str


@dataclass
class JobLogRead(Message, bubble=False):
    """New lines of one of the job's logs (or, first, its tail)."""

    log: JobLog


@dataclass
class JobBroughtIn(Message, bubble=False):
    """The job is a run now: its row."""

    run: RunView


def job_summary(job: UserJob) -> Text:
    """The head of the screen: the job as the scheduler lists it."""
    text = Text()
    text.append(f" {job.name}", style="bold")
    text.append(f"  job {job.job_id}  ", style="bold cyan")
    text.append(job.state.value, style="bold")
    text.append("   not submitted by ddp-tui", style="dim")
    where = [f"partition {job.partition or '-'}", f"{job.nodes or '?'} nodes"]
    if job.node_list:
        where.append(job.node_list)
    if job.gpus:
        where.append(f"{job.gpus} GPUs")
    text.append("\n " + ", ".join(where))
    limit = duration(job.time_limit_sec) if job.time_limit_sec else "none"
    text.append(f"\n elapsed {duration(job.elapsed_sec) if job.elapsed_sec else '-'} of {limit}")
    times = [f"{label} {value}" for label, value in (
        ("submitted", job.submit_time), ("started", job.start_time), ("ended", job.end_time)
    ) if value]  # fmt: skip
    if times:
        text.append("; " + ", ".join(times))
    if job.work_dir:
        text.append(f"\n work dir {job.work_dir}", style="dim")
    return text


class JobScreen(BaseScreen):
    """One job that is not ddp-tui's: its logs, why it waits, what it used."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("1", "tab('out')", "Output"),
        Binding("2", "tab('err')", "Errors"),
        Binding("3", "tab('script')", "Script"),
        Binding("c", "cancel_job", "Cancel"),
        Binding("t", "why", "Why waits"),
        Binding("b", "bring_in", "Bring it in"),
    ]

    def __init__(self, job: UserJob) -> None:
        super().__init__()
        self.job = job
        #: Where each log's next read starts (None: not read yet, so read its tail).
        self.offsets: dict[str, int | None] = {"out": None, "err": None}
        #: Where each log is read from, as last said (shown when it changes).
        self.paths: dict[str, str] = {}
        self._usage_asked = False
        self._why_asked = False
        #: Whether the logs are still read every FOLLOW_INTERVAL: until one read after the
        #: job is seen ended (what it wrote as it ended), then never again.
        self.following = True
        self._read_after_end = False
        #: The job's batch script, or why there is none (None: not answered yet).
        self.script: str | None = None

    def compose(self) -> ComposeResult:
        yield StatusHeader("Job")
        yield Static(job_summary(self.job), id="job-summary")
        yield Static("", id="job-panel", markup=False)
        with TabbedContent(initial="out", id="job-tabs"):
            for stream, _, label in _STREAMS:
                with TabPane(label, id=stream):
                    yield RichLog(id=f"log-{stream}", max_lines=5000, wrap=False)
            with TabPane("Script", id="script"), VerticalScroll():
                # A Static, not a RichLog: a RichLog in a hidden tab holds its lines until
                # it is first shown and sized; the script is whole text, set once.
                yield Static("asking the scheduler for its batch script...", id="job-script")
        yield Footer()

    def on_mount(self) -> None:
        self.watch(self.app, "foreign", self._listing_changed, init=False)
        self._follow_timer = self.set_interval(FOLLOW_INTERVAL, self._read_logs)
        self._read_logs()
        self._on_state()
        job_id = self.job.job_id
        self.ask(
            Request(
                "Batch script",
                lambda cluster: cluster.job_script(job_id),
                JobScriptRead,
                key=("job_script", job_id),
                # Not an error to report: srun and salloc jobs have none, and Slurm forgets
                # the script of a job it has purged.
                failed=lambda error: JobScriptRead(f"no batch script: {error}"),
            )
        )

    @on(JobScriptRead)
    def _script_read(self, message: JobScriptRead) -> None:
        self.script = message.text
        self.query_one("#job-script", Static).update(Text(message.text))

    # -- the job as each refresh lists it ---------------------------------------------

    def _listing_changed(self, jobs: object) -> None:
        found = next((j for j in self.ddp_app.foreign or () if j.job_id == self.job.job_id), None)
        if found is not None and found != self.job:
            self.job = found
            self.query_one("#job-summary", Static).update(job_summary(found))
            self._on_state()

    def _on_state(self) -> None:
        """What the panel says for the job's state: why it waits (asked on opening, as the
        issue's detail view should), or what it used once it has ended."""
        if self.job.state is JobState.PENDING:
            if not self._why_asked:
                self.action_why()
        elif self.job.state.is_terminal and not self._usage_asked:
            self._usage_asked = True
            job_id = self.job.job_id
            self.ask(
                Request(
                    "Usage",
                    lambda cluster: cluster.usage(job_id),
                    lambda report: UsageReady(job_id, report),
                    key=("usage", job_id),
                )
            )

    @on(UsageReady)
    def _usage_ready(self, message: UsageReady) -> None:
        from ddp_tui.reports.usage_text import usage_text

        self.query_one("#job-panel", Static).update(Text(usage_text(message.report)))

    def action_why(self) -> None:
        """Ask the scheduler why the job waits (and when it should start)."""
        job_id = self.job.job_id
        self._why_asked = True
        self.query_one("#job-panel", Static).update(Text("asking the scheduler why it waits..."))
        self.ask(
            Request(
                "Why it waits",
                lambda cluster: cluster.why_waiting(job_id),
                lambda wait: WaitReady(job_id, wait),
                key=("why_waiting", job_id),
            )
        )

    @on(WaitReady)
    def _wait_ready(self, message: WaitReady) -> None:
        from ddp_tui.diagnosis.waiting import wait_lines

        self.query_one("#job-panel", Static).update(Text("\n".join(wait_lines(message.wait))))

    # -- logs ----------------------------------------------------------------------------

    def _read_logs(self) -> None:
        if self.job.state.is_terminal:
            if self._read_after_end:  # an ended job's logs do not grow: stop asking
                self.following = False
                self._follow_timer.stop()
                return
            self._read_after_end = True
        for stream, _, _ in _STREAMS:
            self.ask(
                Request(
                    "Job log",
                    self._reader(stream == "err", self.offsets[stream]),
                    JobLogRead,
                    key=("job_log", self.job.job_id, stream),
                )
            )

    def _reader(self, err: bool, offset: int | None) -> Callable[[ClusterAPI], JobLog]:
        """One read of the job's .out (or .err): its tail first, then what is new."""
        job_id = self.job.job_id
        return lambda cluster: cluster.job_log(job_id, err=err, offset=offset)

    @on(JobLogRead)
    def _log_read(self, message: JobLogRead) -> None:
        log = message.log
        view = self.query_one(f"#log-{log.stream}", RichLog)
        where = log.path or f"no path known ({log.source})"
        if self.paths.get(log.stream) != where:
            self.paths[log.stream] = where
            view.write(Text(where, style="dim"))
        # No path yet (a job that has not started): read its tail again next time.
        self.offsets[log.stream] = log.offset if log.path else None
        for line in log.lines:
            view.write(Text(line))

    # -- actions ---------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_cancel_job(self) -> None:
        self.ddp_app.confirm_cancel_job(self.job)

    def action_bring_in(self) -> None:
        """Make a run of the job (on the I/O worker), then open it in Run detail; a refusal
        (a run's attempt already, an interactive job, a script the scheduler no longer
        keeps) is a notification naming why."""
        job_id = self.job.job_id
        self.notify(f"Bringing in job {job_id}...", markup=False, timeout=3)
        self.ask(
            Request(
                "Bring it in",
                lambda cluster: cluster.adopt_job(job_id),
                JobBroughtIn,
                key=("adopt_job", job_id),
            )
        )

    @on(JobBroughtIn)
    def _brought_in(self, message: JobBroughtIn) -> None:
        run = message.run
        app = self.ddp_app
        app.notify(
            f"Job {run.job_id} is run {run.run_id} now: r retries it from its directory.",
            title="Brought in",
            markup=False,
        )
        app.refresh_soon()  # the job leaves the other jobs and joins the runs
        if app.screen is self:
            app.pop_screen()
            app.open_run(run.run_id)
