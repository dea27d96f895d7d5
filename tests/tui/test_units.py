"""The app's pure parts: polling pace, sizes, form round trip, formatting, the jobs-table diff."""

from __future__ import annotations

from dataclasses import replace

from textual.app import App, ComposeResult

from ddp_tui.remote.backends.states import JobState
from ddp_tui.spec import ExperimentSpec, spec_from_form
from ddp_tui.tui.form import FORM_FIELDS as FIELDS
from ddp_tui.tui.form import form_from_spec
from ddp_tui.tui.formatting import describe_error, duration, number, rate
from ddp_tui.tui.pacing import poll_delay
from ddp_tui.tui.screens.jobs import COLUMNS, JobsTable, row_values, run_matches
from tests.tui.fakes import sample_runs


def test_poll_interval_never_below_two_seconds() -> None:
    assert poll_delay(0.1, 0, True) == 2.0
    assert poll_delay(5, 0, True) == 5.0


def test_poll_backs_off_on_errors_up_to_a_minute() -> None:
    delays = [poll_delay(5, n, True) for n in range(1, 8)]
    assert delays[:3] == [10.0, 20.0, 40.0]
    assert delays[-1] == 60.0
    assert delays == sorted(delays)


def test_poll_backs_off_when_nothing_runs() -> None:
    assert poll_delay(5, 0, False) == 15.0
    assert poll_delay(20, 0, False) == 30.0
    assert poll_delay(40, 0, False) == 40.0  # never faster than asked


def test_form_round_trips_every_spec_field() -> None:
    spec = ExperimentSpec(
        name="x1", model="pkg.mod:build", dataset="tabular", data_root="/d", target="y",
        task="regression", lr=0.01, base_batch=256, lr_scaling="linear",
        env_setup=("module load pytorch", "source ~/venv/bin/activate"),
        extra_sbatch=("--exclusive",), extra_trainer_args=("--compile",),
        nccl_env=(("NCCL_SOCKET_IFNAME", "ib0"), ("NCCL_DEBUG", "INFO")), download=True,
    )  # fmt: skip
    form = form_from_spec(spec)
    assert set(form) == set(FIELDS)
    back, errors = spec_from_form(form)
    assert errors == []
    assert back == spec


def test_formatting() -> None:
    assert duration(61) == "1:01"
    assert duration(3725) == "1:02:05"
    assert duration(None) == "-"
    assert rate(12345.6) == "12.3k/s"
    assert rate(None) == "-"
    assert number(float("nan")) == "-"
    assert describe_error(RuntimeError("a\n  b")) == "a b"


def test_filter_matches_name_state_and_job_id() -> None:
    run = sample_runs()[0]
    assert run_matches(run, "mnist")
    assert run_matches(run, "running 1042")
    assert not run_matches(run, "failed")


class _TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield JobsTable(id="jobs")


async def test_jobs_table_refresh_of_2000_runs_touches_only_changed_cells() -> None:
    """A refresh that changes the running rows touches only their changed cells. (How long
    that takes is measured by benchmarks/bench_tui.py, not asserted here: a timed test
    fails on a busy machine.)"""
    base = sample_runs()[0]
    runs = [
        replace(base, run_id=f"20231114-2215{i:04d}-r-{i:04x}", name=f"run-{i}",
                state=JobState.RUNNING if i % 20 == 0 else JobState.COMPLETED,
                elapsed_sec=float(i))
        for i in range(2000)
    ]  # fmt: skip
    app = _TableApp()
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(JobsTable)
        assert table.show_runs(runs) == 2000 * len(COLUMNS)
        await pilot.pause()
        changed = [
            replace(r, elapsed_sec=r.elapsed_sec + 5) if r.state is JobState.RUNNING else r
            for r in runs
        ]
        written = table.show_runs(changed)
        table.refresh()
        await pilot.pause()
        differ = sum(
            a != b
            for old, new in zip(runs, changed, strict=True)
            for a, b in zip(row_values(old), row_values(new), strict=True)
        )
        # 100 running rows x their elapsed cell and, where the hours' text moved, GPU-h.
        assert 100 <= differ < 200 and written == differ
        assert table.get_cell(runs[0].run_id, "elapsed") == row_values(changed[0])[4]


def test_epoch_times_below_ten_seconds_keep_their_fraction() -> None:
    from ddp_tui.tui.screens.detail import metric_cell

    # A small script's sub-second epochs must not all read 0:00.
    assert metric_cell("epoch_time_sec", 0.0374) == "0.04s"
    assert metric_cell("epoch_time_sec", 9.5) == "9.50s"
    assert metric_cell("epoch_time_sec", 75.0) == "1:15"
    assert metric_cell("epoch_time_sec", None) == "-"


def test_a_step_windows_row_shows_its_step_where_an_epoch_would_be() -> None:
    from ddp_tui.tui.run_summary import metric_cells

    window = metric_cells({"epoch": None, "step": 40.0, "train_loss": 2.5})
    assert window[0] == "it 40" and window[1] == "2.5"
    assert metric_cells({"epoch": 3.0, "step": None})[0] == "3"  # an epoch row: its epoch
    assert metric_cells({"epoch": None, "step": None})[0] == "-"


def test_run_detail_shows_what_a_scripts_ranks_formed_not_what_they_were_launched_as() -> None:
    from ddp_tui.tui.run_summary import summary_text

    run = replace(sample_runs()[0], spec=ExperimentSpec(entry="script", script="fit.py"))
    formed = {
        "group": "formed",
        "reason": "2 process(es) formed one gloo group",
        "world_size": 2,
        "backend": "gloo",
        "hosts": ["n1", "n2"],
        "devices": ["cpu"],
        "launched": 2,
        "frameworks": {"lightning": {}},
    }
    text = summary_text(run, {"world_size": 4, "backend": "nccl", "observed": formed}, "r").plain
    assert "observed: 2 process(es) formed one gloo group on cpu   (lightning)" in text
    assert "hosts: n1, n2   world size: 2   backend: gloo" in text

    alone = {"group": "none", "reason": "no process group was formed", "launched": 2}
    text = summary_text(run, {"observed": alone}, "r").plain
    assert "observed: the ranks trained alone: no process group was formed" in text

    unsynced = {**formed, "sync": {"state": "never", "reason": "no DDP wrap"}}
    text = summary_text(run, {"observed": unsynced}, "r").plain
    assert "group on cpu, but never synchronised gradients: no DDP wrap" in text
