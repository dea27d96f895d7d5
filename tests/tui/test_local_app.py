"""The app on the real facade and the real local scheduler (no Slurm, no fakes).

The torch-marked story runs the real trainer under torchrun on the CPU; the other tests
only need the app, the facade and run directories.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Static

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.logview import LogPane
from ddp_tui.tui.modals import ChecksModal, ConfirmModal
from ddp_tui.tui.screens.compose import ComposeScreen
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.help import HelpScreen
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.helpers.hold import Hold
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import (
    in_states,
    inline_error_problems,
    open_compose,
    open_run,
    pick,
    run_story,
    type_into,
    wait_run,
)

#: Local jobs outlive the app by design; a failed test must not leave one running.
pytestmark = pytest.mark.usefixtures("cancel_leftover_jobs")


def local_app(tmp_path: Path) -> DdpTuiApp:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, local_state_dir=str(tmp_path / "state"), prompter=prompter)

    return DdpTuiApp(factory, profile=profile, refresh_interval=2)


async def connected(pilot: object, app: DdpTuiApp) -> None:
    await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh")  # type: ignore[arg-type]


#: (field, what a user might type, words the inline error must contain)
BAD_INPUT: list[tuple[str, str, str]] = [
    ("name", "my run!", "letters"),
    ("num_classes", "many", "integer"),
    ("synthetic_samples", "-5", "from 1"),
    ("synthetic_val_samples", "1e3", "integer"),
    ("synthetic_shape", "28x28", "C,H,W"),
    ("target", "label", "tabular"),
    ("nodes", "2", "local scheduler"),
    ("gpus_per_node", "0", "from 1"),
    ("account", "my account", "letters"),
    ("qos", "a/b", "letters"),
    ("time_limit", "2 hours", "HH:MM:SS"),
    ("constraint", "a100 ib", "node features"),
    ("cpus_per_task", "four", "integer"),
    ("mem", "lots", "16G"),
    ("epochs", "0", "from 1"),
    ("batch_per_gpu", "1.5", "integer"),
    ("lr", "fast", "number"),
    ("base_batch", "x", "integer"),
    ("warmup_epochs", "-1", "from 0"),
    ("workers", "many", "integer"),
    ("seed", "-3", "from 0"),
    ("max_steps_per_epoch", "0", "from 1"),
    ("signal_lead_sec", "soon", "integer"),
    ("env_setup", "if then", "bash"),
    ("python", "my python", "one program"),
    ("extra_sbatch", "--partition=gpu", "partition"),
    ("extra_trainer_args", "--run-dir /x", "run-dir"),
    ("nccl_env", "NCCL_DEBUG", "NAME=value"),
]


async def test_bad_input_in_every_field_gives_inline_errors(tmp_path: Path) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        screen = await open_compose(pilot)
        for field, text, _ in BAD_INPUT:
            await type_into(pilot, field, text)
        await pick(pilot, "model", "custom", "__custom__")
        await type_into(pilot, "model", "my model")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: len(screen.errors) >= len(BAD_INPUT), "every error")
        # The live preview re-validates after typing stops, through the I/O owner, and may
        # land later on a busy machine: wait for it, not for a time.
        expected = {field for field, _, _ in BAD_INPUT} | {"model"}
        await wait_until(
            pilot,
            lambda: expected <= set(screen.errors) and not screen.preview_pending,
            "the preview's errors for every field",
            30,
        )
        cases = [*BAD_INPUT, ("model", "my model", "pkg.module:function")]
        assert not (problems := inline_error_problems(screen, cases)), problems
        assert app.screen is screen  # nothing was submitted, nothing crashed
        assert not any((tmp_path / "runs").glob("*/spec.json"))


async def test_header_keys_help_and_filter_on_the_local_scheduler(tmp_path: Path) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        assert app.status.location == "local scheduler"
        assert app.status.connection == "ok"
        assert "local" in app.status.version.lower()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, JobsScreen)
        await pilot.press("slash", *"nothing-matches", "enter")
        assert app.screen.filter_text == "nothing-matches"
        await pilot.press("escape")
        assert app.screen.filter_text == ""
        await pilot.press("c")  # nothing selected: a warning, no crash
        await pilot.press("s", "escape", "f", "f")
        assert isinstance(app.screen, JobsScreen)


async def test_a_job_that_ends_at_once_shows_in_jobs_and_detail(tmp_path: Path) -> None:
    """Without torch: the job's python is `true`, so it completes with no epochs."""
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        await type_into(pilot, "name", "instant")
        await type_into(pilot, "python", "true")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs")
        run = await wait_run(pilot, "instant", in_states(JobState.COMPLETED), "completed", 60)
        assert run.epochs_done == 0
        table = app.screen.query_one(JobsTable)
        assert table.selected_run_id == run.run_id
        assert table.get_cell(run.run_id, "state") == "COMPLETED"
        header = f"[ddp-tui] training job {run.job_id} on"
        for visit in ("first", "second"):
            # Each opening of the detail shows the whole log again: a second screen on the
            # same run once showed only lines written after the first had closed (none here).
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
            out = app.screen.query_one(LogPane).view("out")
            await wait_until(
                pilot,
                lambda out=out: any(line.startswith(header) for line in out.lines),
                f"the log's header, {visit} visit",
            )
            if visit == "first":
                await pilot.press("escape")
                await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs")
        await pilot.press("3")
        await wait_until(pilot, lambda: bool(app.screen.checks), "the checklist")
        assert any(check.ok is False for check in app.screen.checks)  # no epochs ran
        await pilot.press("c")  # not running: refused with a warning
        assert not isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ChecksModal), "verify modal")
        await pilot.press("escape")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "edit")
        assert app.screen.form_values()["python"] == "true"
        assert app.screen.form_values()["name"] == "instant"


@pytest.mark.torch
@pytest.mark.slow(
    reason="the whole local story by keys: a real job composed, followed, cancelled "
    "mid-run, retried and run to its end, each step waiting on the job itself"
)
async def test_story_compose_submit_follow_cancel_retry_complete(
    tmp_path: Path, hold: Hold
) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await run_story(pilot, app, name="story", nodes=1, hold=hold)


async def test_sweep_compare_and_export_by_keys(tmp_path: Path) -> None:
    """Without torch: a sweep of jobs whose python is `true` still makes a group to compare."""
    from ddp_tui.tui.screens.compare import CompareScreen
    from ddp_tui.tui.sweep_dialog import SweepDialog

    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.press(*"New experiment", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        await type_into(pilot, "name", "sweep")
        await type_into(pilot, "python", "true")
        await type_into(pilot, "cpus_per_task", "1")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: isinstance(app.screen, SweepDialog), "the sweep dialog")
        app.screen.query_one("#values-0", Input).focus()  # GPUs per node, the default field
        await pilot.press("end", "ctrl+u", *"1,x", "enter")
        assert isinstance(app.screen, SweepDialog)  # refused inline: not a list of sizes
        await pilot.press("ctrl+u", *"1,2", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs", 30)
        await wait_until(
            pilot,
            lambda: app.snapshot is not None and len(app.snapshot.runs) == 2,
            "two runs",
            30,
        )
        groups = {run.group for run in app.snapshot.runs}  # type: ignore[union-attr]
        assert len(groups) == 1 and None not in groups
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), "Compare")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await wait_until(pilot, lambda: len(screen.rows) == 2, "a row per size", 30)
        assert sorted(row["gpus_per_node"] for row in screen.rows) == [1, 2]  # type: ignore[type-var]
        await pilot.press("x")
        await wait_until(
            pilot,
            lambda: any((tmp_path / "runs").rglob("comparison.md")),
            "the exported Markdown",
            30,
        )
        assert any((tmp_path / "runs").rglob("comparison.csv"))


async def test_one_compose_keystroke_validates_the_spec_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preview's plan is the one check: no second pass to convert, none to render."""
    import sys

    from ddp_tui.spec import validate

    calls: list[str] = []

    def counted(spec: Any) -> Any:
        calls.append(spec.name)
        return validate(spec)

    # Every module that holds the function (the plan's module, the templates', the spec's).
    for module in list(sys.modules.values()):
        if module.__name__.startswith("ddp_tui") and getattr(module, "validate", None) is validate:
            monkeypatch.setattr(module, "validate", counted)

    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        screen = app.screen
        assert isinstance(screen, ComposeScreen)
        await type_into(pilot, "name", "abc")

        def previewed(name: str) -> bool:
            script = screen.script or ""
            return f"-{name}-" in script and not screen.preview_pending

        await wait_until(pilot, lambda: previewed("abc"), "the preview of abc")
        calls.clear()
        await pilot.press("d")
        await wait_until(pilot, lambda: previewed("abcd"), "the preview of abcd")
        assert calls == ["abcd"]


async def test_the_preview_is_the_submitted_job_script_byte_for_byte(tmp_path: Path) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        screen = app.screen
        assert isinstance(screen, ComposeScreen)
        await type_into(pilot, "name", "same")
        await type_into(pilot, "python", "true")
        await wait_until(
            pilot,
            lambda: "-same-" in (screen.script or "") and not screen.preview_pending,
            "the preview",
        )
        previewed = screen.script
        assert previewed is not None
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs", 30)
        run = await wait_run(pilot, "same", lambda r: r.job_id is not None, "a job id", 30)
        submitted = (Path(run.run_dir) / "job.sbatch").read_bytes()
        assert submitted == previewed.encode("utf-8")


#: A user's own script: (field, what a user might type, words the inline error must contain)
BAD_SCRIPT_INPUT: list[tuple[str, str, str]] = [
    ("script", "-m two words", "-m package.module"),
    ("script_args", "--name 'unclosed", "shell words"),
    ("snapshot_max_mb", "0", "from 1"),
    ("metrics_columns", "loss", "NAME=value"),
    ("samples_per_epoch", "lots", "integer"),
]


async def test_bad_input_in_a_scripts_fields_gives_inline_errors(tmp_path: Path) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        screen = await open_compose(pilot)
        await pick(pilot, "entry", "script")
        for field, text, _ in BAD_SCRIPT_INPUT:
            await type_into(pilot, field, text)
        await pick(pilot, "metrics", "custom", "__custom__")
        await type_into(pilot, "metrics", "regex:Epoch (\\d+")
        await pilot.press("ctrl+s")
        expected = {field for field, _, _ in BAD_SCRIPT_INPUT} | {"metrics"}
        await wait_until(
            pilot,
            lambda: expected <= set(screen.errors) and not screen.preview_pending,
            "the preview's errors for every field",
            30,
        )
        cases = [*BAD_SCRIPT_INPUT, ("metrics", "regex:Epoch (\\d+", "does not compile")]
        assert not (problems := inline_error_problems(screen, cases)), problems
        # Once the fields are right, a script that is not there is named where it is typed.
        for field, text in (
            ("script", str(tmp_path / "nope.py")),
            ("script_args", "--epochs 2"),
            ("snapshot_max_mb", "100"),
            ("metrics_columns", ""),
            ("samples_per_epoch", ""),
        ):
            await type_into(pilot, field, text)
        await type_into(pilot, "metrics", "regex:Epoch (?P<epoch>\\d+)")
        await wait_until(
            pilot,
            lambda: set(screen.errors) == {"script"} and not screen.preview_pending,
            "only the missing script",
            30,
        )
        assert "not found on this machine" in str(screen.query_one("#e-script", Static).render())
        assert app.screen is screen  # nothing was submitted, nothing crashed
        assert not any((tmp_path / "runs").glob("*/spec.json"))


@pytest.mark.torch
async def test_story_compose_a_users_script_submit_and_see_its_parsed_epochs(
    tmp_path: Path,
) -> None:
    # A tutorial-style script that prints "Epoch N - Avg Loss: ..., Accuracy: ...%".
    script = Path(__file__).resolve().parents[1] / "helpers" / "user_scripts" / "tutorial_ddp.py"
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot, app)
        await open_compose(pilot)
        await pick(pilot, "entry", "script")
        for field, value in (
            ("name", "mine"),
            ("script", str(script)),
            ("script_args", "--epochs 2"),
            ("gpus_per_node", "2"),
            ("cpus_per_task", "2"),
            ("epochs", "2"),
            ("python", sys.executable),
        ):
            await type_into(pilot, field, value)
        await pick(pilot, "metrics", "epoch-line")
        await pick(pilot, "device", "cpu")
        await pick(pilot, "backend", "gloo")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs", 30)
        run = await wait_run(pilot, "mine", in_states(JobState.COMPLETED), "completed", 180)
        assert run.epoch_label == "2/2"
        assert run.last_train_loss is not None
        detail = await open_run(pilot, run)
        await wait_until(pilot, lambda: len(detail.metrics) == 2, "both parsed epochs")
        assert [row["epoch"] for row in detail.metrics] == [1.0, 2.0]
        assert all(row["train_acc"] is not None for row in detail.metrics)  # "92.3%" -> 0.923
        assert all(0 < (row["train_acc"] or 0) <= 1 for row in detail.metrics)
        await pilot.press("3")
        await wait_until(pilot, lambda: bool(detail.checks), "the checklist")
        assert all(check.ok for check in detail.checks), detail.checks
