"""Datasets by name, and the data loaders the training loop uses."""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from .args import TrainConfig
from .distributed import World, all_gather
from .errors import UsageError
from .sampling import ResumableDistributedSampler, ShardSampler
from .user_code import call_with_known_kwargs, load_callable

CLASSIFICATION = "classification"
REGRESSION = "regression"


@dataclass
class DataBundle:
    """Train/validation datasets and what the model and metrics need to know about them."""

    train: Dataset[Any]
    val: Dataset[Any] | None
    task: str  # CLASSIFICATION | REGRESSION
    num_outputs: int
    input_shape: tuple[int, ...]
    target_scale: float = 1.0  # regression: errors are reported times this (the target's std)
    description: str = ""


class ClassPatterns:
    """One unit-variance pattern per class: smooth (upsampled 4x4 noise) for images, so that
    convolutions and pooling keep the signal, as with real pictures.

    The table is kept when it is small; for many classes of large images (1000 x 3x224x224 would
    be 600 MB per process) each pattern is upsampled on access instead.
    """

    MAX_TABLE_BYTES = 256 * 2**20

    def __init__(self, classes: int, shape: tuple[int, ...], gen: torch.Generator) -> None:
        self.shape = shape
        self.table: torch.Tensor | None = None
        if len(shape) != 3 or min(shape[1:]) <= 4:
            self.table = torch.randn((classes, *shape), generator=gen)
            return
        self.coarse = torch.randn((classes, shape[0], 4, 4), generator=gen)
        if classes * math.prod(shape) * 4 <= self.MAX_TABLE_BYTES:
            self.table = self._upsample(self.coarse)

    def _upsample(self, coarse: torch.Tensor) -> torch.Tensor:
        fine = torch.nn.functional.interpolate(
            coarse, size=self.shape[1:], mode="bilinear", align_corners=False
        )
        return fine / fine.std(dim=(1, 2, 3), keepdim=True)

    def __getitem__(self, label: int) -> torch.Tensor:
        if self.table is not None:
            return self.table[label]
        return self._upsample(self.coarse[label : label + 1])[0]

    def on(self, device: torch.device) -> torch.Tensor:
        """The whole table on ``device`` (upsampled there when it is too big for the host)."""
        if self.table is not None:
            return self.table.to(device)
        return self._upsample(self.coarse.to(device))


class SyntheticClassification(Dataset[tuple[torch.Tensor, int]]):
    """A learnable synthetic task: one fixed random pattern per class, plus Gaussian noise.

    The patterns depend only on the seed (shared by both splits); the labels and noise depend on
    the split. Samples are assembled on access from a bounded noise bank, so memory stays small
    even for 224x224 images.
    """

    NOISE_STD = 1.5
    BANK_BYTES = 64 * 2**20

    def __init__(
        self, samples: int, shape: tuple[int, ...], num_classes: int, seed: int, split: int
    ) -> None:
        shared = torch.Generator().manual_seed(1_000_003 * seed + 17)
        self.patterns = ClassPatterns(num_classes, shape, shared)
        own = torch.Generator().manual_seed(1_000_003 * seed + 101 + split)
        self.labels: list[int] = torch.randint(num_classes, (samples,), generator=own).tolist()
        bank = max(1, min(samples, self.BANK_BYTES // (4 * math.prod(shape))))
        self.noise = torch.randn((bank, *shape), generator=own) * self.NOISE_STD
        self.num_classes = num_classes

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        label = self.labels[index]
        return self.patterns[label] + self.noise[index % len(self.noise)], label


class DeviceBatches:
    """The batches of a :class:`SyntheticClassification`, assembled on the device.

    The same samples in the same order as a DataLoader over the same sampler would give (each is
    its class pattern plus a noise bank entry), but gathered by index on the device: no loader
    workers, no host copies, no input pipeline. That measures the model and DDP alone, as the
    synthetic data backends of NVIDIA's DeepLearningExamples do.
    """

    def __init__(
        self,
        data: SyntheticClassification,
        sampler: ResumableDistributedSampler,
        batch_size: int,
        device: torch.device,
    ) -> None:
        self.sampler = sampler
        self.batch_size = batch_size
        self.device = device
        self.patterns = data.patterns.on(device)
        self.noise = data.noise.to(device)
        self.labels = torch.tensor(data.labels, device=device)

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def __iter__(self) -> Any:
        order = torch.tensor(list(self.sampler), dtype=torch.long, device=self.device)
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            labels = self.labels[index]
            yield self.patterns[labels] + self.noise[index % len(self.noise)], labels


def _synthetic(cfg: TrainConfig) -> DataBundle:
    classes = cfg.num_classes or 10
    shape = cfg.synthetic_shape
    train = SyntheticClassification(cfg.synthetic_samples, shape, classes, cfg.seed, split=0)
    val = (
        SyntheticClassification(cfg.synthetic_val_samples, shape, classes, cfg.seed, split=1)
        if cfg.synthetic_val_samples
        else None
    )
    where = ", batches made on the device" if cfg.data_on_device else ""
    return DataBundle(train, val, CLASSIFICATION, classes, shape, 1.0, f"synthetic {shape}{where}")


def _downloading(world: World, cfg: TrainConfig, fetch: Any) -> Any:
    """Run ``fetch(download)`` with downloads on local rank 0 only, then on everyone else.

    The all-gather doubles as the barrier, and passes a failure on local rank 0 to every rank
    instead of leaving them waiting for a timeout.
    """
    error: str | None = None
    if cfg.download and world.env.local_rank == 0:
        try:
            fetch(True)
        except UsageError as exc:
            error = exc.message
        except Exception as exc:  # forwarded to every rank below
            error = f"download failed: {type(exc).__name__}: {exc}"
    errors = [e for e in all_gather(world, error) if e]
    if errors:
        raise UsageError("--data-root", errors[0])
    return fetch(False)


def _user_dataset(cfg: TrainConfig) -> DataBundle:
    fn = load_callable(cfg.dataset, "--dataset")
    result = call_with_known_kwargs(
        fn,
        data_root=str(cfg.data_root) if cfg.data_root else None,
        seed=cfg.seed,
        num_classes=cfg.num_classes,
    )
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise UsageError("--dataset", f"{cfg.dataset} must return (train, val[, num_classes])")
    train, val = result[0], result[1]
    classes = result[2] if len(result) == 3 else cfg.num_classes
    try:
        x, y = train[0]
    except Exception as exc:  # the user's code: report it as theirs
        raise UsageError("--dataset", f"{cfg.dataset}: reading sample 0 failed: {exc}") from exc
    x = torch.as_tensor(x)
    target = torch.as_tensor(y)
    if classes:
        return DataBundle(
            train, val, CLASSIFICATION, int(classes), tuple(x.shape), 1.0, cfg.dataset
        )
    if target.is_floating_point():
        return DataBundle(train, val, REGRESSION, 1, tuple(x.shape), 1.0, cfg.dataset)
    raise UsageError(
        "--num-classes",
        f"{cfg.dataset} has integer targets; pass --num-classes or return "
        "(train, val, num_classes)",
    )


def build_data(cfg: TrainConfig, world: World) -> DataBundle:
    """The datasets for ``cfg.dataset``; errors are :class:`UsageError` naming the argument."""
    if cfg.dataset == "synthetic":
        return _synthetic(cfg)
    if ":" in cfg.dataset:
        return _user_dataset(cfg)
    assert cfg.data_root is not None  # validated in args
    if cfg.dataset == "tabular":
        from .tabular import load_tabular

        assert cfg.target is not None
        tab = load_tabular(cfg.data_root, cfg.target, cfg.seed)
        desc = f"tabular {len(tab.features)} features -> {cfg.target}"
        if tab.dropped:
            desc += f" (non-numeric columns left out: {', '.join(tab.dropped)})"
        return DataBundle(
            tab.train, tab.val, REGRESSION, 1, (len(tab.features),), tab.target_std, desc
        )
    if cfg.dataset == "imagefolder":
        from .images import image_folder

        folder = image_folder(cfg.data_root, cfg.image_size, cfg.seed)
        x, _ = folder.train[0]
        return DataBundle(
            folder.train, folder.val, CLASSIFICATION, len(folder.classes), tuple(x.shape), 1.0,
            f"imagefolder {folder.layout}, {len(folder.classes)} classes",
        )  # fmt: skip
    from .images import torchvision_dataset

    root = cfg.data_root
    train, val, classes = _downloading(
        world, cfg, lambda download: torchvision_dataset(cfg.dataset, root, download)
    )
    x, _ = train[0]
    return DataBundle(train, val, CLASSIFICATION, classes, tuple(x.shape), 1.0, cfg.dataset)


def _quiet_worker(_: int) -> None:
    # Slurm and torchrun signal whole process groups: the workers must not die on the
    # pre-emption signal while the main process finishes its step and saves.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def default_workers(world: World) -> int:
    """Data-loader workers when --workers is not given: the CPUs per local rank, minus one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(0, min(8, cpus // max(1, world.env.local_world_size) - 1))


def loader_workers(cfg: TrainConfig, world: World) -> int:
    """The workers each of this rank's data loaders uses: --workers, else the default."""
    return cfg.workers if cfg.workers is not None else default_workers(world)


def _loader_kwargs(cfg: TrainConfig, world: World) -> dict[str, Any]:
    workers = loader_workers(cfg, world)
    kwargs: dict[str, Any] = {
        "batch_size": cfg.batch_size,
        "num_workers": workers,
        "pin_memory": world.device.type == "cuda",
    }
    if workers:
        kwargs.update(persistent_workers=True, worker_init_fn=_quiet_worker, prefetch_factor=4)
    return kwargs


def train_loader(
    cfg: TrainConfig, world: World, dataset: Dataset[Any]
) -> tuple[DataLoader[Any] | DeviceBatches, ResumableDistributedSampler]:
    """The training loader and its (resumable, per-epoch shuffled) sampler."""
    sampler = ResumableDistributedSampler(
        dataset,  # type: ignore[arg-type]
        num_replicas=world.world_size,
        rank=world.rank,
        seed=cfg.seed,
    )
    if cfg.data_on_device and isinstance(dataset, SyntheticClassification):
        return DeviceBatches(dataset, sampler, cfg.batch_size, world.device), sampler
    # An own generator keeps the loader from drawing on the global RNG at each epoch's start,
    # which would make a resumed run's dropout masks differ from an uninterrupted run's.
    loader = DataLoader(
        dataset,
        sampler=sampler,
        drop_last=False,
        generator=torch.Generator().manual_seed(cfg.seed),
        **_loader_kwargs(cfg, world),
    )
    return loader, sampler


def val_loader(cfg: TrainConfig, world: World, dataset: Dataset[Any]) -> DataLoader[Any]:
    """This rank's shard of the validation set: each sample on exactly one rank."""
    sampler = ShardSampler(len(dataset), world.rank, world.world_size)  # type: ignore[arg-type]
    return DataLoader(
        dataset,
        sampler=sampler,
        generator=torch.Generator().manual_seed(cfg.seed),
        **_loader_kwargs(cfg, world),
    )
