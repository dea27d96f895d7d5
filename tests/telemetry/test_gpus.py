"""GPU readings from ``nvidia-smi`` output written in its CSV format and a fake NVML module
(a state no GPU-less machine can produce; no GPU machine was lent to record real answers):
parsing, ``[N/A]`` cells, giving up, and ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddp_tui.telemetry.gpus import (
    SMI_GIVE_UP,
    GpuError,
    GpuReading,
    NvmlReader,
    SmiReader,
    open_reader,
    parse_smi_csv,
    visible,
)
from ddp_tui.telemetry.lines import Origin
from ddp_tui.telemetry.sampler import Sampler, Settings

# What `nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,
# power.draw --format=csv,noheader,nounits` prints, written by hand in its format (cells
# ", "-separated, no units, "[N/A]" / "[Not Supported]" where a device has no reading; the
# UUIDs are made up): an A100 node in training ...
A100_SMI = """\
0, GPU-5d2c5c3a-1b8e-6f4d-9a7c-2b3e4f5a6b7c, NVIDIA A100-SXM4-80GB, 40523, 81920, 97, 312.45
1, GPU-8e1f0a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b, NVIDIA A100-SXM4-80GB, 4, 81920, 0, 61.02
"""
# ... and an H100 PCIe whose power reading is not available, one without utilisation.
H100_SMI = """\
0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, 1024, 81559, 12, [N/A]
1, GPU-9f8e7d6c-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, 0, 81559, [Not Supported], [N/A]
"""


def test_a100_lines_parse() -> None:
    got = parse_smi_csv(A100_SMI)
    assert got[0] == GpuReading(
        0,
        "GPU-5d2c5c3a-1b8e-6f4d-9a7c-2b3e4f5a6b7c",
        "NVIDIA A100-SXM4-80GB",
        40523.0,
        81920.0,
        97.0,
        312.45,
    )
    assert [(g.index, g.mem_used_mib, g.util_pct, g.power_w) for g in got[1:]] == [
        (1, 4.0, 0.0, 61.02)
    ]


def test_not_available_cells_are_none_and_junk_lines_are_skipped() -> None:
    text = H100_SMI + "\nNo devices were found\nindex, uuid\n2, GPU-x, short line\n"
    got = parse_smi_csv(text)
    assert [(g.index, g.name, g.util_pct, g.power_w) for g in got] == [
        (0, "NVIDIA H100 80GB HBM3", 12.0, None),
        (1, "NVIDIA H100 80GB HBM3", None, None),
    ]


class FakeSmiRun:
    """A fake ``nvidia-smi`` runner: the answers above, then failures."""

    def __init__(self, answers: Sequence[str | Exception]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> str:
        self.calls.append((tuple(argv), timeout))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_nvidia_smi_is_given_up_after_failures_in_a_row() -> None:
    timeout = subprocess.TimeoutExpired(["nvidia-smi"], 10)
    failed = subprocess.CalledProcessError(9, ["nvidia-smi"], b"", b"NVIDIA-SMI has failed\n")
    answers: list[str | Exception] = [A100_SMI, timeout, H100_SMI]
    run = FakeSmiRun(answers + [failed] * SMI_GIVE_UP)
    reader = SmiReader("/usr/bin/nvidia-smi", run)
    assert len(reader.read()) == 2
    with pytest.raises(GpuError) as first:
        reader.read()
    assert not first.value.give_up and "timed out" in str(first.value)
    assert len(reader.read()) == 2  # a success resets the count
    for n in range(1, SMI_GIVE_UP + 1):
        with pytest.raises(GpuError) as err:
            reader.read()
        assert err.value.give_up == (n == SMI_GIVE_UP)
    assert "exit 9: NVIDIA-SMI has failed" in str(err.value)
    argv, limit = run.calls[0]
    assert argv[0] == "/usr/bin/nvidia-smi" and argv[1].startswith("--query-gpu=index,uuid")
    assert limit == 10.0


@dataclass
class _Memory:
    used: int
    total: int
    free: int = 0


@dataclass
class _Util:
    gpu: int
    memory: int = 0


class FakeNvmlError(Exception):
    """What pynvml raises for a field a device does not support."""


class FakeNvml:
    """A fake ``pynvml`` module: answers shaped as pynvml's, of an A100 (old pynvml: bytes)
    and of an H100 whose power reading is not supported."""

    def __init__(self) -> None:
        self.inits = self.shutdowns = 0
        self.devices: list[tuple[str | bytes, str | bytes, int | None]] = [
            (b"GPU-5d2c5c3a-1b8e-6f4d-9a7c-2b3e4f5a6b7c", b"NVIDIA A100-SXM4-80GB", 312450),
            ("GPU-1a2b3c4d-0000-1111-2222-333344445555", "NVIDIA H100 80GB HBM3", None),
        ]

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str | bytes:
        return self.devices[h][0]

    def nvmlDeviceGetName(self, h: int) -> str | bytes:
        return self.devices[h][1]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> _Memory:
        return _Memory(used=(h + 1) * 1024 * 2**20, total=80 * 1024 * 2**20)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> _Util:
        return _Util(gpu=97 if h == 0 else 3)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        power = self.devices[h][2]
        if power is None:
            raise FakeNvmlError("Not Supported")
        return power


def test_nvml_answers_become_readings_with_none_for_a_field_it_lacks() -> None:
    nvml = FakeNvml()
    reader, note = open_reader(nvml=nvml)
    assert isinstance(reader, NvmlReader) and note is None
    assert reader.read() == [
        GpuReading(
            0,
            "GPU-5d2c5c3a-1b8e-6f4d-9a7c-2b3e4f5a6b7c",
            "NVIDIA A100-SXM4-80GB",
            1024.0,
            81920.0,
            97.0,
            312.4,
        ),
        GpuReading(
            1,
            "GPU-1a2b3c4d-0000-1111-2222-333344445555",
            "NVIDIA H100 80GB HBM3",
            2048.0,
            81920.0,
            3.0,
            None,
        ),
    ]
    reader.read()
    reader.close()
    assert (nvml.inits, nvml.shutdowns) == (1, 1)  # initialised once, however many reads


def test_nvml_that_will_not_start_falls_back_to_nvidia_smi_with_a_note() -> None:
    class FakeBrokenNvml(FakeNvml):
        def nvmlInit(self) -> None:
            raise FakeNvmlError("Driver Not Loaded")

    reader, note = open_reader(nvml=FakeBrokenNvml(), smi_path="/usr/bin/nvidia-smi")
    assert isinstance(reader, SmiReader)
    assert note == "NVML would not start: Driver Not Loaded"


def _four() -> list[GpuReading]:
    return [GpuReading(i, f"GPU-{i}{i}aa-bb", "A100", 1.0, 80.0, 0.0, None) for i in range(4)]


@pytest.mark.parametrize(
    ("devices", "indexes"),
    [
        (None, [0, 1, 2, 3]),  # unset: every device
        ("GPU-22aa-bb,GPU-33aa-bb", [2, 3]),  # by UUID
        ("GPU-11", [1]),  # a UUID prefix, as CUDA accepts
        ("1,3", [1, 3]),  # more devices visible than listed: by index
        ("0,1,2,3", [0, 1, 2, 3]),
        ("", []),  # hidden from CUDA
        ("-1", []),
    ],
)
def test_cuda_visible_devices_narrows_the_devices(devices: str | None, indexes: list[int]) -> None:
    assert [g.index for g in visible(_four(), devices)] == indexes


def test_integers_do_not_filter_a_node_that_shows_only_the_jobs_devices() -> None:
    # Under cgroup device limits the node shows the job's 2 devices, numbered 0 and 1, while
    # CUDA_VISIBLE_DEVICES may still name them by their node-wide indexes.
    assert [g.index for g in visible(_four()[:2], "2,3")] == [0, 1]


def test_a_sample_has_a_gpu_line_per_visible_device(tmp_path: Path) -> None:
    settings = Settings(
        run_dir=str(tmp_path / "run"),
        interval=5.0,
        origin=Origin("n1", 0, "12", 0),
        marker=str(tmp_path / "run"),
        visible_devices="GPU-1a2b3c4d-0000-1111-2222-333344445555",
    )
    sampler = Sampler(settings, NvmlReader(FakeNvml()), proc_root=str(tmp_path / "fake_proc"))
    assert sampler.start_line()["gpu_source"] == "nvml"
    lines = sampler.sample()
    (gpu,) = [x for x in lines if x["kind"] == "gpu"]
    assert {k: gpu[k] for k in ("index", "name", "mem_used_mib", "util_pct", "power_w")} == {
        "index": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "mem_used_mib": 2048.0,
        "util_pct": 3.0,
        "power_w": None,
    }
    assert gpu["mem_total_mib"] == 81920.0 and gpu["uuid"].startswith("GPU-1a2b")


def test_smi_failures_are_noted_once_and_then_no_more_gpu_lines(tmp_path: Path) -> None:
    failed = subprocess.CalledProcessError(9, ["nvidia-smi"], b"", b"NVIDIA-SMI has failed\n")
    reader = SmiReader("nvidia-smi", FakeSmiRun([A100_SMI] + [failed] * SMI_GIVE_UP))
    settings = Settings(str(tmp_path / "run"), 5.0, Origin("n1", 0, "12", 0), "/nothing")
    sampler = Sampler(settings, reader, proc_root=str(tmp_path / "fake_proc"))
    kinds = [[x["kind"] for x in sampler.sample()] for _ in range(SMI_GIVE_UP + 2)]
    assert kinds[0] == ["gpu", "gpu", "note"]  # + the note that fake_proc is missing
    # The same failure twice is one note; giving up is another; then nvidia-smi is not run.
    assert kinds[1:] == [["note"], [], ["note"], []]
    assert len(reader.run.answers) == 0  # type: ignore[attr-defined]
    assert sampler.gpu is None
