"""The trainer's input pipeline, piece by piece on the CPU (docs/input-pipeline.md): uint8
batches, the device-side normalisation against torchvision's float32 one, the prefetcher,
the loader's sizes from cores and memory, the host and device decodes, the flip, and the GPU
decode's fallback on a machine without CUDA (a real trainer run).

What only a GPU proves (the side stream's overlap, nvjpeg) runs in ``make gpu-check``; the one
CUDA test here is skipped without a device."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.helpers import main_in_process

pytestmark = pytest.mark.torch

GiB = 2**30
MiB = 2**20


# ------------------------------------------------------------------ uint8 batches


def test_synthetic_batches_are_uint8_a_quarter_of_float32() -> None:
    import torch
    from torch.utils.data import DataLoader

    from ddp_tui.trainer.data import SYNTHETIC_NORMALIZATION, SyntheticClassification
    from ddp_tui.trainer.device_input import normalize

    data = SyntheticClassification(64, (3, 16, 16), 4, seed=1, split=0, noise=2.0)
    x, y = next(iter(DataLoader(data, batch_size=32)))
    assert x.dtype == torch.uint8 and tuple(x.shape) == (32, 3, 16, 16) and y.dtype == torch.long
    as_float = normalize(x, SYNTHETIC_NORMALIZATION)
    assert x.nbytes * 4 == as_float.nbytes
    # Unit variance, quantised 1/32 apart: the codes' values keep the float samples' spread.
    assert 0.8 < float(as_float.std()) < 1.2 and float(as_float.abs().max()) <= 4.0


def test_quantising_rounds_to_the_nearest_level_and_clamps() -> None:
    import torch

    from ddp_tui.trainer.data import SYNTHETIC_NORMALIZATION, quantize
    from ddp_tui.trainer.device_input import normalize

    values = torch.linspace(-3.9, 3.9, 1001)
    back = normalize(quantize(values), SYNTHETIC_NORMALIZATION)
    assert float((back - values).abs().max()) <= 0.5 / 31.875 + 1e-6
    assert quantize(torch.tensor([-9.0, 9.0])).tolist() == [0, 255]


# ------------------------------------------------------------------ device-side normalisation


def _pil_images(n: int) -> list[Any]:
    import torch
    from PIL import Image

    g = torch.Generator().manual_seed(0)
    arrays = torch.randint(0, 256, (n, 12, 10, 3), generator=g, dtype=torch.uint8)
    return [Image.fromarray(a.numpy()) for a in arrays]


def test_device_normalisation_is_torchvisions_float32_pipeline_bit_for_bit() -> None:
    import torch
    from torchvision import transforms

    from ddp_tui.trainer.device_input import normalize
    from ddp_tui.trainer.images import IMAGENET_NORMALIZATION as NORM

    images = _pil_images(6)
    reference = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize(NORM.mean, NORM.std)]
    )
    expected = torch.stack([reference(im) for im in images])
    uint8 = torch.stack([transforms.PILToTensor()(im) for im in images])
    got = normalize(uint8, NORM)
    assert got.dtype == torch.float32 and torch.equal(got, expected)
    # One value for every channel (MNIST's), per sample as well as per batch.
    gray = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    from ddp_tui.trainer.device_input import Normalization

    one = images[0].convert("L")
    assert torch.equal(
        normalize(transforms.PILToTensor()(one), Normalization((0.1307,), (0.3081,))), gray(one)
    )


def test_device_normalisation_in_the_training_precision_and_memory_format() -> None:
    import torch
    from torchvision import transforms

    from ddp_tui.trainer.device_input import DeviceInput, input_dtype
    from ddp_tui.trainer.images import IMAGENET_NORMALIZATION as NORM

    images = _pil_images(4)
    uint8 = torch.stack([transforms.PILToTensor()(im) for im in images])
    reference = torch.stack(
        [transforms.Normalize(NORM.mean, NORM.std)(transforms.ToTensor()(im)) for im in images]
    )
    prepare = DeviceInput(torch.device("cpu"), NORM, input_dtype("bf16"), channels_last=True)
    x, y = prepare((uint8, torch.arange(4)))
    assert x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
    # bf16 keeps 8 significant bits: what autocast would have cast the float input to.
    assert torch.allclose(x.float(), reference, rtol=2**-8, atol=1e-6)
    assert torch.equal(x.float(), reference.to(torch.bfloat16).float())
    assert torch.equal(y, torch.arange(4))
    # Float samples (a user's dataset) go through untouched, as before.
    floats = torch.randn(2, 3)
    same, _ = DeviceInput(torch.device("cpu"), None)((floats, torch.zeros(2)))
    assert same is floats


# ------------------------------------------------------------------ the prefetcher


def test_the_prefetcher_yields_every_batch_once_in_order_and_times_its_parts() -> None:
    import torch
    from torch.utils.data import DataLoader

    from ddp_tui.trainer.data import SYNTHETIC_NORMALIZATION, SyntheticClassification
    from ddp_tui.trainer.device_input import DeviceInput, normalize

    data = SyntheticClassification(37, (1, 6, 6), 3, seed=2, split=0)
    loader = DataLoader(data, batch_size=5)
    prepare = DeviceInput(torch.device("cpu"), SYNTHETIC_NORMALIZATION)
    it = prepare.batches(loader, timed=True)
    got = list(it)
    expected = list(loader)
    assert len(got) == len(expected) == 8
    for (x, y), (ex, ey) in zip(got, expected, strict=True):
        assert torch.equal(y, ey) and torch.equal(x, normalize(ex, SYNTHETIC_NORMALIZATION))
    assert it.transfer_sec() >= 0 and it.prepare_sec() > 0
    with pytest.raises(StopIteration):
        next(it)
    untimed = prepare.batches(loader)
    assert len(list(untimed)) == 8 and untimed.prepare_sec() == 0


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA device")
def test_on_a_gpu_the_prefetcher_gives_the_cpus_batches() -> None:  # pragma: no cover - GPU
    import torch
    from torch.utils.data import DataLoader

    from ddp_tui.trainer.data import SYNTHETIC_NORMALIZATION, SyntheticClassification
    from ddp_tui.trainer.device_input import DeviceInput

    data = SyntheticClassification(300, (3, 32, 32), 3, seed=2, split=0)
    loader = DataLoader(data, batch_size=64, pin_memory=True)
    cpu = list(DeviceInput(torch.device("cpu"), SYNTHETIC_NORMALIZATION).batches(loader))
    gpu_it = DeviceInput(torch.device("cuda"), SYNTHETIC_NORMALIZATION).batches(loader, True)
    gpu = [(x.cpu(), y.cpu()) for x, y in gpu_it]
    assert len(gpu) == len(cpu) == 5
    for (a, b), (c, d) in zip(gpu, cpu, strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)
    assert gpu_it.transfer_sec() > 0


# ------------------------------------------------------------------ sizes from cores and memory


@pytest.mark.parametrize(
    ("cores", "memory", "batch", "given", "workers", "prefetch"),
    [
        (16, 64 * GiB, 39 * MiB, {}, 8, 4),  # a GPU node: the cap, prefetch as before
        (4, 64 * GiB, 39 * MiB, {}, 3, 4),  # the rank's cores, less one for itself
        (1, 64 * GiB, 39 * MiB, {}, 0, 4),  # one core: the rank loads its own batches
        (16, 16 * GiB, 154 * MiB, {}, 8, 2),  # uint8 224x224 batches of 256: fewer ahead
        (16, 8 * GiB, 154 * MiB, {}, 5, 1),  # then fewer workers
        (16, 16 * GiB, 616 * MiB, {}, 4, 1),  # float32 batches of the same
        (16, 2 * GiB, 616 * MiB, {}, 0, 4),  # no room for a worker at all
        (16, None, 616 * MiB, {}, 8, 4),  # memory unknown: as before
        (16, 4 * GiB, 154 * MiB, {"workers": 6}, 6, 1),  # the user's workers are kept
        (2, 64 * GiB, MiB, {"workers": 0, "prefetch": 2}, 0, 2),
    ],
)
def test_loader_sizes_follow_the_cores_and_the_memory(
    cores: int,
    memory: int | None,
    batch: int,
    given: dict[str, int],
    workers: int,
    prefetch: int,
) -> None:
    from ddp_tui.trainer.loader_sizing import INPUT_SHARE, size_loader

    sizes = size_loader(cores=cores, memory_bytes=memory, batch_bytes=batch, **given)
    assert (sizes.workers, sizes.prefetch) == (workers, prefetch), sizes.why
    if memory and "workers" not in given and sizes.workers:
        assert sizes.host_bytes(batch) <= INPUT_SHARE * memory, sizes.why
    if "workers" in given:
        assert sizes.why.startswith(f"--workers {given['workers']}")
    else:
        assert sizes.why.startswith(f"{workers} workers ({cores} core")
    over = memory is not None and sizes.host_bytes(batch) > INPUT_SHARE * memory
    assert ("over half" in sizes.why) == over, sizes.why
    assert sizes.as_dict()["why"] == sizes.why


def test_the_old_float32_prefetch_needed_four_times_the_memory() -> None:
    """The issue's H100 node: 8 workers x prefetch 4 of float32 256x3x224x224 batches."""
    from ddp_tui.trainer.loader_sizing import size_loader

    kwargs: dict[str, Any] = {"cores": 16, "memory_bytes": None, "workers": 8, "prefetch": 4}
    float32 = size_loader(batch_bytes=256 * 3 * 224 * 224 * 4, **kwargs)
    uint8 = size_loader(batch_bytes=256 * 3 * 224 * 224, **kwargs)
    batches = 8 * 5 + 2
    assert float32.host_bytes(256 * 3 * 224 * 224 * 4) - uint8.host_bytes(256 * 3 * 224 * 224) == (
        batches * 256 * 3 * 224 * 224 * 3
    )


def test_a_ranks_cores_come_from_the_job_then_slurm_then_affinity() -> None:
    import os

    from ddp_tui.trainer.loader_sizing import rank_cores

    env = {"DDP_TUI_NODE_CORES": "16", "SLURM_CPUS_PER_TASK": "64"}
    assert rank_cores(env, 4, "torchrun") == 4
    assert rank_cores({"SLURM_CPUS_PER_TASK": "8"}, 4, "srun") == 8  # a task per rank
    assert rank_cores({"SLURM_CPUS_PER_TASK": "8"}, 4, "torchrun") == 2  # one task, shared
    assert rank_cores({"SLURM_CPUS_PER_TASK": "x"}, 1, "single") == len(os.sched_getaffinity(0))
    assert rank_cores({}, 1000, "torchrun") == 1


def test_memory_limits_from_cgroups_and_slurm(tmp_path: Path) -> None:
    from ddp_tui.trainer.loader_sizing import (
        available_memory,
        cgroup_limit,
        rank_memory,
        slurm_limit,
    )

    proc, root = tmp_path / "proc", tmp_path / "cg"
    proc.mkdir()
    # cgroup v2: the least limit on the way up; "max" is none.
    (proc / "cgroup").write_text("0::/job/step\n")
    (root / "job" / "step").mkdir(parents=True)
    (root / "memory.max").write_text("max\n")
    (root / "job" / "memory.max").write_text(f"{8 * GiB}\n")
    (root / "job" / "step" / "memory.max").write_text("max\n")
    assert cgroup_limit(root, proc) == 8 * GiB
    # cgroup v1, mounted at the container's root; "no limit" is a huge number.
    (proc / "cgroup").write_text("4:memory:/docker/abc\n1:cpu:/\n")
    (root / "memory").mkdir()
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert cgroup_limit(root, proc) is None
    (root / "memory" / "memory.limit_in_bytes").write_text(f"{3 * GiB}\n")
    assert cgroup_limit(root, proc) == 3 * GiB
    assert slurm_limit({"SLURM_MEM_PER_NODE": "4096"}) == 4 * GiB
    assert slurm_limit({"SLURM_MEM_PER_CPU": "1024", "SLURM_CPUS_ON_NODE": "6"}) == 6 * GiB
    assert slurm_limit({}) is None
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable: 2048 kB\n")
    assert available_memory(meminfo) == 2 * MiB
    env = {"SLURM_MEM_PER_NODE": "8192"}
    assert rank_memory(env, 4, (lambda: 64 * GiB,)) == 2 * GiB  # Slurm's, shared by 4 ranks
    assert rank_memory({}, 2, (lambda: None,)) is None


# ------------------------------------------------------------------ decoding


def _image_folder(root: Path, n: int = 6, size: tuple[int, int] = (40, 30)) -> list[Path]:
    """Class folders of JPEGs and one PNG (which the GPU decode leaves to the workers)."""
    import torch
    from torchvision.io import write_jpeg, write_png

    g = torch.Generator().manual_seed(0)
    paths = []
    for i in range(n):
        d = root / f"c{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        image = torch.randint(0, 256, (3, *size), generator=g, dtype=torch.uint8)
        path = d / (f"{i}.png" if i == n - 1 else f"{i}.jpg")
        (write_png if path.suffix == ".png" else write_jpeg)(image, str(path))
        paths.append(path)
    return paths


def test_host_decode_is_uint8_and_close_to_the_float_pipelines_pixels(tmp_path: Path) -> None:
    import torch
    from PIL import Image
    from torchvision import transforms

    from ddp_tui.trainer.image_decode import FolderImages

    paths = _image_folder(tmp_path)
    data = FolderImages([(str(p), 0) for p in paths], 24, encoded=False)
    old = transforms.Compose(
        [transforms.Resize(24), transforms.CenterCrop(24), transforms.PILToTensor()]
    )
    for i, path in enumerate(paths):
        x, label = data[i]
        assert x.dtype == torch.uint8 and tuple(x.shape) == (3, 24, 24) and label == 0
        with Image.open(path) as im:
            reference = old(im.convert("RGB"))
        # torchvision's antialiased resize against PIL's: a level or two apart on average.
        assert float((x.float() - reference.float()).abs().mean()) < 3.0


def test_the_device_decode_gives_the_workers_images_on_the_cpu(tmp_path: Path) -> None:
    """DeviceDecoder's code path on the CPU (``decode_jpeg(list, device="cpu")``): the same
    pixels as the workers' decode, flips included; the PNG arrives decoded."""
    import torch
    from torch.utils.data import DataLoader

    from ddp_tui.trainer.gpu_decode import DeviceDecoder
    from ddp_tui.trainer.image_decode import FolderImages, SampleKey, collate_encoded

    samples = [(str(p), i) for i, p in enumerate(_image_folder(tmp_path))]
    keys = [SampleKey(i, i % 3 == 0) for i in range(len(samples))]
    encoded = FolderImages(samples, 24, encoded=True)
    items, labels, flips = next(
        iter(DataLoader(encoded, batch_size=6, sampler=keys, collate_fn=collate_encoded))
    )
    assert [x.dim() for x in items] == [1, 1, 1, 1, 1, 3]  # JPEG bytes, and the PNG decoded
    decoder = DeviceDecoder(24, torch.device("cpu"))
    batch = decoder(items, flips)
    host = FolderImages(samples, 24, encoded=False)
    expected = torch.stack([host[k][0] for k in keys])
    assert batch.dtype == torch.uint8 and torch.equal(batch, expected)
    assert labels.tolist() == list(range(6)) and decoder.fallbacks == 0
    # JPEGs alone (one size, resized together), and the PNG alone (nothing to decode).
    assert torch.equal(decoder(items[:5], flips[:5]), expected[:5])
    assert torch.equal(decoder(items[5:], None), expected[5:])


def test_gpu_decode_without_cuda_falls_back_to_the_cpu_and_says_why() -> None:
    import torch

    from ddp_tui.trainer.gpu_decode import resolve_decode

    cpu = torch.device("cpu")
    mode, why = resolve_decode("gpu", cpu)
    assert mode == "cpu" and "no CUDA device" in why and "--decode gpu" in why
    assert resolve_decode("auto", cpu)[0] == "cpu"
    assert resolve_decode("cpu", cpu) == ("cpu", "--decode cpu: the loader workers decode")


def test_flips_are_drawn_from_the_seed_and_epoch_and_survive_a_resume() -> None:
    from ddp_tui.trainer.image_decode import FlipSampler
    from ddp_tui.trainer.sampling import ResumableDistributedSampler

    def keys(epoch: int, skip: int = 0) -> list[tuple[int, bool]]:
        inner = ResumableDistributedSampler(range(200), num_replicas=1, rank=0, seed=5)
        inner.set_epoch(epoch)
        inner.skip = skip
        return [(k.sample, k.flip) for k in FlipSampler(inner, 200, seed=5)]

    first = keys(0)
    assert first == keys(0) and keys(0, skip=50) == first[50:]
    assert sorted(i for i, _ in first) == list(range(200))
    assert 60 < sum(f for _, f in first) < 140
    assert dict(first) != dict(keys(1))  # a new draw each epoch


# ------------------------------------------------------------------ the trainer, end to end


def test_the_trainer_asked_to_decode_on_a_gpu_without_one_decodes_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _image_folder(tmp_path / "data", n=12, size=(20, 20))
    for var in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    argv = [
        "--run-dir", str(tmp_path / "run"), "--dataset", "imagefolder",
        "--data-root", str(tmp_path / "data"), "--image-size", "16", "--decode", "gpu",
        "--hflip", "--epochs", "1", "--batch-size", "4", "--workers", "0",
        "--calibration-steps", "1",
    ]  # fmt: skip
    code = main_in_process(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "--decode gpu: no CUDA device, so the loader workers decode" in out
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    pipeline = info["input_pipeline"]
    assert pipeline["decode"] == "cpu" and pipeline["host_dtype"] == "uint8"
    assert pipeline["host_bytes_per_batch"] == 4 * 3 * 16 * 16 and pipeline["workers"] == 0
    with (tmp_path / "run" / "metrics.csv").open(newline="") as fh:
        assert [r["epoch"] for r in csv.DictReader(fh)] == ["1"]
    step_times = json.loads((tmp_path / "run" / "step_times.jsonl").read_text().splitlines()[0])
    rank = step_times["ranks"][0]
    assert rank["transfer_sec"] >= 0 and rank["input_prep_sec"] > 0
