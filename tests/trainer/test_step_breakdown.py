"""The step breakdown (docs/step-breakdown.md): real torchrun, gloo processes on the CPU.

metrics.csv splits each epoch into data wait, compute, exposed communication and the rest;
step_times.jsonl lists every rank's step times; run.json records the gradient's bytes, DDP's
buckets, the calibration and the trainer's own all-reduce probe. The calibration must leave the
run exactly as it would have been without it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.helpers import explain, metrics_rows, run, run_json, torchrun_argv

pytestmark = pytest.mark.torch

# TINY's workload (BatchNorm and Dropout: a calibration that leaked RNG draws or running
# statistics would change the weights), capped at 12 steps per epoch.
SMALL = (
    "--model", "simple_cnn",
    "--synthetic-samples", "480",
    "--synthetic-val-samples", "64",
    "--synthetic-shape", "1,12,12",
    "--num-classes", "10",
    "--batch-size", "8",
    "--epochs", "2",
    "--max-steps-per-epoch", "12",
    "--workers", "0",
    "--seed", "7",
    "--deterministic",
    "--timeout-sec", "60",
)  # fmt: skip
STEPS = 12


def _train(run_dir: Path, *extra: str, nproc: int = 2, **env: str) -> Path:
    args = ["--run-dir", str(run_dir), *SMALL, *extra]
    if nproc == 1:
        proc = run([sys.executable, "-m", "ddp_tui.trainer", *args], **env)
    else:
        proc = run(torchrun_argv("ddp_tui.trainer", args, nproc), **env)
    assert proc.returncode == 0, explain(proc)
    return run_dir


def _step_times(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "step_times.jsonl").read_text().splitlines()]


def _cell(row: dict[str, str], name: str) -> float | None:
    return float(row[name]) if row[name] else None


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 gloo ranks, calibration on (the default, 5 steps)."""
    return _train(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1 process, calibration on."""
    return _train(tmp_path_factory.mktemp("single"), nproc=1)


def _parameter_bytes() -> int:
    """simple_cnn's float32 parameters, counted here rather than by the trainer."""
    from ddp_tui.trainer.models import build_model

    model = build_model("simple_cnn", (1, 12, 12), 10)
    return sum(p.numel() for p in model.parameters()) * 4


# ------------------------------------------------------------------ 2 ranks


def test_the_breakdown_adds_up_to_the_epoch_time(pair: Path) -> None:
    rows = metrics_rows(pair)
    assert [r["epoch"] for r in rows] == ["1", "2"]
    for row in rows:
        parts = [_cell(row, c) for c in ("data_load_time_sec", "compute_time_sec")]
        comm, other = _cell(row, "comm_time_sec"), _cell(row, "other_time_sec")
        assert comm is not None and comm >= 0, row
        assert other is not None and other >= 0, row
        assert all(p is not None and p >= 0 for p in parts), row
        total = sum(p or 0.0 for p in parts) + comm + other
        assert total == pytest.approx(float(row["epoch_time_sec"]), rel=1e-8, abs=1e-8), row
        assert float(row["compute_time_sec"]) > 0


def test_run_json_records_the_gradient_and_its_all_reduce(pair: Path) -> None:
    info = run_json(pair)
    assert info["grad_bytes"] == _parameter_bytes()
    ddp = info["ddp"]
    assert ddp["bucket_cap_mb"] == 25.0
    assert isinstance(ddp["buckets"], int) and ddp["buckets"] >= 1
    assert info["calibration"]["steps"] == 5 and info["calibration"]["fwd_bwd_sec"] > 0
    probe = info["allreduce_probe"]
    assert probe["world_size"] == 2 and probe["busbw_gbps"] > 0 and probe["time_sec"] > 0
    # One bucket's worth: the whole gradient, which is smaller than the 25 MiB cap.
    assert probe["bytes"] == info["grad_bytes"]
    assert info["loader_workers"] == 0


def test_step_times_list_every_rank_every_epoch(pair: Path) -> None:
    lines = _step_times(pair)
    assert [line["epoch"] for line in lines] == [1, 2]
    hosts = run_json(pair)["rank_hosts"]
    rows = metrics_rows(pair)
    for line, row in zip(lines, rows, strict=True):
        ranks = line["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
        assert [r["host"] for r in ranks] == hosts
        for r in ranks:
            assert r["step_median_sec"] > 0 and r["busy_median_sec"] >= 0
            assert r["data_sec"] >= 0 and r["compute_sec"] > 0 and r["comm_sec"] >= 0
        # metrics.csv holds the means over ranks of these sums.
        for key, column in (("data_sec", "data_load_time_sec"), ("comm_sec", "comm_time_sec")):
            mean = sum(r[key] for r in ranks) / 2
            assert float(row[column]) == pytest.approx(mean, rel=1e-8, abs=1e-9)


def test_a_bucket_cap_reaches_ddp(tmp_path: Path) -> None:
    """A cap below the gradient's size splits it into more than one bucket."""
    cap_mb = _parameter_bytes() / 4 / 2**20
    info = run_json(_train(tmp_path, "--bucket-cap-mb", f"{cap_mb:.6f}", "--epochs", "1"))
    assert info["ddp"]["bucket_cap_mb"] == pytest.approx(cap_mb, rel=1e-5)
    assert info["ddp"]["buckets"] >= 2
    assert info["allreduce_probe"]["bytes"] <= cap_mb * 2**20


# ------------------------------------------------------------------ 1 process


def test_one_process_has_no_communication(single: Path) -> None:
    info = run_json(single)
    assert info["allreduce_probe"] is None and info["ddp"] is None
    assert info["grad_bytes"] == _parameter_bytes()
    for row in metrics_rows(single):
        assert float(row["comm_time_sec"]) == 0.0
    for line in _step_times(single):
        (only,) = line["ranks"]
        assert only["comm_sec"] == 0.0 and only["busy_median_sec"] == only["step_median_sec"]


# ------------------------------------------------------------------ calibration leaves no trace


@pytest.mark.parametrize("nproc", [1, 2])
def test_calibration_leaves_the_weights_unchanged(
    nproc: int, pair: Path, single: Path, tmp_path: Path
) -> None:
    calibrated = single if nproc == 1 else pair
    plain = _train(tmp_path, "--calibration-steps", "0", nproc=nproc)
    assert run_json(calibrated)["calibration"]["steps"] == 5
    assert run_json(plain)["calibration"] is None
    assert run_json(plain)["weights_sha256"] == run_json(calibrated)["weights_sha256"]
    if nproc == 2:  # not measured: empty, and compute keeps forward+backward+optimizer
        assert all(r["comm_time_sec"] == "" for r in metrics_rows(plain))
        assert all(r["busy_median_sec"] is None for r in _step_times(plain)[0]["ranks"])


# ------------------------------------------------------------------ a straggler (fake)


def test_a_slow_rank_is_slow_in_busy_time_and_the_other_waits(tmp_path: Path) -> None:
    """DDP_TUI_FAKE_SLOW_RANK is a fake: rank 1 sleeps 0.05 s in each step's data fetch, so
    by construction its busy time is longer, and rank 0 spends the difference waiting in the
    all-reduce (a real slow host cannot be produced on demand)."""
    run_dir = _train(tmp_path, "--epochs", "1", DDP_TUI_FAKE_SLOW_RANK="1:0.05")
    (line,) = _step_times(run_dir)
    fast, slow = line["ranks"]
    assert slow["busy_median_sec"] >= fast["busy_median_sec"] + 0.04, line
    assert fast["comm_sec"] > slow["comm_sec"], line
    assert slow["data_sec"] >= 0.05 * (STEPS - 1), line


# ------------------------------------------------------------------ units


def test_the_epoch_sum_is_clamped_not_each_step() -> None:
    from ddp_tui.trainer.breakdown import breakdown_columns, exposed_comm_sum, rank_epoch
    from ddp_tui.trainer.timing import StepTime

    class World:  # a fake: the two fields rank_epoch reads from a real process group
        distributed, rank, host = True, 0, "node1"

    steps = [StepTime(wall=0.10, sync_fwd_bwd=0.06), StepTime(wall=0.08, sync_fwd_bwd=0.046)]
    raw = exposed_comm_sum(steps, 0.05)  # +0.01 and -0.004
    assert raw == pytest.approx(0.006)
    from ddp_tui.trainer.breakdown import Calibrated

    r = rank_epoch(
        World(),  # type: ignore[arg-type]
        steps,
        Calibrated(5, 0.05),
        data_sec=0.02,
        measured_sec=0.2,
        comm_raw_sec=raw,
    )
    assert r.comm_sec == pytest.approx(0.006) and r.compute_sec == pytest.approx(0.194)
    # Per step, wall - exposed: 0.09, and 0.084 (noise below the calibration counts both ways).
    assert r.busy_median_sec == pytest.approx((0.09 + 0.084) / 2)
    noisy = rank_epoch(
        World(),  # type: ignore[arg-type]
        steps,
        Calibrated(5, 0.07),
        data_sec=0.0,
        measured_sec=0.2,
        comm_raw_sec=exposed_comm_sum(steps, 0.07),
    )
    assert noisy.comm_sec == 0.0 and noisy.compute_sec == pytest.approx(0.2)
    cols = breakdown_columns([r], epoch_time_sec=0.25)
    assert cols["other_time_sec"] == pytest.approx(0.25 - 0.02 - 0.194 - 0.006)
    assert breakdown_columns([r], epoch_time_sec=0.1)["other_time_sec"] == 0.0


def test_older_checkpoints_partial_sums_still_load() -> None:
    from ddp_tui.trainer.train import EpochSums

    old = {
        "loss": 1.0, "correct": 2.0, "count": 3.0, "data_time": 0.1, "compute_time": 0.2,
        "train_time": 0.3, "epoch_time": 0.4, "lr": 0.05,
    }  # fmt: skip
    assert EpochSums(**old).comm_raw == 0.0


def test_a_resumed_attempt_keeps_only_the_step_times_its_checkpoint_covers(
    tmp_path: Path,
) -> None:
    from ddp_tui.trainer.metrics import StepTimesLog

    path = tmp_path / "step_times.jsonl"
    path.write_text(
        "".join(json.dumps({"epoch": e, "ranks": []}) + "\n" for e in (1, 2, 2, 3))
        + '{"epoch": 4, "ran'
    )
    StepTimesLog(path).prepare(2)
    assert [json.loads(line)["epoch"] for line in path.read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize(
    ("argv", "argument", "allowed"),
    [
        (["--bucket-cap-mb", "0"], "--bucket-cap-mb", "greater than 0"),
        (["--bucket-cap-mb", "-3"], "--bucket-cap-mb", "greater than 0"),
        (["--bucket-cap-mb", "nan"], "--bucket-cap-mb", "greater than 0"),
        (["--bucket-cap-mb", "inf"], "--bucket-cap-mb", "finite"),
        (["--calibration-steps", "-1"], "--calibration-steps", "at least 0"),
    ],
)
def test_bad_breakdown_arguments_name_the_flag_and_what_is_allowed(
    argv: list[str], argument: str, allowed: str
) -> None:
    from ddp_tui.trainer.args import parse_args
    from ddp_tui.trainer.errors import UsageError

    with pytest.raises(UsageError) as info:
        parse_args(["--run-dir", "/tmp/x", *argv])
    assert info.value.argument == argument and allowed in info.value.message


def test_the_slow_rank_fake_refuses_a_malformed_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddp_tui.trainer.breakdown import FAKE_SLOW_RANK_ENV, fake_slow_rank_delay
    from ddp_tui.trainer.errors import UsageError

    monkeypatch.setenv(FAKE_SLOW_RANK_ENV, "1:0.25")
    assert (fake_slow_rank_delay(0), fake_slow_rank_delay(1)) == (0.0, 0.25)
    monkeypatch.setenv(FAKE_SLOW_RANK_ENV, "one")
    with pytest.raises(UsageError) as info:
        fake_slow_rank_delay(1)
    assert info.value.argument == FAKE_SLOW_RANK_ENV and "RANK:SECONDS" in info.value.message
