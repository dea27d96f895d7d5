"""Datasets by name, and the data loaders the training loop uses.

Image samples (the torchvision sets, image folders, the synthetic task) leave the workers as
uint8 and are normalised on the device (:mod:`.device_input`); the loaders' workers and
prefetch are sized from the rank's cores and memory (:mod:`.loader_sizing`).
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from ddp_tui.jobfiles import SYNTHETIC_DEFAULT_NOISE

from .args import TrainConfig
from .device_input import DeviceInput, Normalization, input_dtype
from .distributed import World, all_gather
from .errors import UsageError
from .image_decode import FlipSampler, collate_encoded
from .loader_sizing import LoaderSizes, rank_cores, rank_memory, size_loader
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
    #: uint8 samples and how the device turns them into the model's input; None: float samples,
    #: used as they are.
    normalization: Normalization | None = None
    #: Image folders: "cpu" (the workers decode) or "gpu" (the device does), and why.
    decode: str = ""
    decode_reason: str = ""
    #: Training samples flipped (``--hflip``, image folders).
    hflip: bool = False

    @property
    def sample_bytes(self) -> int:
        """Host bytes of one sample as the loader delivers it (the decoded size, at most)."""
        return math.prod(self.input_shape) * (1 if self.normalization is not None else 4)

    @property
    def collate(self) -> Callable[[Any], Any] | None:
        """The loader's collate function: the GPU decode's list of files, else the default."""
        return collate_encoded if self.decode == "gpu" else None


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


#: A synthetic sample's uint8 code: ``x / 255 = 0.5 + 0.125 * value``, so that values in
#: [-4, 4] (4 std of the unit-variance samples) take the 256 levels, 1/32 apart.
SYNTHETIC_NORMALIZATION = Normalization((0.5,), (0.125,))


def quantize(values: torch.Tensor) -> torch.Tensor:
    """Unit-variance float samples as their uint8 code (see :data:`SYNTHETIC_NORMALIZATION`).

    Two separate operations, never a fused multiply-add, so that the host and the device
    round alike and ``--data-on-device`` makes the very bytes the loader makes."""
    return values.mul(31.875).add(127.5).round().clamp(0, 255).to(torch.uint8)


class SyntheticClassification(Dataset[tuple[torch.Tensor, int]]):
    """A learnable synthetic task: one fixed random pattern per class, under Gaussian noise of
    ``noise`` times the pattern's std, scaled to unit variance and stored as uint8.

    At the default noise a small CNN on the default 2,048 samples of 1x28x28 climbs from about
    0.6 to 0.9 validation accuracy over 10 epochs (docs/input-pipeline.md); at 1.5 it reaches 1.0
    in its first epoch. The patterns depend only on the seed (shared by both splits); the labels
    and noise depend on the split. Samples are assembled on access from a bounded noise bank, so
    memory stays small even for 224x224 images.
    """

    BANK_BYTES = 64 * 2**20

    def __init__(
        self,
        samples: int,
        shape: tuple[int, ...],
        num_classes: int,
        seed: int,
        split: int,
        noise: float = SYNTHETIC_DEFAULT_NOISE,
    ) -> None:
        shared = torch.Generator().manual_seed(1_000_003 * seed + 17)
        self.scale = 1.0 / math.sqrt(1.0 + noise * noise)
        self.patterns = ClassPatterns(num_classes, shape, shared)
        own = torch.Generator().manual_seed(1_000_003 * seed + 101 + split)
        self.labels: list[int] = torch.randint(num_classes, (samples,), generator=own).tolist()
        bank = max(1, min(samples, self.BANK_BYTES // (4 * math.prod(shape))))
        self.noise = torch.randn((bank, *shape), generator=own) * (noise * self.scale)
        self.num_classes = num_classes

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        label = self.labels[index]
        pattern = self.patterns[label] * self.scale
        return quantize(pattern + self.noise[index % len(self.noise)]), label


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
        self.patterns = data.patterns.on(device) * data.scale
        self.noise = data.noise.to(device)
        self.labels = torch.tensor(data.labels, device=device)

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def __iter__(self) -> Any:
        order = torch.tensor(list(self.sampler), dtype=torch.long, device=self.device)
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            labels = self.labels[index]
            yield quantize(self.patterns[labels] + self.noise[index % len(self.noise)]), labels


def _synthetic(cfg: TrainConfig) -> DataBundle:
    classes = cfg.num_classes or 10
    shape = cfg.synthetic_shape
    noise = cfg.synthetic_noise
    train = SyntheticClassification(
        cfg.synthetic_samples, shape, classes, cfg.seed, split=0, noise=noise
    )
    val = (
        SyntheticClassification(
            cfg.synthetic_val_samples, shape, classes, cfg.seed, split=1, noise=noise
        )
        if cfg.synthetic_val_samples
        else None
    )
    where = ", batches made on the device" if cfg.data_on_device else ""
    return DataBundle(
        train, val, CLASSIFICATION, classes, shape, 1.0,
        f"synthetic {shape}, noise {noise:g}{where}", SYNTHETIC_NORMALIZATION,
    )  # fmt: skip


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
        from .gpu_decode import resolve_decode
        from .images import image_folder

        decode, why = resolve_decode(cfg.decode, world.device)
        folder = image_folder(cfg.data_root, cfg.image_size, cfg.seed, encoded=decode == "gpu")
        return DataBundle(
            folder.train, folder.val, CLASSIFICATION, len(folder.classes),
            (3, folder.image_size, folder.image_size), 1.0,
            f"imagefolder {folder.layout}, {len(folder.classes)} classes, {decode} decode",
            folder.normalization, decode, why, cfg.hflip,
        )  # fmt: skip
    from .images import torchvision_dataset

    root = cfg.data_root
    train, val, classes, norm = _downloading(
        world, cfg, lambda download: torchvision_dataset(cfg.dataset, root, download)
    )
    x, _ = train[0]
    return DataBundle(train, val, CLASSIFICATION, classes, tuple(x.shape), 1.0, cfg.dataset, norm)


def _quiet_worker(_: int) -> None:
    # Slurm and torchrun signal whole process groups: the workers must not die on the
    # pre-emption signal while the main process finishes its step and saves.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def loader_sizes(cfg: TrainConfig, world: World, data: DataBundle) -> LoaderSizes:
    """This rank's loader workers and prefetch: ``--workers`` and ``--prefetch`` where given,
    the rest from its cores and memory (:mod:`.loader_sizing`); no workers for batches made on
    the device."""
    if cfg.data_on_device and isinstance(data.train, SyntheticClassification):
        return LoaderSizes(0, 1, None, None, "--data-on-device: no loader")
    env = world.env
    return size_loader(
        cores=rank_cores(os.environ, env.local_world_size, env.launcher),
        memory_bytes=rank_memory(os.environ, env.local_world_size),
        batch_bytes=data.sample_bytes * cfg.batch_size,
        workers=cfg.workers,
        prefetch=cfg.prefetch,
    )


def _loader_kwargs(
    cfg: TrainConfig, world: World, sizes: LoaderSizes, data: DataBundle
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "batch_size": cfg.batch_size,
        "num_workers": sizes.workers,
        "pin_memory": world.device.type == "cuda",
        "collate_fn": data.collate,
    }
    if sizes.workers:
        kwargs.update(
            persistent_workers=True, worker_init_fn=_quiet_worker, prefetch_factor=sizes.prefetch
        )
    return kwargs


def train_loader(
    cfg: TrainConfig, world: World, data: DataBundle, sizes: LoaderSizes
) -> tuple[DataLoader[Any] | DeviceBatches, ResumableDistributedSampler]:
    """The training loader and its (resumable, per-epoch shuffled) sampler."""
    dataset = data.train
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
        sampler=FlipSampler(sampler, len(dataset), cfg.seed) if data.hflip else sampler,  # type: ignore[arg-type]
        drop_last=False,
        generator=torch.Generator().manual_seed(cfg.seed),
        **_loader_kwargs(cfg, world, sizes, data),
    )
    return loader, sampler


def val_loader(
    cfg: TrainConfig, world: World, data: DataBundle, sizes: LoaderSizes
) -> DataLoader[Any]:
    """This rank's shard of the validation set: each sample on exactly one rank."""
    assert data.val is not None
    sampler = ShardSampler(len(data.val), world.rank, world.world_size)  # type: ignore[arg-type]
    return DataLoader(
        data.val,
        sampler=sampler,
        generator=torch.Generator().manual_seed(cfg.seed),
        **_loader_kwargs(cfg, world, sizes, data),
    )


def device_input(
    data: DataBundle, device: torch.device, precision: str, channels_last: bool
) -> DeviceInput:
    """How ``data``'s batches become the model's input on ``device``: uint8 normalised there,
    in the training precision and memory format; an image folder's JPEGs decoded there (GPU
    decode)."""
    from .gpu_decode import DeviceDecoder

    decoder = DeviceDecoder(data.input_shape[-1], device) if data.decode == "gpu" else None
    return DeviceInput(device, data.normalization, input_dtype(precision), channels_last, decoder)


def input_record(
    data: DataBundle, sizes: LoaderSizes, prepared: DeviceInput, batch_size: int
) -> dict[str, Any]:
    """run.json's ``input_pipeline``: what the host holds and why (docs/input-pipeline.md)."""
    norm = data.normalization
    return {
        **sizes.as_dict(),
        "host_dtype": _host_dtype(data),
        "host_bytes_per_batch": data.sample_bytes * batch_size,
        "decode": data.decode or None,
        "decode_reason": data.decode_reason or None,
        "device_dtype": str(prepared.dtype).removeprefix("torch.") if norm else None,
        "normalization": norm.as_dict() if norm is not None else None,
    }


def input_line(data: DataBundle, sizes: LoaderSizes, batch_size: int) -> str:
    """The log's line about the input pipeline (rank 0, at the start)."""
    kib = data.sample_bytes * batch_size / 2**10
    size = f"{kib / 2**10:.1f} MiB" if kib >= 2**10 else f"{kib:.0f} KiB"
    if data.decode == "gpu":
        size = f"at most {size}"  # the files' bytes; the decoded size bounds them
    decode = f"; {data.decode_reason}" if data.decode_reason else ""
    return f"input: {_host_dtype(data)} batches of {size}, {sizes.why}{decode}"


def _host_dtype(data: DataBundle) -> str:
    """What a batch holds on the host: JPEG files (GPU decode), uint8 or float32 samples."""
    if data.decode == "gpu":
        return "jpeg"
    return "uint8" if data.normalization is not None else "float32"
