"""The trainer's parts in one process: metrics file, samplers, schedules, data readers."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pytest

from tests.trainer.helpers import main_in_process

pytestmark = pytest.mark.torch


def test_metrics_csv_restart_keeps_only_checkpointed_epochs(tmp_path: Path) -> None:
    from ddp_tui.trainer.metrics import COLUMNS, MetricsCsv

    m = MetricsCsv(tmp_path / "metrics.csv")
    m.prepare(0)
    for epoch in (1, 2, 3):
        m.append({"epoch": epoch, "train_loss": 1.0 / epoch, "world_size": 2})
    # The checkpoint covers 2 epochs: epoch 3's row came from an attempt that was cut short.
    m.prepare(2)
    m.append({"epoch": 3, "train_loss": 0.25, "world_size": 2})
    with m.path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert rows[2]["train_loss"] == "0.25" and rows[0]["val_mae"] == ""
    assert m.path.read_text().splitlines()[0] == ",".join(COLUMNS)
    m.prepare(0)  # a fresh start in an old directory
    assert m.path.read_text().splitlines() == [",".join(COLUMNS)]


def test_validation_shards_cover_every_sample_exactly_once() -> None:
    from ddp_tui.trainer.sampling import ShardSampler

    for world in (1, 2, 3, 8):
        seen = [i for r in range(world) for i in ShardSampler(101, r, world)]
        assert sorted(seen) == list(range(101))
        assert sum(len(ShardSampler(101, r, world)) for r in range(world)) == 101


def test_resumed_sampler_continues_the_same_order() -> None:
    from ddp_tui.trainer.sampling import ResumableDistributedSampler

    data = list(range(50))
    full = ResumableDistributedSampler(data, num_replicas=2, rank=1, seed=3)
    full.set_epoch(4)
    order = list(full)
    resumed = ResumableDistributedSampler(data, num_replicas=2, rank=1, seed=3)
    resumed.set_epoch(4)
    resumed.skip = 10
    assert list(resumed) == order[10:] and len(resumed) == len(order) - 10
    full.set_epoch(5)
    assert list(full) != order  # set_epoch reshuffles


def test_schedules_warm_up_then_decay() -> None:
    from ddp_tui.trainer.args import TrainConfig
    from ddp_tui.trainer.optim import lr_factor, scaled_lr

    cfg = TrainConfig(run_dir=Path("r"), epochs=10, schedule="cosine", warmup_epochs=1)
    f = lr_factor(cfg, steps_per_epoch=10)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(99) < 0.01
    assert f(55) == pytest.approx(0.5, abs=0.02)
    step = lr_factor(TrainConfig(run_dir=Path("r"), schedule="step", step_size=2, gamma=0.5), 10)
    assert [step(s) for s in (0, 19, 20, 40)] == [1.0, 1.0, 0.5, 0.25]
    assert lr_factor(TrainConfig(run_dir=Path("r"), schedule="none"), 10)(77) == 1.0
    linear = TrainConfig(run_dir=Path("r"), lr=0.1, lr_scaling="linear", batch_size=64)
    assert scaled_lr(linear, world_size=8) == pytest.approx(0.1 * 64 * 8 / 256)


def test_checkpoints_are_replaced_atomically(tmp_path: Path) -> None:
    import torch

    from ddp_tui.trainer.checkpoint import checkpoint_path, load, save_atomic

    path = checkpoint_path(tmp_path)
    save_atomic({"version": 1, "x": torch.arange(3)}, path)
    save_atomic({"version": 1, "x": torch.arange(4)}, path)
    assert [p.name for p in path.parent.iterdir()] == ["latest.pt"]  # no temporary left
    state = load(path)
    assert state is not None and torch.equal(state["x"], torch.arange(4))
    assert load(tmp_path / "nothing.pt") is None


def test_flops_are_counted_for_known_models() -> None:
    from ddp_tui.trainer.models import build_model, training_flops_per_sample

    flops = training_flops_per_sample(build_model("mlp", (1, 8, 8), 10), (1, 8, 8))
    # Forward 2 FLOPs per multiply-add; backward twice that, except that the first layer
    # needs no gradient for its input.
    first, rest = 64 * 256, 256 * 128 + 128 * 10
    assert flops == 6 * (first + rest) - 2 * first


def _npy(flat: list[float], shape: tuple[int, ...], fortran: bool = False) -> bytes:
    """A version-1 ``.npy`` of float64 values, written by hand (``flat`` in storage order)."""
    import struct

    header = f"{{'descr': '<f8', 'fortran_order': {fortran}, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    body = struct.pack(f"<{len(flat)}d", *flat)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + body


def test_npz_columns_are_read_without_numpy(tmp_path: Path) -> None:
    from ddp_tui.trainer.tabular import load_tabular, read_npz

    path = tmp_path / "train.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("speed.npy", _npy([1.0, 2.0, 3.0, 4.0, 5.0], (5,)))
        # X = [[1, 10], [2, 20], ...] in Fortran (column-major) order.
        z.writestr("X.npy", _npy([1, 2, 3, 4, 5, 10, 20, 30, 40, 50], (5, 2), fortran=True))
    table = read_npz(path)
    assert set(table.columns) == {"speed", "X[0]", "X[1]"}
    assert table.columns["X[1]"].tolist() == [10.0, 20.0, 30.0, 40.0, 50.0]
    data = load_tabular(path, "speed", seed=0)
    assert len(data.train) == 4 and len(data.val) == 1
    assert data.features == ["X[0]", "X[1]"]
    # Targets are standardised with the training split's statistics.
    assert data.train.y.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert data.train.y.std(unbiased=False).item() == pytest.approx(1.0, rel=1e-5)
    back = [v * data.target_std + data.target_mean for v in (*data.train.y, *data.val.y)]
    assert sorted(round(float(v), 4) for v in back) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_tabular_directory_split_and_bad_target(tmp_path: Path) -> None:
    from ddp_tui.trainer.errors import UsageError
    from ddp_tui.trainer.tabular import load_tabular

    (tmp_path / "train.csv").write_text("id,a,b,y\nx1,1,2,3\nx2,2,,5\nx3,3,4,7\n")
    (tmp_path / "val.csv").write_text("id,a,b,y\nv1,4,5,9\n")
    data = load_tabular(tmp_path, "y", seed=0)
    assert (len(data.train), len(data.val), data.features, data.dropped) == (
        3,
        1,
        ["a", "b"],
        ["id"],
    )
    assert not data.train.x.isnan().any()  # the empty cell took the training mean
    with pytest.raises(UsageError) as info:
        load_tabular(tmp_path, "id", seed=0)
    assert info.value.argument == "--target" and "non-numeric" in info.value.message


def test_imagefolder_with_class_folders_in_train_and_val(tmp_path: Path) -> None:
    from PIL import Image

    from ddp_tui.trainer.images import image_folder

    for split, n in (("train", 4), ("val", 2)):
        for c, colour in (("cat", (200, 0, 0)), ("dog", (0, 0, 200))):
            if split == "val" and c == "cat":
                continue  # val/ lacks a class: labels must still follow train/'s numbering
            d = tmp_path / split / c
            d.mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (10, 10), colour).save(d / f"{i}.png")
    data = image_folder(tmp_path, image_size=8, seed=0)
    assert data.classes == ["cat", "dog"] and data.layout == "train/val folders"
    assert data.val is not None
    x, y = data.val[0]
    assert tuple(x.shape) == (3, 8, 8) and y == 1


USER_CODE = """
import torch
from torch.utils.data import TensorDataset


def make_model(num_classes, input_shape):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(input_shape[0], num_classes))


def make_data(data_root, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(96, 4, generator=g)
    y = (x[:, 0] > 0).long()
    return TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:]), 2
"""


def test_users_own_model_and_dataset_train_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_experiment.py").write_text(USER_CODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    argv = [
        "--run-dir", str(tmp_path / "run"), "--model", "my_experiment:make_model",
        "--dataset", "my_experiment:make_data", "--epochs", "3", "--batch-size", "16",
        "--lr", "0.5", "--workers", "0",
    ]  # fmt: skip
    code = main_in_process(argv)
    assert code == 0, capsys.readouterr()
    with (tmp_path / "run" / "metrics.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert float(rows[-1]["val_acc"]) > 0.8  # the label is the sign of the first feature
    assert "rank 0/1" in capsys.readouterr().out


@pytest.mark.parametrize(("rank", "skip"), [(0, 0), (1, 0), (1, 5)])
def test_batches_made_on_the_device_are_the_loaders_batches(rank: int, skip: int) -> None:
    """--data-on-device gathers by index what the DataLoader assembles sample by sample: the
    same tensors in the same order, for each rank's shard and from part-way through an epoch."""
    import torch
    from torch.utils.data import DataLoader

    from ddp_tui.trainer.data import DeviceBatches, SyntheticClassification
    from ddp_tui.trainer.sampling import ResumableDistributedSampler

    data = SyntheticClassification(37, (3, 8, 8), 5, seed=3, split=0)
    sampler = ResumableDistributedSampler(data, num_replicas=2, rank=rank, seed=3)
    sampler.set_epoch(2)
    sampler.skip = skip
    made = list(DeviceBatches(data, sampler, 4, torch.device("cpu")))
    loaded = list(DataLoader(data, batch_size=4, sampler=sampler))
    assert len(made) == len(loaded) == len(DeviceBatches(data, sampler, 4, torch.device("cpu")))
    assert len(made) == -(-(19 - skip) // 4)
    for (x, y), (lx, ly) in zip(made, loaded, strict=True):
        assert torch.equal(y, ly)
        assert x.dtype == lx.dtype == torch.uint8 and torch.equal(x, lx)
