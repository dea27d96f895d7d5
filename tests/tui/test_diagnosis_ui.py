"""What the app shows of issue 12: the Jobs reason column and stalled count, and Run detail's
Diagnosis panel with its keys (jump to the evidence, estimated start, cancel a stall).

The panel's texts are pure functions, tested first. The app tests are named ``fake``: they
run on the fake facade (tests/tui/fakes.py) because a diagnosed failure, a stall of exactly
12 minutes and a scheduler's start estimate cannot be produced on demand and to the line.
The real runs that produce them are in tests/integration/test_diagnosis_*.py.
"""

from __future__ import annotations

from dataclasses import replace

from textual.pilot import Pilot
from textual.widgets import TabbedContent

from ddp_tui.diagnosis.pending import pending_category
from ddp_tui.diagnosis.waiting import WaitExplanation, wait_advice
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.views import RunView
from ddp_tui.tui.diagnosis_panel import (
    DiagnosisPanel,
    PanelState,
    evidence_stream,
    panel_text,
    quiet,
)
from ddp_tui.tui.header import Status, StatusHeader
from ddp_tui.tui.jobs_table import JobsTable
from ddp_tui.tui.logview import LogPane
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.jobs import JobsScreen
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import (
    HEARTBEATS,
    MISSING_TORCH,
    MISSING_TORCH_ERR,
    NOW,
    SAMPLE_SWEEP,
    STALL,
    FakeCluster,
    diagnosed_runs,
    sample_wait,
)


def _run(state: JobState, runs: list[RunView] | None = None) -> RunView:
    return next(r for r in (runs or diagnosed_runs()) if r.state is state)


# -- the panel's texts (pure) ---------------------------------------------------------


def test_an_ended_runs_panel_says_cause_advice_and_evidence_labels() -> None:
    text = panel_text(_run(JobState.FAILED), PanelState(), now=NOW)
    assert text is not None
    plain = text.plain
    assert "no module torch" in plain
    assert "cause: The job's python3 has no module 'torch'" in plain
    assert "to do: Set python or env_setup" in plain
    assert "slurm-1040.err:4  ModuleNotFoundError: No module named 'torch'" in plain
    assert "g shows the evidence in the log" in plain


def test_a_fresh_diagnosis_of_the_latest_attempt_wins_over_the_refreshs() -> None:
    run = replace(_run(JobState.FAILED), diagnosis=None)
    state = PanelState(diagnosis=MISSING_TORCH, diagnosed_job="1039")  # an older attempt
    assert state.diagnosis_of(run) is None
    state.diagnosed_job = run.job_id
    assert state.diagnosis_of(run) is MISSING_TORCH


def test_no_diagnosis_is_said_plainly_and_nothing_is_said_of_a_healthy_run() -> None:
    failed = replace(_run(JobState.FAILED), diagnosis=None)
    reading = panel_text(failed, PanelState(diagnosing=True), now=NOW)
    assert reading is not None and "reading the logs" in reading.plain
    unknown = panel_text(failed, PanelState(), now=NOW)
    assert unknown is not None and "no known cause" in unknown.plain
    running = replace(_run(JobState.RUNNING), stall=None)
    assert panel_text(running, PanelState(), now=NOW) is None
    assert panel_text(_run(JobState.COMPLETED), PanelState(), now=NOW) is None


def test_a_stalled_runs_panel_names_the_silent_ranks_and_the_last_lines() -> None:
    text = panel_text(
        _run(JobState.RUNNING),  # the table's stall names no ranks; Run detail's does
        PanelState(heartbeats=list(HEARTBEATS), stall=STALL),
        last_lines=[(".out", "epoch 2 step 40/400 loss 0.812")],
        now=NOW,
    )
    assert text is not None
    plain = text.plain
    assert "no output, progress or heartbeat for 12 min" in plain
    assert "silent ranks: rank 3 on n2 (12 min, at epoch 2 step 40)" in plain
    assert "rank 2 (never heard from)" in plain
    assert ".out epoch 2 step 40/400 loss 0.812" in plain
    assert "c cancels the run" in plain


def test_a_stall_without_silent_ranks_shows_the_heartbeats() -> None:
    text = panel_text(_run(JobState.RUNNING), PanelState(heartbeats=list(HEARTBEATS)), now=NOW)
    assert text is not None
    assert "rank 0 on n1: train epoch 2 step 41, 12 min ago" in text.plain


def test_a_pending_runs_panel_gives_the_reason_and_the_estimate_on_demand() -> None:
    run = _run(JobState.PENDING)
    before = panel_text(run, PanelState(), now=NOW)
    assert before is not None and "t asks the scheduler" in before.plain
    assert run.reason_label in before.plain
    # What it waits for and what to do, from the reason alone (asking nothing).
    category = pending_category(run.reason)
    assert f"waits for: {category.words}" in before.plain
    assert "what to do: " + wait_advice(category, run.reason, run.job_id or "") in before.plain
    asking = panel_text(run, PanelState(asking=True), now=NOW)
    assert asking is not None and "asking the scheduler" in asking.plain
    said = WaitExplanation.of_reason(
        run.job_id or "", "PENDING", run.reason, scheduler="slurm", run_id=run.run_id
    )
    known = panel_text(
        run, PanelState(wait=replace(said, estimated_start="2023-11-15T01:00")), now=NOW
    )
    assert known is not None and "estimated start: 2023-11-15T01:00" in known.plain
    unknown = panel_text(run, PanelState(wait=said), now=NOW)
    assert unknown is not None and "none given yet" in unknown.plain


def test_evidence_is_found_in_its_log_tab_and_quiet_times_read_as_said() -> None:
    assert [evidence_stream(e) for e in MISSING_TORCH.evidence] == ["err", "err"]
    state_only = replace(MISSING_TORCH.evidence[0], file="scheduler", line=None)
    assert evidence_stream(state_only) is None
    assert (quiet(40), quiet(720), quiet(7500)) == ("40 s", "12 min", "2 h 5 min")


def test_the_header_counts_stalled_jobs() -> None:
    header = StatusHeader("Jobs")
    assert "stalled" not in header.render_status(Status(), NOW).plain
    assert "⚠ 2 stalled" in header.render_status(Status(stalled=2), NOW).plain


# -- the app on the fake facade ----------------------------------------------------------


async def _open(pilot: Pilot[None], name: str) -> DetailScreen:
    """Open the run called ``name`` from Jobs and wait for its logs."""
    screen = await open_named(pilot, name)
    pane = screen.query_one(LogPane)
    await wait_until(pilot, lambda: len(pane.view("out").lines) == 10, "the log lines")
    return screen


async def test_fake_jobs_show_reasons_marks_and_the_stalled_count() -> None:
    app = fake_app(FakeCluster(runs=diagnosed_runs()))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobsTable)
        # The sweep's runs fold into one row; open it to read each member's reason.
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        screen.toggle_group(SAMPLE_SWEEP, True)
        await pilot.pause()
        reasons = {run_id: table.get_cell(run_id, "reason") for run_id in table.order}
        by_name = {r.name: reasons[r.run_id] for r in diagnosed_runs()}
        assert by_name["mnist-cnn"] == "stalled 12 min"
        assert by_name["broken"] == "no module torch"
        assert by_name["queued"] == _run(JobState.PENDING).reason_label
        assert by_name["sweep-2x2"] == ""  # completed: nothing to say
        screen.toggle_group(SAMPLE_SWEEP, False)
        table.move_cursor(0)
        await pilot.pause()
        assert table._marks == {
            _run(JobState.RUNNING).run_id: "stalled",
            _run(JobState.FAILED).run_id: "fix",
        }
        assert app.status.stalled == 1
        status = str(app.screen.query_one("#jobs-status").render())
        assert "1 stalled" in status
        assert "mnist-cnn: stalled 12 min" in status  # the selected row's reason, whole
        table.move_cursor(2)
        await pilot.pause()
        assert "broken: no module torch" in str(app.screen.query_one("#jobs-status").render())


async def test_fake_evidence_key_jumps_to_each_line_in_the_err_tab() -> None:
    runs = diagnosed_runs()
    failed = _run(JobState.FAILED, runs)
    fake = FakeCluster(runs=[replace(r, progress=None) for r in runs], err_lines=MISSING_TORCH_ERR)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, "broken")
        assert screen.query_one(DiagnosisPanel).display
        assert ("diagnose", failed.run_id) not in fake.calls  # the refresh had a diagnosis
        pane = screen.query_one(LogPane)
        await wait_until(pilot, lambda: len(pane.view("err").lines) == 5, "the .err lines")
        await pilot.press("g")
        await pilot.pause()
        assert pane.query_one(TabbedContent).active == "err"
        assert pane.view("err").match_line == 3  # slurm-1040.err:4, 0-based
        assert not pane.view("err").following
        await pilot.press("g")  # the next evidence line
        await pilot.pause()
        assert pane.view("err").match_line == 4
        await pilot.press("g")  # and round again
        await pilot.pause()
        assert pane.view("err").match_line == 3


async def test_fake_evidence_is_found_by_its_text_where_the_pane_starts_mid_file() -> None:
    # The pane starts near the end of a big log: line 57 of the file is not its 57th line.
    evidence = replace(MISSING_TORCH.evidence[0], line=57)
    far = replace(MISSING_TORCH, evidence=(evidence,))
    runs = [replace(r, diagnosis=far) if r.diagnosis else r for r in diagnosed_runs()]
    app = fake_app(FakeCluster(runs=runs, err_lines=MISSING_TORCH_ERR))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, "broken")
        pane = screen.query_one(LogPane)
        await wait_until(pilot, lambda: len(pane.view("err").lines) == 5, "the .err lines")
        await pilot.press("g")
        await pilot.pause()
        assert pane.view("err").match_line == 3


async def test_fake_an_ended_run_without_a_diagnosis_is_diagnosed_once_on_opening() -> None:
    runs = [replace(r, diagnosis=None) for r in diagnosed_runs()]
    fake = FakeCluster(runs=runs, diagnosis=MISSING_TORCH, err_lines=MISSING_TORCH_ERR)
    failed = _run(JobState.FAILED, runs)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, "broken")
        await wait_until(pilot, lambda: not screen.panel.diagnosing, "the diagnosis")
        assert screen.panel.diagnosis_of(failed) is MISSING_TORCH
        panel = screen.query_one(DiagnosisPanel)
        assert "no module torch" in str(panel.render())
        assert fake.calls.count(("diagnose", failed.run_id)) == 1
        await pilot.press("d")  # again, on demand
        await wait_until(
            pilot, lambda: fake.calls.count(("diagnose", failed.run_id)) == 2, "a new diagnosis"
        )


async def test_fake_stalled_run_is_shown_and_can_be_cancelled_from_the_panel() -> None:
    from ddp_tui.tui.modals import ConfirmModal

    fake = FakeCluster(runs=diagnosed_runs(), heartbeats=HEARTBEATS, stall=STALL)
    running = _run(JobState.RUNNING)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, "mnist-cnn")
        await wait_until(pilot, lambda: bool(screen.panel.heartbeats), "the heartbeats")
        panel = str(screen.query_one(DiagnosisPanel).render())
        assert "Stalled" in panel and "rank 3 on n2" in panel
        assert "checkpoint saved" in panel  # the .out's last lines
        assert screen.check_action("evidence", ()) is False  # nothing to jump to
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.click("#yes")
        await wait_until(pilot, lambda: ("cancel", running.run_id) in fake.calls, "the cancel")


async def test_fake_why_a_run_waits_is_asked_on_demand_only() -> None:
    # FAKE: the scheduler's account of the queued run (the real one is asked on the Slurm
    # test cluster: tests/integration/test_why_slurm.py).
    queued = _run(JobState.PENDING)
    wait = replace(
        sample_wait(queued.job_id or "", queued.run_id), estimated_start="2023-11-15T01:00:00"
    )
    fake = FakeCluster(waits={queued.run_id: wait})
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, "queued")
        panel = screen.query_one(DiagnosisPanel)
        # From the reason alone, before asking: what it waits for and what to do.
        before = str(panel.render())
        assert "waits for:" in before and "what to do:" in before
        assert "t asks the scheduler why" in before
        assert not any(call == "why_waiting" for call, _ in fake.calls)
        await pilot.press("t")
        await wait_until(pilot, lambda: screen.panel.wait is not None, "the explanation")
        after = str(panel.render())
        assert "estimated start: 2023-11-15T01:00:00" in after
        assert "MaxJobs" in after and "priority" in after  # the limit and the sprio line
        assert [c for c in fake.calls if c[0] == "why_waiting"] == [("why_waiting", queued.run_id)]


def test_the_filter_finds_runs_by_their_reason() -> None:
    from ddp_tui.tui.jobs_table import run_matches

    runs = diagnosed_runs()
    assert [r.name for r in runs if run_matches(r, "stalled")] == ["mnist-cnn"]
    assert [r.name for r in runs if run_matches(r, "torch")] == ["broken"]
