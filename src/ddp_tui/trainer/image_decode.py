"""Image files as uint8 tensors: decode, resize and centre-crop, and the deterministic flip.

The loader workers read each file; with the CPU decode they decode it too (torchvision's
libjpeg-turbo, libpng and libwebp decoders, PIL for the formats they do not take), resize its
shorter side to the crop and cut the centre, all on uint8. With the GPU decode
(:mod:`.gpu_decode`) they hand a JPEG over as its bytes and the device does the rest; a file
that is not a JPEG is still decoded here.

The flip (``--hflip``) is random but decided by ``(seed, epoch, sample)``, not by a worker's
random state: :class:`FlipSampler` hands each index over with its flip, so a resumed run flips
exactly as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import torch
from torch.utils.data import Dataset, Sampler

from .sampling import ResumableDistributedSampler

JPEG_MAGIC = b"\xff\xd8\xff"


class SampleKey(NamedTuple):
    """A training sample's index and whether it is flipped this epoch."""

    sample: int
    flip: bool


def is_jpeg(data: torch.Tensor) -> bool:
    """Whether a file's bytes (a uint8 tensor) are a JPEG, by its magic number."""
    return data.numel() >= 3 and bytes(data[:3].tolist()) == JPEG_MAGIC


def decode_uint8(data: torch.Tensor, path: str) -> torch.Tensor:
    """A file's bytes as a ``3,H,W`` uint8 RGB tensor: torchvision's decoders, else PIL's."""
    try:
        # Deprecated in torchvision 0.29 for TorchCodec, and still there: PIL once it goes.
        from torchvision.io import ImageReadMode, decode_image

        image: torch.Tensor = decode_image(data, mode=ImageReadMode.RGB)
        if image.dtype == torch.uint8:
            return image
    except (ImportError, RuntimeError):  # a format it does not take (BMP, TIFF, PPM, ...)
        pass
    from PIL import Image
    from torchvision.transforms.functional import pil_to_tensor

    with Image.open(path) as im:
        rgb: torch.Tensor = pil_to_tensor(im.convert("RGB"))
    return rgb


def resize_crop(image: torch.Tensor, size: int) -> torch.Tensor:
    """The shorter side to ``size`` (antialiased bilinear), then the centre ``size x size``;
    uint8 stays uint8. Takes one ``C,H,W`` image or an ``N,C,H,W`` batch of one size."""
    from torchvision.transforms.v2 import functional as F

    if min(image.shape[-2:]) != size:
        image = F.resize(image, [size], antialias=True)
    if tuple(image.shape[-2:]) != (size, size):
        image = F.center_crop(image, [size, size])
    return image


def _key(key: int | SampleKey) -> tuple[int, bool]:
    if isinstance(key, tuple):
        return int(key[0]), bool(key[1])
    return int(key), False


class FolderImages(Dataset[Any]):
    """``(path, label)`` samples as uint8 images of ``size x size``.

    ``encoded``: a JPEG comes as its bytes, for the device to decode; a sample is then
    ``(bytes or image, label, flip)`` (see :func:`collate_encoded`), else ``(image, label)``.
    """

    def __init__(self, samples: Sequence[tuple[str, int]], size: int, encoded: bool) -> None:
        self.samples = list(samples)
        self.size = size
        self.encoded = encoded

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, key: int | SampleKey) -> tuple[Any, ...]:
        index, flip = _key(key)
        path, label = self.samples[index]
        with open(path, "rb") as fh:
            data = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8)
        if self.encoded and is_jpeg(data):
            return data, label, flip
        image = resize_crop(decode_uint8(data, path), self.size)
        if flip:
            image = image.flip(-1)
        return (image, label, False) if self.encoded else (image, label)


def collate_encoded(items: Sequence[tuple[Any, int, bool]]) -> tuple[list[Any], Any, Any]:
    """A batch of :class:`FolderImages` (``encoded``) samples: the files' bytes (or images) as a
    list, since they differ in length, with the labels and flips as tensors."""
    return (
        [x for x, _, _ in items],
        torch.tensor([y for _, y, _ in items], dtype=torch.long),
        torch.tensor([f for _, _, f in items], dtype=torch.bool),
    )


class FlipSampler(Sampler[SampleKey]):
    """The training sampler's indices, each with its flip for the epoch: half the samples, drawn
    from ``(seed, epoch)`` alone, so that every rank and every attempt agree."""

    def __init__(self, inner: ResumableDistributedSampler, size: int, seed: int) -> None:
        self.inner = inner
        self.size = size
        self.seed = seed

    def flips(self, epoch: int) -> list[bool]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + 7919 * epoch + 3)
        flips: list[bool] = (torch.rand(self.size, generator=g) < 0.5).tolist()
        return flips

    def __iter__(self) -> Iterator[SampleKey]:
        flips = self.flips(self.inner.epoch)
        return (SampleKey(i, flips[i]) for i in self.inner)

    def __len__(self) -> int:
        return len(self.inner)
