"""A script that chooses CUDA for itself, run where there is none: the recorded log of a real
torchrun run (tests/diagnosis/logs/README.md) on this CPU-only machine."""

from __future__ import annotations

from pathlib import Path

from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.model import LogTail, RunFacts

LOG = (Path(__file__).parent / "logs" / "torchrun_cuda_on_cpu.err").read_text()


def facts(err: str) -> RunFacts:
    return RunFacts(
        state="FAILED",
        exit_code=1,
        entry="script",
        script="/runs/r8/project/train.py",
        world_size=2,
        err=LogTail("slurm-8.err", err),
    )


def test_a_script_that_sets_a_cuda_device_on_a_cpu_node_is_named_with_its_line() -> None:
    found = classify_strict(facts(LOG))
    assert found is not None and found.code == "cuda-unavailable", found
    assert found.short == "no GPU for a CUDA script"
    assert "Rank 1 asked for CUDA at train.py:10" in found.cause
    assert "--device cpu" in found.advice and "gloo" in found.advice
    texts = [e.text for e in found.evidence]
    assert "Found no NVIDIA driver" in texts[0] and "set_device" not in texts[0]
    assert any("train.py" in t and "line 10" in t for t in texts), texts


def test_a_cpu_build_of_torch_is_told_apart() -> None:
    driver = next(x for x in LOG.splitlines() if "RuntimeError: Found no NVIDIA" in x)
    driver = driver.split("]: ", 1)[1]
    cpu_build = LOG.replace(driver, "AssertionError: Torch not compiled with CUDA enabled")
    found = classify_strict(facts(cpu_build))
    assert found is not None and found.code == "cuda-unavailable"
    assert found.short == "torch is a CPU build" and "--python" in found.advice


def test_a_plain_exception_is_not_taken_for_a_missing_gpu() -> None:
    plain = LOG.replace("Found no NVIDIA driver on your system", "bad value")
    found = classify_strict(facts(plain))
    assert found is not None and found.code != "cuda-unavailable"
