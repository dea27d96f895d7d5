"""Fast trainer unit tests that need no torch: node lists, launcher detection, arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.trainer.args import TrainConfig, parse_args, validate
from ddp_tui.trainer.errors import UsageError
from ddp_tui.trainer.launch_env import detect, slurm_master_port
from ddp_tui.trainer.nodelist import expand_nodelist, first_host
from ddp_tui.trainer.preflight import bus_bandwidth, failed_ranks, message_sizes

# ------------------------------------------------------------------ Slurm node lists


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("a,b , c", ["a", "b", "c"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[01-03,07],n[1-2]", ["gpu01", "gpu02", "gpu03", "gpu07", "n1", "n2"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[008-010]", ["n008", "n009", "n010"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("login,gpu[1,3]x", ["login", "gpu1x", "gpu3x"]),
        ("host-[5]", ["host-5"]),
    ],
)
def test_nodelist_expands_like_scontrol_show_hostnames(text: str, hosts: list[str]) -> None:
    assert expand_nodelist(text) == hosts


def test_first_host_is_the_rendezvous_host() -> None:
    assert first_host("gpu[07-09],a100-[1-2]") == "gpu07"


@pytest.mark.parametrize("bad", ["gpu[01-03", "gpu01]", "gpu[3-1]", "gpu[a-b]", "n[[1]]", "n[1,]"])
def test_malformed_nodelists_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_nodelist(bad)


# ------------------------------------------------------------------ launcher detection


def test_torchrun_environment_wins_over_slurm() -> None:
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "abc",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_ID": "77",
    }
    e = detect(env)
    assert (e.launcher, e.rank, e.local_rank, e.world_size, e.local_world_size) == (
        "torchrun", 3, 1, 4, 2,
    )  # fmt: skip
    assert e.rendezvous == "n1:29400"
    assert e.job_id == "77"
    assert e.distributed


def test_srun_per_gpu_takes_ranks_host_and_port_from_slurm() -> None:
    env = {
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "8",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
        "SLURM_JOB_NODELIST": "gpu[03-04]",
        "SLURM_JOB_ID": "123456",
    }
    e = detect(env)
    assert (e.launcher, e.rank, e.local_rank, e.world_size, e.local_world_size) == (
        "srun", 5, 1, 8, 4,
    )  # fmt: skip
    assert e.master_addr == "gpu03"
    assert e.master_port == 20000 + 123456 % 10000 == 23456


def test_srun_respects_explicit_master_addr_and_port() -> None:
    env = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "1",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_JOB_ID": "9",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "31000",
    }
    assert detect(env).rendezvous == "10.0.0.5:31000"


def test_batch_script_without_srun_runs_single_and_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "4",
        "SLURM_JOB_ID": "5",
        "SLURM_JOB_NODELIST": "n1",
    }
    e = detect(env)
    assert (e.launcher, e.world_size, e.distributed) == ("single", 1, False)
    assert "not started by srun" in capsys.readouterr().err


def test_plain_process_is_single() -> None:
    e = detect({})
    assert (e.launcher, e.rank, e.world_size) == ("single", 0, 1)
    assert slurm_master_port(None) == 29500


def test_inconsistent_rank_is_an_error() -> None:
    with pytest.raises(ValueError, match="outside the world"):
        detect({"RANK": "2", "WORLD_SIZE": "2"})


# ------------------------------------------------------------------ arguments


def _usage(argv: list[str]) -> UsageError:
    with pytest.raises(UsageError) as info:
        parse_args(["--run-dir", "/tmp/x", *argv])
    return info.value


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["--batch-size", "0"], "--batch-size"),
        (["--epochs", "0"], "--epochs"),
        (["--lr", "0"], "--lr"),
        (["--grad-accum", "0"], "--grad-accum"),
        (["--workers", "-1"], "--workers"),
        (["--dataset", "imagenet21k"], "--dataset"),
        (["--dataset", "mnist"], "--data-root"),
        (["--dataset", "tabular", "--data-root", "/tmp"], "--target"),
        (["--dataset", "imagefolder", "--data-root", "/nonexistent/x"], "--data-root"),
        (["--model", "pkg.mod:"], "--model"),
        (["--model", "res net"], "--model"),
        (["--timeout-sec", "0"], "--timeout-sec"),
        (["--num-classes", "1"], "--num-classes"),
        (["--dataset", "tabular", "--data-root", "/tmp", "--data-on-device"], "--data-on-device"),
        (["--prefetch", "0"], "--prefetch"),
        (["--synthetic-noise", "-1"], "--synthetic-noise"),
        (["--synthetic-noise", "inf"], "--synthetic-noise"),
        (["--decode", "gpu"], "--decode"),  # the synthetic task has no files to decode
        (["--hflip"], "--hflip"),
    ],
)
def test_bad_arguments_name_the_argument(argv: list[str], argument: str) -> None:
    err = _usage(argv)
    assert err.argument == argument
    assert str(err).startswith(f"argument {argument}:")


def test_argparse_errors_exit_2_naming_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--run-dir", "/tmp/x", "--synthetic-shape", "1,x"])
    assert info.value.code == 2
    assert "--synthetic-shape" in capsys.readouterr().err


def test_defaults_follow_the_contract() -> None:
    cfg = parse_args(["--run-dir", "/tmp/r"])
    assert cfg == TrainConfig(run_dir=Path("/tmp/r"))
    assert (cfg.model, cfg.dataset, cfg.synthetic_shape) == ("simple_cnn", "synthetic", (1, 28, 28))
    assert cfg.base_lr() == 0.05
    assert parse_args(["--run-dir", "r", "--optimizer", "adamw"]).base_lr() == 1e-3
    assert cfg.as_dict()["run_dir"] == "/tmp/r"
    validate(cfg)


def test_contract_flags_all_parse() -> None:
    argv = (
        "--run-dir r --model resnet18 --dataset cifar10 --data-root /d --download --target y "
        "--num-classes 10 --synthetic-samples 5 --synthetic-val-samples 0 --synthetic-shape 3,8,8 "
        "--epochs 2 --batch-size 4 --lr 0.1 --lr-scaling linear --base-batch-size 128 "
        "--optimizer adamw --momentum 0.8 --weight-decay 0.01 --schedule step --warmup-epochs 1 "
        "--step-size 2 --gamma 0.5 --precision bf16 --no-channels-last --compile --grad-accum 2 "
        "--workers 3 --seed 4 --backend gloo --timeout-sec 30 --ckpt-every-steps 10 "
        "--progress-every 5 --max-steps-per-epoch 7 --prefetch 2 --synthetic-noise 3 "
        "--decode cpu"
    )
    cfg = parse_args(argv.split())
    assert cfg.channels_last is False and cfg.compile and cfg.download
    assert (cfg.schedule, cfg.precision, cfg.grad_accum, cfg.max_steps_per_epoch) == (
        "step", "bf16", 2, 7,
    )  # fmt: skip


# ------------------------------------------------------------------ preflight arithmetic


def test_preflight_sizes_and_bus_bandwidth() -> None:
    assert message_sizes(1024, 16384) == [1024, 2048, 4096, 8192, 16384]
    assert message_sizes(1024, 3000) == [1024, 2048, 3000]
    assert message_sizes(1024, 256 * 2**20)[-1] == 256 * 2**20
    assert bus_bandwidth(10.0, 2) == 10.0
    assert bus_bandwidth(10.0, 8) == pytest.approx(17.5)


def test_preflight_reads_the_ranks_a_monitored_barrier_blames() -> None:
    text = "[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 5000 ms"
    assert failed_ranks(text) == [1, 3]
    assert failed_ranks("[Rank 0]: Rank 2 failed to pass monitoredBarrier in 10 ms") == [2]
    assert failed_ranks("something else") == []
