"""What each partition of the real Slurm test cluster offers a job's environment: a probe job
per partition (``sbatch --export=NONE``, one core, 100 MB, one minute), pyxis asked of ``srun
--help`` on the login node, every answer remembered, so that the next plan sends no probe. The
probes' jobs end at once; the module shares one detection per partition between its tests."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.submit.env_detect import DetectCache, Detection, EnvDetector, parse_probe

pytestmark = pytest.mark.slurm

WHERE = "Slurm on this host"
TOOLS = ("sbatch", "srun", "squeue", "sacct")


class CountingLocalExecutor(LocalExecutor):
    """The real local executor, counting the Slurm tools it runs (every answer is real)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        tool = next((a for a in argv if a in TOOLS), None)
        if tool is not None:
            self.calls[tool] += 1
        return super().run(argv, **kwargs)


@dataclass
class Detected:
    executor: CountingLocalExecutor
    detector: EnvDetector
    runs_root: Path
    first: dict[str, Detection]  # by partition: the first call's answer
    seconds: dict[str, float]  # by partition: submit to facts


@pytest.fixture(scope="module")
def detected(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Detected:
    base = tmp_path_factory.mktemp("env-detect")
    base.chmod(0o755)
    executor = CountingLocalExecutor()
    detector = EnvDetector(
        executor,
        SlurmScheduler(executor),
        runs_root=str(base / "runs"),
        profile=Profile(scheduler="slurm"),
        where=WHERE,
        cache=DetectCache(base / "environments.json"),
    )
    first: dict[str, Detection] = {}
    seconds: dict[str, float] = {}
    for partition in slurm_cluster.partitions:
        t0 = time.monotonic()
        # No wait at first, as a plan detects: the probe is sent and remembered as queued.
        first[partition] = detector.detect(partition, wait_sec=0)
        # Then the CLI's bounded wait reads the same probe's answer (no second sbatch).
        found = detector.detect(partition, wait_sec=30)
        seconds[partition] = time.monotonic() - t0
        assert found.facts is not None, found
    return Detected(executor, detector, base / "runs", first, seconds)


def test_a_probe_job_per_partition_finds_what_its_node_offers(
    detected: Detected, slurm_cluster: Any
) -> None:
    for partition in slurm_cluster.partitions:
        facts = detected.detector.cached(partition)
        assert facts is not None
        assert facts.partition == partition and facts.host in slurm_cluster.nodes
        # The nodes share this machine's programs.
        assert facts.has("podman") is (shutil.which("podman") is not None)
        assert facts.has("apptainer") is (shutil.which("apptainer") is not None)
        assert facts.pyxis is False  # Debian's srun has no pyxis plugin (only --container)
        assert facts.module == ""  # --export=NONE: no function of the submit shell leaks in
        assert facts.nofile.isdigit() and facts.nproc.isdigit()
        # The answer is a file in the runs root's hidden directory, never a run.
        first = detected.first[partition]
        if first.pending_job:  # (it had not answered yet: the usual case)
            out = detected.runs_root / ".ddp-tui" / "detect" / f"{first.pending_job}.out"
            assert parse_probe(out.read_text()) is not None
        else:
            assert first.facts == facts
        assert detected.seconds[partition] < 30
    # One probe per partition, and srun's help asked once per answer.
    assert detected.executor.calls["sbatch"] == len(slurm_cluster.partitions)
    assert detected.executor.calls["srun"] == len(slurm_cluster.partitions)


def test_what_was_detected_is_remembered_and_a_recheck_sends_a_probe_again(
    detected: Detected, slurm_cluster: Any
) -> None:
    calls = Counter(detected.executor.calls)
    for partition in slurm_cluster.partitions:
        assert detected.detector.detect(partition).facts is not None
    assert detected.executor.calls == calls  # nothing ran
    again = detected.detector.detect("small", recheck=True, wait_sec=30)
    assert again.facts is not None
    assert detected.executor.calls["sbatch"] == calls["sbatch"] + 1


def test_a_partition_sbatch_refuses_is_a_problem_in_slurms_words(detected: Detected) -> None:
    found = detected.detector.detect("no-such-partition", wait_sec=5)
    assert found.facts is None and not found.pending_job
    assert "Invalid partition name specified" in found.problem
    assert "could not be detected" in found.note()
    assert detected.detector.cache.pending(detected.detector.key("no-such-partition")) is None
