"""JPEG decode on the GPU (``--decode``): which decode a run uses and why, and the device-side
decode, resize, crop and flip of a batch.

``gpu``: the loader workers only read each file's bytes; the device decodes a batch at once
(``torchvision.io.decode_jpeg(list, device="cuda")``, nvjpeg) and resizes, crops and flips it
there. ``cpu``: the workers decode (:mod:`.image_decode`). ``auto``: the GPU where there is a
CUDA device and torchvision can decode on it, else the CPU, with the reason in the log and in
run.json. A file nvjpeg refuses (a CMYK JPEG, a damaged one) is decoded on the CPU instead, and
the log says so once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

from .image_decode import decode_uint8, resize_crop

DECODE_GPU = "gpu"
DECODE_CPU = "cpu"


def _probe(device: torch.device) -> str | None:
    """Why torchvision cannot decode a JPEG on ``device``, or None when it can."""
    try:
        from torchvision.io import decode_jpeg, encode_jpeg

        tiny = encode_jpeg(torch.zeros((3, 16, 16), dtype=torch.uint8))
        out = decode_jpeg([tiny], device=device)
        if out[0].shape != (3, 16, 16):
            return f"a test image came back as {tuple(out[0].shape)}"
    except Exception as exc:  # any failure means: decode on the CPU instead
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return None


def resolve_decode(requested: str, device: torch.device) -> tuple[str, str]:
    """``(cpu | gpu, why)`` for an image folder on ``device`` with ``--decode requested``."""
    if requested == DECODE_CPU:
        return DECODE_CPU, "--decode cpu: the loader workers decode"
    if device.type != "cuda":
        return DECODE_CPU, f"--decode {requested}: no CUDA device, so the loader workers decode"
    problem = _probe(device)
    if problem:
        return DECODE_CPU, (
            f"--decode {requested}: torchvision cannot decode JPEG on {device} ({problem}), "
            "so the loader workers decode"
        )
    return DECODE_GPU, f"--decode {requested}: JPEGs decoded in batches on {device} (nvjpeg)"


class DeviceDecoder:
    """A batch of :func:`.image_decode.collate_encoded` items as one ``N,3,S,S`` uint8 tensor on
    ``device``: JPEG bytes decoded there in one call, images of one size resized together."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.size = size
        self.device = device
        self.fallbacks = 0  # images nvjpeg refused, decoded on the CPU instead

    def _decode(self, data: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        from torchvision.io import ImageReadMode, decode_jpeg

        if not data:
            return []
        try:
            return list(decode_jpeg(list(data), mode=ImageReadMode.RGB, device=self.device))
        except RuntimeError:
            pass  # one bad file fails the batch: decode one by one, the refused on the CPU
        out = []
        for item in data:
            try:
                out.append(decode_jpeg(item, mode=ImageReadMode.RGB, device=self.device))
            except RuntimeError as exc:
                if not self.fallbacks:
                    print(
                        f"note: a JPEG could not be decoded on {self.device} ({exc}); such "
                        "files are decoded on the CPU",
                        file=sys.stderr,
                        flush=True,
                    )
                self.fallbacks += 1
                out.append(decode_uint8(item, "").to(self.device, non_blocking=True))
        return out

    def __call__(self, items: Sequence[Any], flips: torch.Tensor | None) -> torch.Tensor:
        encoded = [i for i, item in enumerate(items) if item.dim() == 1]
        decoded = dict(zip(encoded, self._decode([items[i] for i in encoded]), strict=True))
        # A file that is not a JPEG was decoded and cropped by a worker.
        images: list[torch.Tensor] = [
            decoded[i] if i in decoded else item.to(self.device, non_blocking=True)
            for i, item in enumerate(items)
        ]
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for i, image in enumerate(images):
            by_shape.setdefault(tuple(image.shape), []).append(i)
        if len(by_shape) == 1:  # the usual case: every image of one size, resized at once
            out = resize_crop(torch.stack(images), self.size)
        else:
            out = torch.empty(
                (len(items), 3, self.size, self.size), dtype=torch.uint8, device=self.device
            )
            for index in by_shape.values():
                group = resize_crop(torch.stack([images[i] for i in index]), self.size)
                out[torch.tensor(index, device=self.device)] = group
        if flips is not None and bool(flips.any()):  # flips are on the host: no device sync
            mask = flips.to(self.device, non_blocking=True).view(-1, 1, 1, 1)
            out = torch.where(mask, out.flip(-1), out)
        return out
