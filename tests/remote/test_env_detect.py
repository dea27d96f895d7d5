"""What each cluster offers a job's environment (ddp_tui.remote.submit.env_detect), with real
parts: the probe's answers captured on the test cluster and on this machine, the real probe run
as the local scheduler runs it (counted: a remembered detection runs nothing), the real cache
file, and a real plan refused for a runtime this machine really lacks. The Slurm side (a probe
job per partition) is in tests/integration/test_env_detect_slurm.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.remote.submit.env_detect import (
    VALID_SEC,
    DetectCache,
    Detection,
    EnvDetector,
    EnvironmentFacts,
    age_text,
    facts_from_probe,
    judge,
    parse_probe,
    render_probe,
    version_of,
)
from ddp_tui.spec import ExperimentSpec
from tests.helpers.counting_executor import CountingExecutor

DATA = Path(__file__).parent / "data"
WHERE = "local scheduler"
EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"


def _detector(tmp_path: Path, ex: LocalExecutor | None = None) -> EnvDetector:
    return EnvDetector(
        ex or CountingExecutor(),
        LocalScheduler(str(tmp_path / "local-state")),
        runs_root=str(tmp_path / "runs"),
        profile=Profile(scheduler="local"),
        where=WHERE,
    )


# -- the probe's answer ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "host"), [("detect_probe_slurm.txt", "n1"), ("detect_probe_local.txt", "vm")]
)
def test_the_captured_answers_parse_into_the_facts(name: str, host: str) -> None:
    probe = parse_probe((DATA / name).read_text())
    assert probe is not None
    facts = facts_from_probe(probe, partition="small", pyxis=False, checked_at=1.0)
    assert facts.host == host
    assert facts.tool("podman").path == "/usr/bin/podman"
    assert facts.tool("podman").version == "4.3.1"
    assert [t.name for t in facts.tools if not t.found] == ["apptainer", "singularity", "enroot"]
    assert (facts.has("podman"), facts.has("apptainer"), facts.has("pyxis")) == (True, False, False)
    assert facts.found_runtimes == ("podman",)
    assert (facts.module, facts.gpus, facts.mqueue) == ("", (), False)
    assert (facts.nofile, facts.nproc) == ("20000", "96365")
    assert facts.summary() == (
        "apptainer absent, singularity absent, podman 4.3.1, enroot absent, no pyxis, "
        "no module command"
    )
    # What is remembered reads back as it was.
    assert EnvironmentFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts


def test_an_answer_cut_short_is_no_answer_and_foreign_lines_are_ignored() -> None:
    text = (DATA / "detect_probe_slurm.txt").read_text()
    assert parse_probe(text.replace("ddp-tui-detect end ok\n", "")) is None
    assert parse_probe("") is None
    banner = "Welcome to the cluster\nddp-tui-detectX podman /x\n" + text
    assert parse_probe(banner) == parse_probe(text)


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("podman version 4.3.1", "4.3.1"),
        ("apptainer version 1.2.5-1.el8", "1.2.5-1.el8"),
        ("singularity-ce version 3.11.4", "3.11.4"),
        ("Modules Release 5.2.0 (2022-11-08)", "5.2.0"),
        ("Modules based on Lua: Version 8.7.14  2022-11-03 12:24 -05:00", "8.7.14"),
        ("3.4.1", "3.4.1"),
        ("no number here", "no number here"),
    ],
)
def test_versions_are_read_from_each_tools_own_line(line: str, version: str) -> None:
    assert version_of(line) == version


def test_the_probe_finds_a_module_function_and_gpus(tmp_path: Path) -> None:
    """The real probe in a shell that has a ``module`` function (as a login shell's init
    defines it), with a FAKE ``nvidia-smi`` on PATH: no GPU can be had on this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n"
        "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'\n"
    )
    smi.chmod(0o755)
    script = tmp_path / "probe.sh"
    script.write_text(render_probe())
    shell = 'module() { echo "Modules Release 5.2.0 (2022-11-08)" >&2; }; . "$1"'
    res = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", shell, "probe", str(script)],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)},
        check=True,
    )
    probe = parse_probe(res.stdout)
    assert probe is not None
    facts = facts_from_probe(probe, partition="", pyxis=None, checked_at=0.0)
    assert (facts.module, facts.module_version) == ("function", "5.2.0")
    assert facts.gpus == (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)",
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
    )
    assert facts.tool("podman").found is (shutil.which("podman") is not None)


# -- detecting on the local scheduler, and remembering ---------------------------------------


def test_local_detection_runs_the_probe_once_then_remembers_it_for_a_day(tmp_path: Path) -> None:
    ex = CountingExecutor()
    detector = _detector(tmp_path, ex)
    first = detector.detect("")
    assert first.facts is not None and not first.problem
    facts = first.facts
    assert len(ex.commands) == 1 and ex.commands[0][:2] == ("env", "-i")
    assert facts.has("podman") is (shutil.which("podman") is not None)
    assert facts.has("apptainer") is (shutil.which("apptainer") is not None)
    assert facts.pyxis is None  # no srun is asked on the local scheduler
    hard = subprocess.run(["bash", "-c", "ulimit -Hn"], capture_output=True, text=True)
    assert facts.nofile == hard.stdout.strip()
    # Remembered: the second detection (another detector, as another process) runs nothing.
    again = _detector(tmp_path, ex).detect("")
    assert again.facts == facts and len(ex.commands) == 1
    # Older than a day: not detected any more.
    cache = DetectCache()
    key = detector.key("")
    assert cache.get(key, now=facts.checked_at + VALID_SEC - 1) == facts
    assert cache.get(key, now=facts.checked_at + VALID_SEC + 1) is None
    # A re-check runs the probe again.
    assert detector.detect("", recheck=True).facts is not None and len(ex.commands) == 2


def test_a_damaged_file_is_not_detected_and_is_put_right(tmp_path: Path) -> None:
    ex = CountingExecutor()
    detector = _detector(tmp_path, ex)
    cache = DetectCache()
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    for damage in ("{not json", "[1, 2]", json.dumps({detector.key("").text(): {"facts": 3}})):
        cache.path.write_text(damage)
        assert detector.cached("") is None
    assert detector.detect("").facts is not None and len(ex.commands) == 1
    assert detector.cached("") is not None  # the damaged file was replaced, whole


def test_envs_prints_the_facts_and_json(tmp_path: Path) -> None:
    args = [EXE, "--scheduler", "local", "--runs-root", str(tmp_path / "runs"), "envs"]
    text = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "runtimes: " in text and "apptainer: " in text and "hard limits: nofile" in text
    res = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert ("podman" in doc["runtimes"]) is (shutil.which("podman") is not None)
    assert doc["facts"]["host"] == os.uname().nodename


# -- what the facts mean for a plan ----------------------------------------------------------


def _container(runtime: str, **changes: Any) -> ExperimentSpec:
    return ExperimentSpec(
        name="env",
        device="cpu",
        backend="gloo",
        environment="container",
        container_runtime=runtime,
        container_image="/images/torch.sif",
        python="python3",
    ).replace(**changes)


@pytest.mark.skipif(shutil.which("apptainer") is not None, reason="apptainer is installed here")
def test_a_plan_for_a_runtime_detected_absent_is_refused_naming_what_was_found(
    tmp_path: Path,
) -> None:
    executor = CountingExecutor()
    cluster = Cluster(
        executor,
        LocalScheduler(str(tmp_path / "local-state")),
        RunStore(executor, str(tmp_path / "runs")),
        profile=Profile(scheduler="local"),
        location=WHERE,
    )
    try:
        plan = cluster.plan(_container("apptainer"))
        refusal = [e for e in plan.errors if e.field == "container_runtime"]
        assert len(refusal) == 1, plan.errors
        message = refusal[0].message
        assert message.startswith("apptainer: not found on the default partition (detected ")
        assert "apptainer absent" in message and "--recheck-environment" in message
        if shutil.which("podman"):
            assert "use container_runtime podman" in message
        # Detected once (the probe), remembered: the next plan runs no probe.
        probes = [c for c in executor.commands if c[:2] == ("env", "-i")]
        assert len(probes) == 1
        cluster.plan(_container("apptainer"))
        assert [c for c in executor.commands if c[:2] == ("env", "-i")] == probes
        # No environment check job was sent for a refused runtime.
        assert not (tmp_path / "runs" / ".ddp-tui" / "env-checks").exists()
    finally:
        cluster.close()


def test_an_undetected_runtime_is_only_a_note_and_modules_need_a_module_command() -> None:
    spec = _container("podman")
    pending = judge(spec, Detection("gpu", pending_job="12"))
    assert pending.errors == []
    assert pending.notes == [
        "the environment of partition gpu is not detected yet: its probe (job 12) is still "
        "queued; a later plan reads its answer"
    ]
    probe = parse_probe((DATA / "detect_probe_slurm.txt").read_text())
    assert probe is not None
    facts = facts_from_probe(probe, partition="gpu", pyxis=False, checked_at=1000.0)
    found = Detection("gpu", facts)
    assert judge(spec, found, now=1060.0).errors == []
    (pyxis,) = judge(_container("pyxis", container_image="nvcr.io#nvidia/pytorch:24.05-py3"),
                     found, now=4600.0).errors  # fmt: skip
    assert pyxis.field == "container_runtime"
    assert pyxis.message.startswith("pyxis: not found on partition gpu (detected 1 h ago on n1:")
    modules = ExperimentSpec(name="m", environment="modules", modules=("cuda/12.4",))
    (error,) = judge(modules, found, now=1000.0).errors
    assert error.field == "modules" and "no 'module' command on partition gpu" in error.message
    assert judge(ExperimentSpec(name="p"), found).errors == []  # python: nothing to detect


def test_ages_read_as_a_person_says_them() -> None:
    assert [age_text(s) for s in (0, 59, 61, 3599, 3601, 86000)] == [
        "0 s", "59 s", "1 min", "60 min", "1 h", "24 h",
    ]  # fmt: skip
