"""The representative specs behind the golden job scripts (shared by the unit and Slurm tests)."""

from __future__ import annotations

from pathlib import Path

from ddp_tui.spec import ExperimentSpec

GOLDEN_DIR = Path(__file__).resolve().parent
RUN_ROOT = "/home/user/ddp-tui-runs"

#: golden name -> spec; the script lands in ``<name>.sbatch`` (training) next to this file.
GOLDEN_SPECS: dict[str, ExperimentSpec] = {
    "1node_1gpu": ExperimentSpec(
        name="mnist-1gpu",
        model="simple_cnn",
        dataset="mnist",
        data_root="~/data",
        download=True,
        partition="gpu",
        time_limit="30",
        epochs=5,
        batch_per_gpu=128,
        lr=0.05,
        env_setup=("module load pytorch/2.3",),
    ),
    "1node_8gpu": ExperimentSpec(
        name="cifar10-r50-8gpu",
        model="resnet50",
        dataset="cifar10",
        data_root="/scratch/datasets/cifar10",
        num_classes=10,
        gpus_per_node=8,
        partition="gpu",
        account="proj123",
        qos="normal",
        time_limit="04:00:00",
        cpus_per_task=64,
        mem="256G",
        epochs=90,
        batch_per_gpu=256,
        lr=0.1,
        lr_scaling="linear",
        base_batch=256,
        optimizer="sgd",
        schedule="cosine",
        warmup_epochs=5,
        precision="bf16",
        workers=6,
        seed=42,
        env_setup=(
            'source "$HOME/miniconda3/etc/profile.d/conda.sh"',
            "conda activate torch",
        ),
    ),
    "4node_8gpu_nccl": ExperimentSpec(
        name="imagenet-r50-32gpu",
        model="resnet50",
        dataset="imagefolder",
        data_root="/datasets/imagenet",
        num_classes=1000,
        nodes=4,
        gpus_per_node=8,
        backend="nccl",
        partition="gpu",
        account="proj123",
        time_limit="1-00:00:00",
        constraint="a100&ib",
        cpus_per_task=64,
        mem="0",
        epochs=90,
        batch_per_gpu=128,
        lr=0.1,
        lr_scaling="linear",
        base_batch=256,
        warmup_epochs=5,
        precision="bf16",
        workers=8,
        signal_lead_sec=300,
        env_setup=("module load cuda/12.4 nccl/2.21", "source ~/venvs/torch/bin/activate"),
        python="~/venvs/torch/bin/python",
        extra_sbatch=("--exclusive", "--mail-type=END,FAIL"),
        extra_trainer_args=("--ckpt-every-steps", "500", "--channels-last"),
        nccl_env=(
            ("NCCL_SOCKET_IFNAME", "ib0"),
            ("NCCL_IB_HCA", "mlx5_0,mlx5_1"),
            ("NCCL_DEBUG", "WARN"),
        ),
    ),
    "2node_gloo_cpu": ExperimentSpec(
        name="mlp-gloo-2node",
        model="mlp",
        dataset="synthetic",
        synthetic_samples=4096,
        synthetic_val_samples=1024,
        synthetic_shape="1,28,28",
        nodes=2,
        gpus_per_node=4,
        backend="gloo",
        device="cpu",
        partition="cpu",
        time_limit="00:20:00",
        cpus_per_task=8,
        mem="8G",
        epochs=3,
        batch_per_gpu=32,
        requeue=False,
        extra_trainer_args=("--timeout-sec", "120"),
        nccl_env=(("GLOO_SOCKET_IFNAME", "eth0"),),
    ),
    "srun_per_gpu": ExperimentSpec(
        name="r18-srun",
        model="resnet18",
        dataset="synthetic",
        nodes=2,
        gpus_per_node=4,
        backend="nccl",
        launcher="srun",
        partition="gpu",
        time_limit="02:00:00",
        cpus_per_task=8,
        mem="64G",
        epochs=10,
        precision="fp16",
        nccl_env=(("NCCL_SOCKET_IFNAME", "^docker,lo"),),
    ),
    # A user's own script, snapshotted, on 2 nodes: the wrapper starts it on every rank.
    "script_2node": ExperimentSpec(
        name="my-train",
        entry="script",
        script="/home/user/proj/scripts/train.py",
        script_args="--epochs 3 --lr 0.1 --out 'runs/a b' --tag=$HOME",
        project_dir="/home/user/proj",
        metrics="regex:Epoch (?P<epoch>\\d+) loss=(?P<train_loss>\\S+)",
        metrics_columns=(("loss", "train_loss"),),
        samples_per_epoch=50000,
        nodes=2,
        gpus_per_node=4,
        partition="gpu",
        time_limit="02:00:00",
        epochs=3,
        env_setup=("module load pytorch/2.3",),
    ),
}

#: golden name -> spec for ``<name>.preflight.sbatch``.
GOLDEN_PREFLIGHT: dict[str, ExperimentSpec] = {
    "4node_8gpu_nccl": GOLDEN_SPECS["4node_8gpu_nccl"],
    "2node_gloo_cpu": GOLDEN_SPECS["2node_gloo_cpu"],
}


def run_dir_for(name: str) -> str:
    return f"{RUN_ROOT}/20250101-120000-{name}-0a1b"
