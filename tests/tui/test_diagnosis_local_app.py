"""Issue 12 in the app on the real facade and the real local scheduler (no fakes): a real
failure diagnosed in Jobs and Run detail with its evidence line found in the log, and a
really stalled run marked, counted, explained and cancelled from Run detail.

The runs are submitted through the facade (Compose has its own tests); the app then shows
them as a user would see them. Jobs are kept where a test needs them by construction
(tests/helpers/hold.py); the timeouts only bound a hang.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import TabbedContent

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.diagnosis_panel import DiagnosisPanel
from ddp_tui.tui.jobs_table import JobsTable
from ddp_tui.tui.logview import LogPane
from ddp_tui.tui.modals import ConfirmModal
from ddp_tui.tui.screens.detail import DetailScreen
from tests.helpers.hold import Hold
from tests.integration.story import tiny_script_spec, tiny_spec
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import in_states, open_run, wait_run

#: Local jobs outlive the app by design: a failed test must not leave one running.
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("cancel_leftover_jobs")]

ABSENT_MODULE_SCRIPT = (
    Path(__file__).resolve().parents[1] / "helpers" / "failing_scripts" / "needs_absent_module.py"
)
#: 3 seconds of quiet make a stall here (the profile's default is 10 minutes).
STALL_AFTER_MIN = 0.05


def _profile(tmp_path: Path) -> Profile:
    return Profile(
        scheduler="local",
        runs_root=str(tmp_path / "runs"),
        stall_after_min=STALL_AFTER_MIN,
        check_python=False,  # a held job's set-up line would hold the check too
    )


def _cluster(tmp_path: Path) -> Cluster:
    return Cluster.open(_profile(tmp_path), local_state_dir=str(tmp_path / "state"))


def _app(tmp_path: Path) -> DdpTuiApp:
    profile = _profile(tmp_path)

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, local_state_dir=str(tmp_path / "state"), prompter=prompter)

    return DdpTuiApp(factory, profile=profile, refresh_interval=2)


async def test_a_real_failure_is_diagnosed_in_jobs_and_its_evidence_found_in_the_log(
    tmp_path: Path,
) -> None:
    submitter = _cluster(tmp_path)
    run = submitter.submit(submitter.plan(tiny_script_spec(ABSENT_MODULE_SCRIPT, name="absent")))
    submitter.close()
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        failed = await wait_run(
            pilot, "absent", lambda r: r.diagnosis is not None, "its diagnosis", 240
        )
        assert failed.state is JobState.FAILED
        assert failed.diagnosis is not None and failed.diagnosis.code == "missing-module"
        table = app.screen.query_one(JobsTable)
        assert table.get_cell(run.run_id, "reason") == failed.diagnosis.short != ""
        table.move_cursor(table.order.index(run.run_id))
        detail = await open_run(pilot, failed)
        panel = detail.query_one(DiagnosisPanel)
        assert panel.display and failed.diagnosis.short in str(panel.render())
        pane = detail.query_one(LogPane)
        await wait_until(
            pilot,
            lambda: any("absent_augment_lib" in line for line in pane.view("err").lines),
            "the .err in the pane",
        )
        evidence = next(e for e in failed.diagnosis.evidence if e.file.endswith(".err"))
        await pilot.press("g")
        await pilot.pause()
        assert pane.query_one(TabbedContent).active == "err"
        view = pane.view("err")
        assert view.match_line is not None
        assert evidence.text in view.lines[view.match_line - view.first_index]


async def test_a_really_stalled_run_is_marked_explained_and_cancelled_from_detail(
    tmp_path: Path, hold: Hold
) -> None:
    submitter = _cluster(tmp_path)
    spec = hold.after_epochs(tiny_spec(name="stalls", gpus_per_node=2, epochs=3), 1)
    run = submitter.submit(submitter.plan(spec))
    submitter.close()
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        # Both ranks park after epoch 1: nothing more comes from them, and it stalls.
        stalled = await wait_run(
            pilot, "stalls", lambda r: r.stall is not None or r.state.is_terminal, "a stall", 300
        )
        assert stalled.state is JobState.RUNNING and stalled.stall is not None
        await wait_until(pilot, lambda: app.status.stalled >= 1, "the header's count")
        table = app.screen.query_one(JobsTable)
        assert table.get_cell(run.run_id, "reason").startswith("stalled")
        table.move_cursor(table.order.index(run.run_id))
        detail = await open_run(pilot, stalled)
        assert isinstance(detail, DetailScreen)
        await wait_until(pilot, lambda: len(detail.panel.heartbeats) == 2, "both heartbeats")
        panel = detail.query_one(DiagnosisPanel)
        await wait_until(pilot, lambda: "silent ranks" in str(panel.render()), "silent ranks")
        assert "Stalled" in str(panel.render())
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.click("#yes")
        await wait_run(pilot, "stalls", in_states(JobState.CANCELLED), "the cancel", 120)
