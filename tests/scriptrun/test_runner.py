"""The wrapper run for real (``python -m ddp_tui.scriptrun``) on small stdlib-only scripts."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
FAKE = str(SCRIPTS / "fake_train.py")
LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    for name in LAUNCH_VARS:
        e.pop(name, None)
    e.update(PYTHONPATH=str(SRC), RANK="0", WORLD_SIZE="1", SLURM_JOB_ID="4242")
    e.update(extra)
    return e


def wrapper(run_dir: Path, *script: str, options: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable, "-m", "ddp_tui.scriptrun", "--run-dir", str(run_dir),
        "--cwd", str(run_dir.parent), "--epochs", "3", "--world-size", "1",
        "--backend", "gloo", *options, "--", *script,
    ]  # fmt: skip


def run(run_dir: Path, *script: str, options: tuple[str, ...] = (), **extra: str) -> Any:
    return subprocess.run(
        wrapper(run_dir, *script, options=options),
        env=env(**extra),
        capture_output=True,
        timeout=120,
        check=False,
    )


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_json(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


def test_epoch_lines_become_rows(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out = tmp_path / "env.json"
    done = run(run_dir, FAKE, "--first", "1", "--last", "3", "--env-out", str(out),
               options=("--samples-per-epoch", "600"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2", "3"]
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.5, 1 / 3], abs=1e-4)
    assert [float(r["train_acc"]) for r in got] == pytest.approx([0.51, 0.52, 0.53])
    for r in got:
        assert r["world_size"] == "1"
        seconds = float(r["epoch_time_sec"])
        assert seconds >= 0
        if seconds > 0:
            assert float(r["throughput_samples_per_sec"]) == pytest.approx(600 / seconds)
    info = run_json(run_dir)
    assert info["state"] == "completed"
    assert info["entry"] == "script"
    assert info["exit_code"] == 0
    assert info["epochs_completed"] == 3
    assert info["epoch_offset"] == 0
    assert info["attempts"] == 1
    assert info["job_id"] == "4242"
    assert info["backend"] == "gloo"
    assert len(info["hosts"]) == 1
    assert not (run_dir / "requeue.request").exists()
    seen = json.loads(out.read_text())
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"]["DDP_TUI_RUN_DIR"] == str(run_dir)
    assert seen["env"]["DDP_TUI_CHECKPOINT_DIR"] == str(run_dir / "checkpoints")
    assert (run_dir / "checkpoints").is_dir()
    assert seen["env"]["DDP_TUI_REQUEUE_EXIT_CODE"] == "3"
    assert seen["env"]["DDP_TUI_ATTEMPT"] == "4242"
    (rank,) = [json.loads(line) for line in (run_dir / "ranks.jsonl").read_text().splitlines()]
    assert (rank["rank"], rank["local_rank"], rank["job_id"]) == (0, 0, "4242")


def test_stdout_is_copied_byte_for_byte(tmp_path: Path) -> None:
    rng = random.Random(11)
    noise = bytes(rng.randrange(256) for _ in range(300_000))
    blob = (
        noise[:100_000]
        + b"\r\nEpoch 0 - Avg Loss: 0.5\r\xff\xfe not utf-8\n"
        + noise[100_000:]
        + b"Epoch 1 - Avg Loss: 0.25, no newline at the end"
    )
    (tmp_path / "blob").write_bytes(blob)
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--blob", str(tmp_path / "blob"), "--first", "2", "--last", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == blob


@pytest.mark.parametrize("code", [0, 1, 2, 7])
def test_exit_codes_pass_through(tmp_path: Path, code: int) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--exit", str(code))
    assert done.returncode == code
    info = run_json(run_dir)
    assert info["exit_code"] == code
    assert info["state"] == ("completed" if code == 0 else "failed")
    assert len(rows(run_dir)) == 3


def test_a_crash_fails_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--last", "1", "--crash")
    assert done.returncode == 1
    assert b"CUDA out of memory" in done.stderr  # the script's stderr, copied through
    info = run_json(run_dir)
    assert info["state"] == "failed"
    assert info["error"] == "the script exited with code 1"
    assert info["epochs_completed"] == 1


def test_death_by_signal_is_128_plus_the_signal(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--last", "1", "--kill-self")
    assert done.returncode == 128 + signal.SIGKILL
    info = run_json(run_dir)
    assert info["state"] == "failed"
    assert "SIGKILL" in info["error"]


def test_sigterm_is_forwarded_and_exit_3_requeues(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        wrapper(run_dir, FAKE, "--last", "2", "--wait-for-signal", str(ready)),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # the script has printed its epochs and blocks SIGTERM
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the script never got ready"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)  # to the wrapper only: it must pass it on
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    assert f"got {int(signal.SIGTERM)}; checkpoint saved".encode() in out
    request = json.loads((run_dir / "requeue.request").read_text())
    assert request["reason"] == "SIGTERM"
    assert request["epoch"] == 2
    info = run_json(run_dir)
    assert info["state"] == "preempted"
    assert info["stopped_at"]
    assert info["exit_code"] == 3


def test_requeued_attempt_keeps_offset_and_replaces_the_repeated_epoch(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # Attempt 1 counts from 0 (shifted to 1), finishes epochs 0 and 1, asks for a requeue.
    first = run(run_dir, FAKE, "--first", "0", "--last", "1", "--exit", "3")
    assert first.returncode == 3
    assert [r["epoch"] for r in rows(run_dir)] == ["1", "2"]
    assert (run_dir / "requeue.request").exists()
    assert run_json(run_dir)["epoch_offset"] == 1
    # Attempt 2 resumes from a checkpoint of epoch 0 (redoing 1) and prints 1..2: no epoch 0
    # is seen, so only the kept offset numbers them right.
    second = run(run_dir, FAKE, "--first", "1", "--last", "2", "--loss", "0.3")
    assert second.returncode == 0, second.stderr
    assert not (run_dir / "requeue.request").exists()  # removed when the attempt started
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2", "3"]
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.3, 0.15])
    info = run_json(run_dir)
    assert (info["attempts"], info["epoch_offset"], info["state"]) == (2, 1, "completed")
    assert info["epochs_completed"] == 3
    assert info["started_at"] <= info["attempt_started_at"]
    assert len((run_dir / "ranks.jsonl").read_text().splitlines()) == 2


def test_other_ranks_exec_the_script_with_no_parsing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    pid_file, env_file = tmp_path / "pid", tmp_path / "env.json"
    slurm = dict(SLURM_PROCID="1", SLURM_LOCALID="1", SLURM_NTASKS="2")
    proc = subprocess.Popen(
        wrapper(run_dir, FAKE, "--pid-out", str(pid_file), "--env-out", str(env_file),
                options=("--local-env-from-slurm",)),
        env=env(SLURM_NTASKS_PER_NODE="2(x1)", **slurm),
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert int(pid_file.read_text()) == proc.pid  # the same process: exec'd, no parent left
    assert b"Epoch 3 - Avg Loss" in out
    assert not (run_dir / "metrics.csv").exists()
    assert not (run_dir / "run.json").exists()
    seen = json.loads(env_file.read_text())["env"]
    assert (seen["RANK"], seen["LOCAL_RANK"], seen["WORLD_SIZE"]) == ("1", "1", "2")
    assert seen["LOCAL_WORLD_SIZE"] == "2"
    (rank,) = [json.loads(line) for line in (run_dir / "ranks.jsonl").read_text().splitlines()]
    assert (rank["rank"], rank["local_rank"]) == (1, 1)


def test_tqdm_bars_make_progress_lines(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--first", "0", "--last", "1", "--tqdm",
               options=("--metrics", "tqdm", "--samples-per-epoch", "1000"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [r["epoch"] for r in rows(run_dir)] == ["1", "2"]  # 0-based bars, shifted
    lines = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert lines[0]["epoch"] == 1 and lines[0]["step"] == 1
    last = lines[-1]
    assert (last["epoch"], last["step"], last["steps_per_epoch"]) == (2, 10, 10)
    assert last["samples_per_sec"] == pytest.approx(20.0 * 1000 / 10)
    assert last["loss"] == pytest.approx(0.5)


def test_helper_module_reports_epochs_and_steps(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    shutil.copyfile(SRC / "ddp_tui" / "scriptrun" / "report.py", code / "ddp_tui_report.py")
    run_dir = tmp_path / "run"
    done = run(run_dir, str(SCRIPTS / "helper_script.py"),
               PYTHONPATH=f"{code}{os.pathsep}{SRC}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2"]  # the helper's, not "Epoch 7"
    assert [float(r["val_acc"]) for r in got] == pytest.approx([0.8, 0.81])
    assert [r["f1"] for r in got] == ["0.5", "0.5"]
    lines = [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert lines[0] == {**lines[0], "epoch": 1, "step": 1, "steps_per_epoch": 4, "loss": 1.0}
    # A requeued attempt that reports without f1 keeps the column and the earlier values.
    again = run(run_dir, FAKE, "--first", "3", "--last", "3", options=("--metrics", "epoch-line"))
    assert again.returncode == 0, again.stderr
    got = rows(run_dir)
    assert [(r["epoch"], r["f1"]) for r in got] == [("1", "0.5"), ("2", "0.5"), ("4", "")]


def test_csv_source_with_a_column_map(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, FAKE, "--first", "0", "--last", "2", "--csv", "logs/metrics.csv",
               options=("--metrics", "csv:logs/metrics.csv",
                        "--column", "train_loss_step=train_loss"))  # fmt: skip
    assert done.returncode == 1, "logs/ does not exist yet"
    (tmp_path / "logs").mkdir()
    done = run(run_dir, FAKE, "--first", "0", "--last", "2", "--csv", "logs/metrics.csv",
               options=("--metrics", "csv:logs/metrics.csv",
                        "--column", "train_loss_step=train_loss"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2", "3"]
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.5, 1 / 3])
    assert [float(r["val_loss"]) for r in got] == pytest.approx([1.1, 0.6, 1 / 3 + 0.1])


def test_a_bad_metrics_source_is_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path / "run", FAKE, options=("--metrics", "regex:(unclosed"))
    assert done.returncode == 2
    assert b"does not compile" in done.stderr


BARS = str(SCRIPTS / "stderr_bars.py")


def progress(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "progress.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("source", ["auto", "tqdm"])
def test_tqdm_bars_on_stderr_are_parsed_and_copied_byte_for_byte(
    tmp_path: Path, source: str
) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "err"
    done = run(run_dir, BARS, "--first", "0", "--last", "2", "--noise-kb", "200",
               "--err-copy", str(copy),
               options=("--metrics", source, "--samples-per-epoch", "800"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == copy.read_bytes()  # every byte, bars and noise, unchanged
    assert done.stdout == b"".join(f"log: epoch {e} done\n".encode() for e in range(3))
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2", "3"]  # 0-based bars, shifted
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.5, 1 / 3], abs=1e-4)
    assert [float(r["train_acc"]) for r in got] == pytest.approx([0.5, 0.6, 0.7])
    last = progress(run_dir)[-1]
    assert (last["epoch"], last["step"], last["steps_per_epoch"]) == (3, 8, 8)
    assert last["samples_per_sec"] == pytest.approx(16.0 * 800 / 8)
    assert run_json(run_dir)["epochs_completed"] == 3


def test_an_epoch_on_both_streams_is_one_row(tmp_path: Path) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "err"
    done = run(run_dir, BARS, "--first", "1", "--last", "3", "--epoch-lines",
               "--err-copy", str(copy))  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2", "3"]
    # The bar (train values) and the stdout line (val values) of an epoch merge into its row,
    # whichever of the two streams is read first.
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.5, 1 / 3], abs=1e-4)
    assert [float(r["train_acc"]) for r in got] == pytest.approx([0.6, 0.7, 0.8])
    assert [float(r["val_loss"]) for r in got] == pytest.approx([0.5, 0.25, 1 / 6], abs=1e-4)
    assert [float(r["val_acc"]) for r in got] == pytest.approx([0.61, 0.62, 0.63])
    assert run_json(run_dir)["epochs_completed"] == 3


def test_a_crash_traceback_on_stderr_is_all_there(tmp_path: Path) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "err"
    done = run(run_dir, BARS, "--last", "0", "--crash", "--err-copy", str(copy))
    assert done.returncode == 1
    bars = copy.read_bytes()
    assert done.stderr.startswith(bars)
    traceback = done.stderr[len(bars) :]
    assert traceback.startswith(b"Traceback (most recent call last):\n")
    assert traceback.endswith(b"\nRuntimeError: CUDA out of memory (not really)\n")
    assert [r["epoch"] for r in rows(run_dir)] == ["1"]
    assert run_json(run_dir)["state"] == "failed"


def test_stderr_written_before_death_by_sigkill_is_not_lost(tmp_path: Path) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "err"
    done = run(run_dir, BARS, "--noise-kb", "512", "--kill-self", "--err-copy", str(copy))
    assert done.returncode == 128 + signal.SIGKILL
    assert done.stderr == copy.read_bytes()
    assert [r["epoch"] for r in rows(run_dir)] == ["1", "2"]


def test_other_sources_leave_stderr_unparsed(tmp_path: Path) -> None:
    run_dir, copy = tmp_path / "run", tmp_path / "err"
    done = run(run_dir, BARS, "--epoch-lines", "--err-copy", str(copy),
               options=("--metrics", "epoch-line"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == copy.read_bytes()
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2"]
    assert [r["val_acc"] for r in got] == ["0.6", "0.61"]
    assert [r["train_loss"] for r in got] == ["", ""]  # the bars' values were not read
    assert not (run_dir / "progress.jsonl").exists()  # the bars were not read
