"""Image datasets through torchvision: MNIST-family, CIFAR, and class-per-folder trees.

Samples leave the workers as uint8 (docs/input-pipeline.md); the normalisation each set needs
(its mean and std) is applied on the device (:mod:`.device_input`). Transforms are
deterministic (resize, crop): random augmentation drawn in data-loader workers would make a
resumed run differ from an uninterrupted one; the one random transform, ``--hflip``, is drawn
from the seed and the epoch (:mod:`.image_decode`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from .device_input import Normalization
from .errors import UsageError
from .image_decode import FolderImages

# name -> (torchvision class, folder torchvision reads under --data-root, mean, std)
TORCHVISION_SETS: dict[str, tuple[str, str, tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ("MNIST", "MNIST/raw", (0.1307,), (0.3081,)),
    "fashion_mnist": ("FashionMNIST", "FashionMNIST/raw", (0.2860,), (0.3530,)),
    "cifar10": (
        "CIFAR10",
        "cifar-10-batches-py",
        (0.4914, 0.4822, 0.4465),
        (0.2470, 0.2435, 0.2616),
    ),
    "cifar100": (
        "CIFAR100",
        "cifar-100-python",
        (0.5071, 0.4865, 0.4409),
        (0.2673, 0.2564, 0.2762),
    ),
}
IMAGENET_NORMALIZATION = Normalization((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def torchvision_dataset(
    name: str, root: Path, download: bool
) -> tuple[Dataset[Any], Dataset[Any], int, Normalization]:
    """``(train, val, num_classes, normalisation)`` for one of :data:`TORCHVISION_SETS`; the
    samples are uint8.

    With ``download`` the caller must make sure only one process per node downloads.
    """
    import torchvision
    from torchvision import transforms

    cls_name, folder, mean, std = TORCHVISION_SETS[name]
    cls = getattr(torchvision.datasets, cls_name)
    tf = transforms.PILToTensor()
    try:
        train = cls(str(root), train=True, transform=tf, download=download)
        val = cls(str(root), train=False, transform=tf, download=download)
    except RuntimeError as exc:
        raise UsageError(
            "--data-root",
            f"{cls_name} not found: looked in {root / folder} ({exc}). Fetch it with --download "
            f"(needs internet access from the node), or beforehand on a login node with: "
            f"python -c \"import torchvision; torchvision.datasets.{cls_name}('{root}', "
            'download=True)"',
        ) from None
    return train, val, len(train.classes), Normalization(mean, std)


@dataclass
class FolderData:
    """An ImageFolder split and what the model needs to know about it."""

    train: FolderImages
    val: FolderImages | None
    classes: list[str]
    image_size: int
    layout: str  # "train/val folders" | "tinyimagenet" | "single folder (90/10 split)"
    normalization: Normalization = IMAGENET_NORMALIZATION


def _tinyimagenet_val(val_dir: Path, class_to_idx: dict[str, int]) -> list[tuple[str, int]]:
    """TinyImageNet keeps validation images flat, with labels in ``val_annotations.txt``."""
    samples: list[tuple[str, int]] = []
    annotations = val_dir / "val_annotations.txt"
    for line_no, line in enumerate(annotations.read_text().splitlines(), start=1):
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip():
            continue
        filename, wnid = parts[0].strip(), parts[1].strip()
        if wnid not in class_to_idx:
            raise UsageError(
                "--data-root",
                f"{annotations}:{line_no} names class {wnid!r}, which has no folder under train/",
            )
        path = val_dir / "images" / filename
        if not path.is_file():
            path = val_dir / filename
        samples.append((str(path), class_to_idx[wnid]))
    return samples


def image_folder(
    root: Path, image_size: int | None, seed: int, encoded: bool = False
) -> FolderData:
    """A class-per-folder tree: ``root/train`` + ``root/val`` (class folders or TinyImageNet's
    ``val/images`` + ``val_annotations.txt``), or class folders directly under ``root``.

    Samples are uint8 :class:`.image_decode.FolderImages` (``encoded``: JPEGs as their bytes,
    for the GPU decode)."""
    from torchvision import datasets

    tiny = (root / "val" / "val_annotations.txt").is_file() or (root / "wnids.txt").is_file()
    size = image_size or (64 if tiny else 224)
    train_dir = root / "train" if (root / "train").is_dir() else root
    try:
        # Only its scan of the tree is used: the files are read by FolderImages.
        train = datasets.ImageFolder(str(train_dir))
    except (FileNotFoundError, RuntimeError) as exc:
        raise UsageError(
            "--data-root",
            f"no class folders with images under {train_dir} ({exc}); expected "
            f"{root}/train/<class>/<image> (and val/), or {root}/<class>/<image>",
        ) from None
    classes: list[str] = list(train.classes)

    def images(samples: list[tuple[str, int]]) -> FolderImages:
        return FolderImages(samples, size, encoded)

    val_dir = root / "val"
    if train_dir == root:
        order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed)).tolist()
        cut = max(1, round(0.9 * len(order)))
        return FolderData(
            images([train.samples[i] for i in order[:cut]]),
            images([train.samples[i] for i in order[cut:]]),
            classes, size, "single folder (90/10 split)",
        )  # fmt: skip
    if (val_dir / "val_annotations.txt").is_file():
        val_samples = _tinyimagenet_val(val_dir, train.class_to_idx)
        return FolderData(images(train.samples), images(val_samples), classes, size, "tinyimagenet")
    if val_dir.is_dir():
        val = datasets.ImageFolder(str(val_dir))
        # Labels by class name, so a val/ tree missing a class still labels the rest correctly.
        val_samples = []
        for path, label in val.samples:
            name = val.classes[label]
            if name not in train.class_to_idx:
                raise UsageError("--data-root", f"val class {name!r} has no folder under train/")
            val_samples.append((path, train.class_to_idx[name]))
        return FolderData(
            images(train.samples), images(val_samples), classes, size, "train/val folders"
        )
    return FolderData(
        images(train.samples), None, classes, size, "train folder only (no validation)"
    )
