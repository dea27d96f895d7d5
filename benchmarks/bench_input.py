"""The trainer's host input pipeline against a plain torchvision float32 one, on the same JPEG
folder (made here), in one run (issue 37, docs/input-pipeline.md).

- trainer: the trainer's image-folder samples (``ddp_tui.trainer.images.image_folder``, the
  CPU decode): each JPEG decoded, resized and centre-cropped on uint8, batched as uint8.
- reference: ``torchvision.datasets.ImageFolder`` with ``Resize``, ``CenterCrop`` (the same
  crop), ``ToTensor`` and ``Normalize``: float32 batches.

Both go through a ``DataLoader`` with the same batch size and workers; the two sides alternate
and each side's best pass counts (the one least disturbed by the rest of the machine). Figures:
the host bytes per sample of a delivered batch (input and label), and samples/s per loader
worker. Targets: host bytes <= 0.3 of the reference's, samples/s per worker >= the reference's.
For information, the host side of ``--decode gpu`` (the workers read the files' bytes only).

    python benchmarks/bench_input.py [--images 400] [--repeats 3] [--workers 1] [--json]
    python benchmarks/bench_input.py --quick     # 48 images, one pass a side, in seconds

``--json`` prints, as its last line, ``{"trainer": {"host_bytes_per_sample": ...,
"samples_per_sec_per_worker": ...}, "reference": {...}}``. A full run writes
benchmarks/results/input.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from record import Record, add_quick_option  # noqa: E402

SIZE = 256  # the JPEGs' side
CROP = 224  # the trainer's default image size
CLASSES = 8
MAX_BYTES_RATIO = 0.3
MIN_RATE_RATIO = 1.0


def make_jpeg_folder(root: Path, images: int, size: int = SIZE, classes: int = CLASSES) -> Path:
    """``images`` JPEGs of ``size x size`` in ``classes`` class folders under ``root``: each a
    smooth class pattern under its own brightness and noise, so that a model can learn them
    (quality 90, as cameras and ImageNet's files)."""
    import torch
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    coarse = torch.rand((classes, 3, 4, 4), generator=g)
    patterns = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear") * 150
    # A bank of noise, shifted per image: drawing a whole image's noise each time is the slow
    # part of making thousands.
    bank = torch.rand((3, 2 * size, 2 * size), generator=g) * 105
    shifts = torch.randint(size, (images, 2), generator=g).tolist()
    gains = (0.5 + 0.5 * torch.rand(images, generator=g)).tolist()
    for c in range(classes):
        (root / f"class{c:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(images):
        c = i % classes
        (dy, dx), gain = shifts[i], gains[i]
        noise = bank[:, dy : dy + size, dx : dx + size]
        pixels = (patterns[c] * gain + noise).round().clamp(0, 255).to(torch.uint8)
        array = pixels.permute(1, 2, 0).contiguous().numpy()
        Image.fromarray(array).save(root / f"class{c:02d}" / f"{i:05d}.jpg", quality=90)
    return root


def trainer_dataset(root: Path, encoded: bool = False) -> Any:
    """The trainer's own samples for this folder (all of them: the train and val splits)."""
    from ddp_tui.trainer.image_decode import FolderImages
    from ddp_tui.trainer.images import image_folder

    folder = image_folder(root, CROP, seed=0, encoded=encoded)
    samples = folder.train.samples + (folder.val.samples if folder.val is not None else [])
    return FolderImages(samples, CROP, encoded)


def reference_dataset(root: Path) -> Any:
    """torchvision's float32 pipeline, with the trainer's resize and crop."""
    from torchvision import datasets, transforms

    from ddp_tui.trainer.images import IMAGENET_NORMALIZATION as norm

    tf = transforms.Compose(
        [
            transforms.Resize(CROP),
            transforms.CenterCrop(CROP),
            transforms.ToTensor(),
            transforms.Normalize(norm.mean, norm.std),
        ]
    )
    return datasets.ImageFolder(str(root), transform=tf)


def _nbytes(batch: Any) -> int:
    """The host bytes a delivered batch holds (tensors, and the tensors in lists)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.nbytes
    if isinstance(batch, (list, tuple)):
        return sum(_nbytes(b) for b in batch)
    return 0


def one_pass(
    dataset: Any, workers: int, batch: int, collate: Callable[..., Any] | None
) -> dict[str, float]:
    """Every sample once through a fresh DataLoader: samples/s per worker (worker start-up
    left out: the clock starts at the first batch) and the host bytes per sample."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        dataset, batch_size=batch, num_workers=workers, collate_fn=collate, prefetch_factor=2
    )
    it = iter(loader)
    first = next(it)
    count, nbytes = len(first[1]), _nbytes(first)
    start = time.perf_counter()
    timed = 0
    for b in it:
        timed += len(b[1])
        nbytes += _nbytes(b)
    elapsed = time.perf_counter() - start
    count += timed
    return {
        "host_bytes_per_sample": nbytes / count,
        "samples_per_sec_per_worker": timed / max(elapsed, 1e-9) / max(1, workers),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--images", type=int, default=None, help="JPEGs in the folder (default 400)")
    p.add_argument("--repeats", type=int, default=None, help="passes per side (default 3)")
    p.add_argument("--workers", type=int, default=1, help="loader workers per side")
    p.add_argument("--batch-size", type=int, default=None, help="default 32 (quick: 16)")
    p.add_argument("--json", action="store_true", help="the figures as JSON, on the last line")
    add_quick_option(p)
    args = p.parse_args(argv)
    images = args.images or (48 if args.quick else 400)
    repeats = args.repeats or (1 if args.quick else 3)
    batch = args.batch_size or (16 if args.quick else 32)
    record = Record("input", quick=args.quick)

    from ddp_tui.trainer.image_decode import collate_encoded

    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-input-") as tmp:
        t0 = time.perf_counter()
        root = make_jpeg_folder(Path(tmp) / "jpegs", images)
        print(f"{images} JPEGs of {SIZE}x{SIZE} made in {time.perf_counter() - t0:.1f} s")
        sides: dict[str, tuple[Any, Callable[..., Any] | None]] = {
            "trainer": (trainer_dataset(root), None),
            "reference": (reference_dataset(root), None),
            "trainer, --decode gpu (host side)": (trainer_dataset(root, True), collate_encoded),
        }
        for r in range(repeats):
            for name, (dataset, collate) in sides.items():
                got = one_pass(dataset, args.workers, batch, collate)
                mine = best.setdefault(name, got)
                if got["samples_per_sec_per_worker"] > mine["samples_per_sec_per_worker"]:
                    best[name] = got
                print(
                    f"pass {r + 1}: {name:36s} {got['samples_per_sec_per_worker']:8.0f} "
                    "samples/s per worker",
                    flush=True,
                )
    ours, ref = best["trainer"], best["reference"]
    bytes_ratio = ours["host_bytes_per_sample"] / ref["host_bytes_per_sample"]
    rate_ratio = ours["samples_per_sec_per_worker"] / ref["samples_per_sec_per_worker"]
    print(
        f"\nImageFolder of {images} JPEGs {SIZE}x{SIZE} -> {CROP}x{CROP}, batch "
        f"{batch}, {args.workers} worker(s), best of {repeats} pass(es) a side:"
    )
    print(f"  {'':36s}{'bytes/sample':>14s}{'samples/s/worker':>18s}")
    for name, got in best.items():
        print(
            f"  {name:36s}{got['host_bytes_per_sample']:14,.0f}"
            f"{got['samples_per_sec_per_worker']:18,.0f}"
        )
    print(f"  {'trainer / reference':36s}{bytes_ratio:14.3f}{rate_ratio:18.3f}")
    print(
        f"  targets: bytes <= {MAX_BYTES_RATIO} of the reference's, samples/s per worker >= "
        f"{MIN_RATE_RATIO}x"
    )
    note = "reference: torchvision ImageFolder + Resize + CenterCrop + ToTensor + Normalize"
    record.figure(
        "host bytes per sample", ours["host_bytes_per_sample"], ref["host_bytes_per_sample"],
        unit="B", note=f"{note}; target <= {MAX_BYTES_RATIO}",
    )  # fmt: skip
    record.figure(
        "samples/s per worker", ours["samples_per_sec_per_worker"],
        ref["samples_per_sec_per_worker"], unit="samples/s", note=f"{note}; target >= 1",
    )  # fmt: skip
    record.save()
    if args.json:
        keys = ("host_bytes_per_sample", "samples_per_sec_per_worker")
        print(
            json.dumps(
                {
                    side: {k: round(best[side][k], 1) for k in keys}
                    for side in ("trainer", "reference")
                }
            )
        )
    met = bytes_ratio <= MAX_BYTES_RATIO and rate_ratio >= MIN_RATE_RATIO
    # A quick run proves the benchmark runs; it asserts nothing about speed.
    return 0 if met or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
