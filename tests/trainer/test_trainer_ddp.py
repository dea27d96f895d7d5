"""The trainer as users run it: real torchrun, 2 gloo processes on the CPU, tiny workloads.

One uninterrupted reference run (module fixture) serves several stories; the pre-emption story
then stops a run of the same seed with SIGUSR2 mid-epoch, restarts it, and must end with the
very same weights.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.hold import Hold
from tests.trainer.helpers import (
    REPO,
    STEPS_PER_EPOCH,
    TINY,
    TINY_NOISE,
    explain,
    free_port,
    main_in_process,
    metrics_rows,
    run,
    run_json,
    torchrun_argv,
    torchrun_train,
    trainer_env,
    worker_pids,
)

pytestmark = pytest.mark.torch

COLUMNS = (
    "epoch,train_loss,train_acc,val_loss,val_acc,val_mae,val_rmse,lr,epoch_time_sec,"
    "throughput_samples_per_sec,data_load_time_sec,compute_time_sec,gpu_mem_peak_mib,"
    "gpu_util_avg,cpu_util_avg,world_size,mfu,comm_time_sec,other_time_sec,step,tokens_per_sec"
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """An uninterrupted 2-rank run of the TINY workload: (run dir, stdout)."""
    run_dir = tmp_path_factory.mktemp("reference")
    proc = torchrun_train(run_dir, *TINY)
    assert proc.returncode == 0, explain(proc)
    # gloo's teardown abort (SIGABRT) on a finished rank; the workers end by os._exit instead.
    assert "terminate called" not in proc.stderr + proc.stdout, explain(proc)
    return run_dir, proc.stdout


# ------------------------------------------------------------------ training


def test_training_lowers_the_loss_and_beats_chance(reference: tuple[Path, str]) -> None:
    run_dir, stdout = reference
    rows = metrics_rows(run_dir)
    assert [int(r["epoch"]) for r in rows] == [1, 2]
    losses = [float(r["train_loss"]) for r in rows]
    assert losses[-1] < losses[0]
    assert float(rows[-1]["val_acc"]) > 0.5  # chance is 0.1 with 10 classes
    assert float(rows[-1]["val_loss"]) < math.log(10)
    assert "epoch 2/2" in stdout


def test_metrics_csv_has_the_contract_columns_every_epoch(reference: tuple[Path, str]) -> None:
    run_dir, _ = reference
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    assert lines[0] == COLUMNS
    for row in metrics_rows(run_dir):
        assert row["world_size"] == "2"
        assert float(row["throughput_samples_per_sec"]) > 0
        assert float(row["data_load_time_sec"]) >= 0
        assert float(row["compute_time_sec"]) > 0
        assert float(row["epoch_time_sec"]) >= float(row["compute_time_sec"])
        assert 0 <= float(row["cpu_util_avg"]) <= 100
        assert float(row["lr"]) > 0
        # No GPU here: GPU columns and MFU stay empty; regression columns too.
        for empty in ("gpu_mem_peak_mib", "gpu_util_avg", "mfu", "val_mae", "val_rmse"):
            assert row[empty] == "", empty
    progress = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    assert len(progress) == 2 * STEPS_PER_EPOCH  # --progress-every 1
    assert progress[-1]["epoch"] == 2 and progress[-1]["step"] == progress[-1]["steps_per_epoch"]
    assert set(progress[0]) == {
        "time",
        "epoch",
        "step",
        "steps_per_epoch",
        "loss",
        "samples_per_sec",
    }


def test_a_finished_run_exits_0_with_every_file_complete(reference: tuple[Path, str]) -> None:
    """The workers end by os._exit: everything must have been written and closed before."""
    import torch

    run_dir, stdout = reference
    assert "identical on all ranks" in stdout
    info = run_json(run_dir)
    assert (info["state"], info["epochs_completed"]) == ("completed", 2) and info["finished_at"]
    assert [r["epoch"] for r in metrics_rows(run_dir)] == ["1", "2"]
    text = (run_dir / "progress.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 2 * STEPS_PER_EPOCH
    last = json.loads(text.splitlines()[-1])
    assert (last["epoch"], last["step"]) == (2, STEPS_PER_EPOCH)
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert (ckpt["epochs_completed"], ckpt["step"]) == (2, 0)
    leftovers = [p.name for p in run_dir.rglob("*") if ".tmp" in p.name]
    assert not leftovers and not (run_dir / "requeue.request").exists(), leftovers


def test_run_json_records_the_world(reference: tuple[Path, str]) -> None:
    run_dir, stdout = reference
    info = run_json(run_dir)
    assert info["state"] == "completed"
    assert (info["world_size"], info["backend"], info["launcher"]) == (2, "gloo", "torchrun")
    assert len(info["rank_hosts"]) == 2 and info["hosts"] == sorted(set(info["rank_hosts"]))
    assert info["devices"] == ["cpu", "cpu"]
    assert re.fullmatch(r"[\w.\-]+:\d+", info["rendezvous"])
    assert info["torch_version"] and info["epochs_completed"] == 2 and info["num_classes"] == 10
    assert info["started_at"].endswith("Z") and info["finished_at"].endswith("Z")
    # Every rank announced itself.
    for rank in (0, 1):
        assert re.search(rf"^rank {rank}/2 \S+ cpu gloo$", stdout, re.MULTILINE), stdout


def test_every_rank_leaves_a_done_heartbeat(reference: tuple[Path, str]) -> None:
    """Each rank beats from its own training loop, into its own file, last of all "done"."""
    from ddp_tui.diagnosis.stall import Heartbeat, stall_of

    run_dir, _ = reference
    beat_dir = run_dir / "heartbeats"
    assert sorted(p.name for p in beat_dir.iterdir()) == ["rank-0.json", "rank-1.json"]
    docs = [json.loads((beat_dir / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    beats = [Heartbeat.from_dict(doc) for doc in docs]
    assert all(set(doc) == {"rank", "host", "pid", "t", "epoch", "step", "phase"} for doc in docs)
    hosts = run_json(run_dir)["rank_hosts"]
    for rank, beat in enumerate(beats):
        assert beat is not None
        assert (beat.rank, beat.host, beat.phase) == (rank, hosts[rank], "done")
        assert (beat.epoch, beat.step) == (2, STEPS_PER_EPOCH)
    assert beats[0] and beats[1] and beats[0].pid != beats[1].pid
    # Finished ranks are quiet, never silent: an hour later nobody is named.
    later = max(b.t for b in beats if b) + 3600
    stall = stall_of(
        now=later, activity=[], after_sec=600, heartbeats=[b for b in beats if b], world_size=2
    )
    assert stall is not None and stall.silent_ranks == ()


def test_both_ranks_end_with_identical_weights(reference: tuple[Path, str]) -> None:
    import torch

    from ddp_tui.trainer.models import build_model
    from ddp_tui.trainer.run_info import state_dict_sha256

    run_dir, _ = reference
    hashes = run_json(run_dir)["weights_sha256"]
    assert len(hashes) == 2 and hashes[0] == hashes[1]
    # ...and the hash is that of the saved weights, not of something else.
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    model = build_model("simple_cnn", (1, 12, 12), 10)
    model.load_state_dict(state["model"])
    assert state_dict_sha256(model) == hashes[0]


def test_global_validation_equals_a_single_process_evaluation(reference: tuple[Path, str]) -> None:
    """101 validation samples on 2 ranks: a padded sampler would count one twice."""
    import torch
    import torch.nn.functional as F

    from ddp_tui.trainer.data import SYNTHETIC_NORMALIZATION, SyntheticClassification
    from ddp_tui.trainer.device_input import normalize
    from ddp_tui.trainer.models import build_model

    run_dir, _ = reference
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    model = build_model("simple_cnn", (1, 12, 12), 10)
    model.load_state_dict(state["model"])
    model.eval()
    val = SyntheticClassification(101, (1, 12, 12), 10, seed=7, split=1, noise=TINY_NOISE)
    x = normalize(torch.stack([val[i][0] for i in range(len(val))]), SYNTHETIC_NORMALIZATION)
    y = torch.tensor([val[i][1] for i in range(len(val))])
    with torch.no_grad():
        out = model(x)
    loss = F.cross_entropy(out, y).item()
    acc = (out.argmax(dim=1) == y).double().mean().item()
    last = metrics_rows(run_dir)[-1]
    assert float(last["val_loss"]) == pytest.approx(loss, rel=1e-5)
    assert float(last["val_acc"]) == pytest.approx(acc, abs=1e-9)


# ------------------------------------------------------------------ pre-emption and resume


def _wait_until_parked(hold: Hold, proc: subprocess.Popen[str]) -> None:
    """Both ranks wait at the hold; the deadline only bounds a hang."""
    deadline = time.monotonic() + 180
    while not (hold.waiting(0) and hold.waiting(1)):
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "the ranks never reached the hold"
        time.sleep(0.02)


def test_sigusr2_mid_epoch_then_restart_resumes_to_identical_weights(
    tmp_path: Path, reference: tuple[Path, str], hold: Hold
) -> None:
    import torch

    ref_dir, _ = reference
    run_dir = tmp_path / "run"
    # The same model, parked by a forward hook at epoch 2's first step until released: the
    # signal arrives mid-epoch by construction, however fast the machine trains.
    held = [hold.model("simple_cnn") if a == "simple_cnn" else a for a in TINY]
    argv = torchrun_argv("ddp_tui.trainer", ["--run-dir", str(run_dir), *held])
    env = trainer_env(**hold.process_env(run_dir, epochs=1))
    env["PYTHONPATH"] = f"{hold.directory}{os.pathsep}{env['PYTHONPATH']}"
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        _wait_until_parked(hold, proc)
        pids = worker_pids(proc.pid)
        assert sorted(pids) == [0, 1], pids
        # Only rank 1 hears the signal: rank 0 must learn of it and stop at the same step.
        os.kill(pids[1], signal.SIGUSR2)
        hold.release()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out  # torchrun reports the workers' exit 3 as a failure
    assert re.search(r"exitcode\s*:\s*3", out), out
    request = json.loads((run_dir / "requeue.request").read_text())
    assert request["reason"] == "SIGUSR2"
    assert run_json(run_dir)["state"] == "preempted"
    ckpt = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    steps = STEPS_PER_EPOCH
    assert ckpt["epochs_completed"] == 1 and 0 < ckpt["step"] < steps, "not stopped mid-epoch"
    assert [r["epoch"] for r in metrics_rows(run_dir)] == ["1"]

    # The restart runs the same (now unheld) model: a checkpoint names its model.
    again = run(
        torchrun_argv("ddp_tui.trainer", ["--run-dir", str(run_dir), *held]),
        PYTHONPATH=env["PYTHONPATH"],
    )
    assert again.returncode == 0, explain(again)
    assert f"step {ckpt['step']}/{steps} of epoch 2" in again.stdout
    assert not (run_dir / "requeue.request").exists()
    info = run_json(run_dir)
    assert (info["state"], info["attempts"], info["epochs_completed"]) == ("completed", 2, 2)

    rows, ref_rows = metrics_rows(run_dir), metrics_rows(ref_dir)
    assert [r["epoch"] for r in rows] == ["1", "2"]
    for row, ref in zip(rows, ref_rows, strict=True):
        for col in ("train_loss", "train_acc", "val_loss", "val_acc", "lr"):
            assert float(row[col]) == pytest.approx(float(ref[col]), rel=1e-9), col

    final = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)["model"]
    ref_final = torch.load(ref_dir / "checkpoints" / "latest.pt", weights_only=True)["model"]
    assert final.keys() == ref_final.keys()
    for name in final:
        assert torch.equal(final[name], ref_final[name]), name
    assert info["weights_sha256"] == run_json(ref_dir)["weights_sha256"]


# ------------------------------------------------------------------ preflight


def test_preflight_passes_on_two_ranks_with_bandwidth_rows(tmp_path: Path) -> None:
    proc = run(
        torchrun_argv(
            "ddp_tui.trainer.preflight",
            ["--run-dir", str(tmp_path), "--max-bytes", "65536", "--timeout-sec", "30"],
        )
    )
    assert proc.returncode == 0, explain(proc)
    report = json.loads((tmp_path / "preflight.json").read_text())
    assert report["ok"] is True and report["error"] is None
    assert (report["world_size"], report["backend"]) == (2, "gloo")
    assert all(report["checks"][c]["ok"] for c in ("all_reduce", "broadcast", "barrier"))
    rows = report["bandwidth"]
    assert [r["bytes"] for r in rows] == [1024 * 2**k for k in range(7)]
    for r in rows:
        assert r["time_us"] > 0 and r["algbw_gbps"] > 0
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (2 - 1) / 2)
    assert "busbw GB/s" in proc.stdout


def test_preflight_of_one_process_runs_its_collectives_over_a_one_rank_group(
    tmp_path: Path,
) -> None:
    """World size 1 still forms a group: it shows the backend starts (NCCL on a GPU), and the
    table is honest that a one-rank all-reduce moves no data."""
    proc = run(
        torchrun_argv(
            "ddp_tui.trainer.preflight",
            ["--run-dir", str(tmp_path), "--max-bytes", "8192", "--timeout-sec", "30"],
            nproc=1,
        )
    )
    assert proc.returncode == 0, explain(proc)
    report = json.loads((tmp_path / "preflight.json").read_text())
    assert report["ok"] is True and report["world_size"] == 1 and report["backend"] == "gloo"
    assert all(report["checks"][c]["ok"] for c in ("all_reduce", "broadcast", "barrier"))
    assert [r["bytes"] for r in report["bandwidth"]] == [1024, 2048, 4096, 8192]
    assert all(r["busbw_gbps"] == 0 and r["time_us"] > 0 for r in report["bandwidth"])
    assert "moves no data" in report["note"]


def test_batches_made_on_the_device_train_exactly_as_the_loader(
    reference: tuple[Path, str], tmp_path: Path
) -> None:
    """--data-on-device changes where batches are made, not what is learnt: the same losses
    and the same final weights as the reference run through the DataLoader."""
    proc = torchrun_train(tmp_path, *TINY, "--data-on-device")
    assert proc.returncode == 0, explain(proc)
    run_dir, _ = reference
    losses = [r["train_loss"] for r in metrics_rows(tmp_path)]
    assert losses == [r["train_loss"] for r in metrics_rows(run_dir)]
    assert run_json(tmp_path)["weights_sha256"] == run_json(run_dir)["weights_sha256"]
    assert "batches made on the device" in run_json(tmp_path)["data"]


def test_preflight_names_the_rank_and_host_that_does_not_answer(tmp_path: Path) -> None:
    """Rank 1 joins the world, then stalls (DDP_TUI_FAKE_STALL_RANK: a hang cannot be produced
    on cue, so this one is faked and named so)."""
    proc = run(
        torchrun_argv(
            "ddp_tui.trainer.preflight", ["--run-dir", str(tmp_path), "--timeout-sec", "3"]
        ),
        DDP_TUI_FAKE_STALL_RANK="1",
    )
    assert proc.returncode != 0, explain(proc)
    report = json.loads((tmp_path / "preflight.json").read_text())
    host = socket.gethostname()
    assert report["ok"] is False and report["failed_ranks"] == [1]
    assert report["failed_hosts"] == [host]
    assert f"rank 1 ({host}) did not answer within 3s" in report["error"]


def test_a_rendezvous_that_fails_names_address_port_and_causes(tmp_path: Path) -> None:
    """Rank 0 of 2 alone: its partner never starts."""
    port = free_port()
    proc = run(
        [
            sys.executable,
            "-m",
            "ddp_tui.trainer.preflight",
            "--run-dir",
            str(tmp_path),
            "--timeout-sec",
            "2",
        ],
        RANK="0",
        WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    assert proc.returncode == 1, explain(proc)
    assert f"127.0.0.1:{port}" in proc.stderr
    assert "Likely causes" in proc.stderr and "never started" in proc.stderr
    report = json.loads((tmp_path / "preflight.json").read_text())
    assert report["ok"] is False and f"127.0.0.1:{port}" in report["error"]
    assert "Traceback" not in proc.stderr


def test_srun_style_launch_forms_the_world_from_slurm_variables(tmp_path: Path) -> None:
    """Two processes started as srun would (SLURM_PROCID etc.), no torchrun, no MASTER_*."""
    port = free_port(20000, 30000)
    job_id = str(port - 20000 + 10000 * 42)
    common = {
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NODELIST": "127.0.0.[1]",
        "SLURM_STEP_TASKS_PER_NODE": "2",
    }
    argv = [sys.executable, "-m", "ddp_tui.trainer", "--run-dir", str(tmp_path), *TINY]
    argv += ["--epochs", "1", "--max-steps-per-epoch", "5"]
    procs = [
        subprocess.Popen(
            argv,
            env=trainer_env(SLURM_PROCID=str(r), SLURM_LOCALID=str(r), **common),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    info = run_json(tmp_path)
    assert (info["launcher"], info["world_size"], info["job_id"]) == ("srun", 2, job_id)
    assert info["rendezvous"] == f"127.0.0.1:{port}"
    assert "rank 1/2" in outs[1]


# ------------------------------------------------------------------ other data


def test_tabular_regression_reports_mae_and_rmse(tmp_path: Path) -> None:
    import random

    rng = random.Random(3)
    lines = ["station,hour,flow,temp,speed"]
    speeds = []
    for i in range(400):
        hour, flow, temp = rng.randrange(24), rng.uniform(0, 100), rng.uniform(-5, 30)
        speed = 80 - 0.5 * flow + 5 * math.sin(hour / 24 * 2 * math.pi) + rng.gauss(0, 1)
        speeds.append(speed)
        lines.append(f"S{i % 7},{hour},{flow:.3f},{temp:.2f},{speed:.3f}")
    data = tmp_path / "traffic.csv"
    data.write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / "run"
    proc = torchrun_train(
        run_dir,
        "--dataset", "tabular", "--data-root", str(data), "--target", "speed",
        "--model", "mlp", "--epochs", "4", "--batch-size", "16", "--optimizer", "adamw",
        "--lr", "0.003", "--workers", "0", "--seed", "1",
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    assert "non-numeric columns left out: station" in proc.stdout
    rows = metrics_rows(run_dir)
    assert len(rows) == 4
    for row in rows:
        assert row["train_acc"] == "" and row["val_acc"] == ""
        assert float(row["val_rmse"]) >= float(row["val_mae"]) > 0
    mean = sum(speeds) / len(speeds)
    std = math.sqrt(sum((s - mean) ** 2 for s in speeds) / len(speeds))
    # Predicting the mean would give an MAE of about 0.8 std; the model must do much better.
    assert float(rows[-1]["val_mae"]) < 0.4 * std
    assert float(rows[-1]["val_mae"]) < float(rows[0]["val_mae"])
    assert run_json(run_dir)["task"] == "regression"


def _tiny_imagenet(
    root: Path, classes: int = 3, per_class: int = 12, val_per_class: int = 3
) -> int:
    """A TinyImageNet-shaped tree: train/<wnid>/images/*.JPEG, val/images + val_annotations.txt."""
    from PIL import Image

    colours = [(220, 30, 30), (30, 200, 40), (40, 40, 220), (200, 200, 30)]
    wnids = [f"n0{i}000000" for i in range(classes)]
    (root / "wnids.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
    rng = __import__("random").Random(0)

    def picture(c: int) -> Image.Image:
        base = colours[c]
        img = Image.new("RGB", (16, 16), base)
        for _ in range(20):  # a little noise
            img.putpixel((rng.randrange(16), rng.randrange(16)), (rng.randrange(256),) * 3)
        return img

    for c, wnid in enumerate(wnids):
        folder = root / "train" / wnid / "images"
        folder.mkdir(parents=True)
        for i in range(per_class):
            picture(c).save(folder / f"{wnid}_{i}.JPEG", format="JPEG")
    (root / "val" / "images").mkdir(parents=True)
    annotations = []
    n = 0
    for c, wnid in enumerate(wnids):
        for _ in range(val_per_class):
            name = f"val_{n}.JPEG"
            picture(c).save(root / "val" / "images" / name, format="JPEG")
            annotations.append(f"{name}\t{wnid}\t0\t0\t15\t15")
            n += 1
    (root / "val" / "val_annotations.txt").write_text("\n".join(annotations) + "\n")
    return n


def test_tinyimagenet_layout_loads_and_trains(tmp_path: Path) -> None:
    root = tmp_path / "tiny-imagenet-200"
    n_val = _tiny_imagenet(root)
    run_dir = tmp_path / "run"
    proc = torchrun_train(
        run_dir,
        "--dataset", "imagefolder", "--data-root", str(root), "--image-size", "16",
        "--model", "simple_cnn", "--epochs", "2", "--batch-size", "4", "--workers", "0",
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    info = run_json(run_dir)
    assert (info["num_classes"], info["train_samples"], info["val_samples"]) == (3, 36, n_val)
    assert "tinyimagenet" in info["data"]
    rows = metrics_rows(run_dir)
    assert len(rows) == 2 and all(r["val_acc"] != "" for r in rows)


# ------------------------------------------------------------------ bad arguments


def test_bad_arguments_exit_2_naming_the_argument_without_a_traceback(tmp_path: Path) -> None:
    cases = [
        (["--batch-size", "0"], "--batch-size"),
        (["--dataset", "cifar10", "--data-root", str(tmp_path / "empty")], "--data-root"),
    ]
    for extra, argument in cases:
        proc = run([sys.executable, "-m", "ddp_tui.trainer", "--run-dir", str(tmp_path), *extra])
        assert proc.returncode == 2, explain(proc)
        assert f"argument {argument}:" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    # The missing dataset message says where it looked and how to fetch it.
    assert "cifar-10-batches-py" in proc.stderr and "--download" in proc.stderr


def test_an_unknown_model_exits_2_and_suggests_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main_in_process(["--run-dir", str(tmp_path), "--model", "resnet5"])
    assert code == 2
    err = capsys.readouterr().err
    assert "argument --model: unknown model 'resnet5'" in err and "resnet50" in err
