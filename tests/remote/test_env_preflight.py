"""The environment check job (ddp_tui.remote.submit.env_preflight) with real parts: real jobs of
the local scheduler in environment venv, with this project's venv (it has torch: the check
passes, is remembered, and a second check sends nothing), a venv path that does not exist, and
a real venv without torch (both refused with the job's own words on the python field, never
remembered); the job scripts of every environment checked by bash itself."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.submit.env_detect import EnvDetector
from ddp_tui.remote.submit.env_preflight import (
    CHECK_CODE,
    EXIT_MARK,
    EnvAnswer,
    EnvCheckCache,
    EnvOutcome,
    EnvPreflight,
    environment_checks,
    judge_answer,
    needs_env_check,
    parse_answer,
)
from ddp_tui.remote.submit.prequeue import PythonCheckCache, PythonKey, is_check_error
from ddp_tui.sbatch_templates.probes import render_env_check
from ddp_tui.spec import ExperimentSpec
from tests.helpers.hold import Hold

WHERE = "local scheduler"
#: This project's venv: the interpreter running the tests, with torch (not resolved: the
#: venv's own path is what environment venv activates).
VENV_PYTHON = str(Path(sys.prefix) / "bin" / "python")


class CountingScheduler(LocalScheduler):
    """The real local scheduler, counting the jobs submitted to it."""

    def __init__(self, state_dir: str) -> None:
        super().__init__(state_dir)
        self.submitted: list[str] = []

    def submit(self, script_path: str, run_dir: str) -> str:
        job_id = super().submit(script_path, run_dir)
        self.submitted.append(job_id)
        return job_id


@dataclass
class Checker:
    scheduler: CountingScheduler
    preflight: EnvPreflight
    runs_root: Path


def _checker(base: Path, profile: Profile | None = None) -> Checker:
    scheduler = CountingScheduler(str(base / "local-state"))
    preflight = EnvPreflight(
        LocalExecutor(),
        scheduler,
        runs_root=str(base / "runs"),
        profile=profile or Profile(scheduler="local"),
        where=WHERE,
        cache=EnvCheckCache(base / "env-checks.json"),
    )
    return Checker(scheduler, preflight, base / "runs")


def venv_spec(**changes: Any) -> ExperimentSpec:
    return ExperimentSpec(
        name="envcheck", device="cpu", backend="gloo", environment="venv", python=VENV_PYTHON
    ).replace(**changes)


@dataclass
class Passed:
    checker: Checker
    outcome: EnvOutcome
    seconds: float


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Passed]:
    """One real check of this project's venv, shared by the module's tests."""
    checker = _checker(tmp_path_factory.mktemp("env-check"))
    t0 = time.monotonic()
    outcome = checker.preflight.check(venv_spec(), wait_sec=60)
    yield Passed(checker, outcome, time.monotonic() - t0)


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real venv without torch (no site packages, so not the test venv's)."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_the_projects_venv_passes_with_torch_and_gloo_and_no_cuda(passed: Passed) -> None:
    outcome = passed.outcome
    assert outcome.errors == [] and outcome.warnings == []
    report = outcome.report
    assert report is not None
    # (torch's metadata, not an import: that would cost this process a second)
    assert report["torch"].split("+")[0] == importlib.metadata.version("torch")
    assert report["torch_cuda"] is None or isinstance(report["torch_cuda"], str)
    assert report["cuda_available"] is False and report["device_count"] == 0
    assert report["gpus"] == [] and report["nccl"] is None
    assert report["gloo"] is True and report["torchvision"] is True
    assert report["virtual_env"] == sys.prefix  # activated: the job's own VIRTUAL_ENV
    assert report["python"] == sys.version.split()[0]
    assert len(passed.checker.scheduler.submitted) == 1
    assert passed.seconds < 30


def test_a_passed_check_is_remembered_and_a_second_check_sends_nothing(passed: Passed) -> None:
    checker = passed.checker
    again = checker.preflight.check(venv_spec(), wait_sec=60)
    assert again.errors == [] and again.report == passed.outcome.report
    assert len(checker.scheduler.submitted) == 1
    # Read afresh from the file: another process (the app beside the CLI) sees it too.
    other = _checker(checker.runs_root.parent)
    assert other.preflight.check(venv_spec()).report == passed.outcome.report
    assert other.scheduler.submitted == []
    # Another environment of the same python is another check (not sent here: asked only).
    key = checker.preflight.key(venv_spec(partition="other"))
    assert checker.preflight.cache.get(key) is None


def test_a_venv_that_does_not_exist_is_refused_with_the_jobs_words(tmp_path: Path) -> None:
    checker = _checker(tmp_path)
    spec = venv_spec(python=str(tmp_path / "nope" / "bin" / "python"))
    (error,) = checker.preflight.check(spec, wait_sec=60).errors
    assert error.field == "python"
    assert "cannot activate the venv" in error.message
    assert str(tmp_path / "nope" / "bin" / "activate") in error.message
    assert "ended FAILED" in error.message and is_check_error(error)
    # Never remembered: a fix shows at once.
    assert checker.preflight.cache.get(checker.preflight.key(spec)) is None
    assert checker.preflight.cache.pending(checker.preflight.key(spec)) is None


def test_a_venv_without_torch_is_refused_and_not_remembered(tmp_path: Path, no_torch: str) -> None:
    checker = _checker(tmp_path)
    spec = venv_spec(python=no_torch)
    (error,) = checker.preflight.check(spec, wait_sec=60).errors
    assert error.field == "python" and is_check_error(error)
    assert f"{no_torch} in its venv on " in error.message
    assert "cannot import torch: ModuleNotFoundError: No module named 'torch'" in error.message
    assert checker.preflight.cache.get(checker.preflight.key(spec)) is None
    (again,) = checker.preflight.check(spec, wait_sec=60).errors  # checked again: a new job
    assert again.field == "python" and len(checker.scheduler.submitted) == 2


def test_a_check_not_answered_in_time_is_a_warning_and_a_cancel_refuses_nothing(
    tmp_path: Path, hold: Hold
) -> None:
    """The check's job is held by construction (its set-up waits on the hold file): at the
    bound it has not answered, which is a warning; later plans read the same job (none is
    sent again); cancelled, it says nothing of the environment: a warning again, forgotten."""
    checker = _checker(tmp_path)
    spec = hold.running(venv_spec())
    first = checker.preflight.check(spec, wait_sec=0.5)
    assert first.errors == [] and first.report is None
    (warning,) = first.warnings
    (job,) = checker.scheduler.submitted
    assert warning.startswith(f"the environment check (job {job}) has not answered yet")
    again = checker.preflight.check(spec)  # the profile's 120 s bound: not waited again
    assert again.warnings == [warning.replace("waited 0.5 s", "waited 0 s")]
    assert checker.scheduler.submitted == [job]
    checker.scheduler.cancel(job)
    deadline = time.monotonic() + 30
    while not checker.scheduler.poll([job])[job].state.is_terminal:
        assert time.monotonic() < deadline, "the cancelled check did not end"
        time.sleep(0.1)
    ended = checker.preflight.check(spec, send=False)
    assert ended.errors == []
    assert [w.split(":")[0] for w in ended.warnings] == [
        f"the environment check (job {job}) ended CANCELLED before {VENV_PYTHON} in its venv ran"
    ]
    assert ended.warnings[0].endswith("the environment is unchecked")
    assert checker.preflight.cache.pending(checker.preflight.key(spec)) is None


def test_a_check_queued_behind_a_local_job_is_not_waited_for_and_is_read_later(
    tmp_path: Path, hold: Hold
) -> None:
    """The local scheduler's one slot is taken by a job held by construction: the check
    queues behind it, and the plan does not wait (that job may run for hours). Once the
    slot is free the check runs, and a later plan reads its answer and remembers it."""
    checker = _checker(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "job.sh").write_text(f"#!/bin/bash\nwhile [ -e '{hold.file}' ]; do sleep 0.2; done\n")
    holder = checker.scheduler.submit(str(busy / "job.sh"), str(busy))
    t0 = time.monotonic()
    queued = checker.preflight.check(venv_spec(), wait_sec=60)
    assert time.monotonic() - t0 < 10  # not the 60 s bound
    (check,) = [j for j in checker.scheduler.submitted if j != holder]
    assert queued.errors == [] and queued.report is None
    assert queued.warnings[0].startswith(f"the environment check (job {check}) has not answered")
    hold.release()
    deadline = time.monotonic() + 60
    while not checker.scheduler.poll([check])[check].state.is_terminal:
        assert time.monotonic() < deadline, "the check did not run once the slot was free"
        time.sleep(0.1)
    later = checker.preflight.check(venv_spec(), send=False)
    assert later.errors == [] and later.warnings == []
    assert later.report is not None and later.report["gloo"] is True
    assert checker.preflight.cache.get(checker.preflight.key(venv_spec())) is not None


def test_the_python_checks_overrides_send_nothing(tmp_path: Path, no_torch: str) -> None:
    spec = venv_spec(python=no_torch, environment="modules", modules=("torch/2",))
    off = _checker(tmp_path, Profile(scheduler="local", check_python=False))
    detector = EnvDetector(
        LocalExecutor(), off.scheduler, runs_root=str(off.runs_root),
        profile=off.preflight.profile, where=WHERE,
    )  # fmt: skip
    assert off.preflight.overridden(spec)
    checked = environment_checks(detector, off.preflight, spec)
    assert off.scheduler.submitted == []
    # (This machine has no `module` command: the detection says so, which no override hides.)
    assert [e.field for e in checked.errors] == ["modules"]
    on = _checker(tmp_path / "on")
    assert not on.preflight.overridden(spec)
    PythonCheckCache().override(PythonKey.of("local", WHERE, spec))  # Compose's skip box
    assert on.preflight.overridden(spec)


def test_which_environments_are_checked_by_a_job() -> None:
    assert not needs_env_check(ExperimentSpec(name="p"), "slurm")
    assert not needs_env_check(venv_spec(), "local")  # the login node is the node
    assert needs_env_check(venv_spec(), "slurm")
    assert needs_env_check(venv_spec(environment="conda"), "slurm")
    assert needs_env_check(venv_spec(environment="modules", modules=("x",)), "local")


def test_the_answer_is_read_and_judged_with_the_field_a_fix_changes() -> None:
    report = '{"torch": "2.3.0+cpu", "torch_cuda": null, "cuda_available": false, ' \
             '"device_count": 0, "gloo": true, "nccl_available": false, "torchvision": true, ' \
             '"host": "n7"}'  # fmt: skip
    out = f"[ddp-tui] environment check on n7\nddp-tui-envcheck {report}\n{EXIT_MARK} 0\n"
    answer = parse_answer(out)
    assert answer is not None and answer.status == 0 and answer.report is not None
    assert parse_answer(out.replace(f"{EXIT_MARK} 0\n", "")) is None  # not finished
    image = ExperimentSpec(name="c", device="cuda", backend="nccl", environment="container",
                           container_runtime="podman", container_image="localhost/pt",
                           python="python3")  # fmt: skip
    errors = judge_answer(image, answer, "41").errors
    assert [e.field for e in errors] == ["container_image", "container_image"]
    assert "torch 2.3.0+cpu in python3 inside localhost/pt (podman) on n7" in errors[0].message
    assert errors[0].message.split(" (environment check, job 41)")[1].startswith(" has no CUDA")
    assert "built without NCCL" in errors[1].message
    modules = ExperimentSpec(name="m", environment="modules", modules=("pytorch/2.3",))
    failed = EnvAnswer(None, 1, "ImportError: libcudart.so.12: cannot open shared object file")
    (error,) = judge_answer(modules, failed, "42").errors
    assert error.field == "modules" and "libcudart.so.12" in error.message
    assert "with modules pytorch/2.3" in error.message
    # GPUs seen that are not of the type asked for: a warning (the node may be right anyway).
    seen = {
        "torch": "2.5.1",
        "torch_cuda": "12.4",
        "device_count": 1,
        "host": "g1",
        "gpus": ["NVIDIA A100-SXM4-80GB"],
        "nccl_available": True,
        "torchvision": True,
    }
    cuda = ExperimentSpec(name="g", device="cuda", backend="nccl")
    for asked, warned in (("h100", True), ("a100", False), ("feature:gpu_a100", False)):
        verdict = judge_answer(cuda.replace(gpu_type=asked), EnvAnswer(seen, 0), "43")
        assert verdict.errors == []
        assert verdict.warnings == (
            [f"gpu_type {asked}, but the environment check saw NVIDIA A100-SXM4-80GB"]
            if warned
            else []
        )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"environment": "conda", "python": "/opt/conda/envs/torch/bin/python"},
        {"environment": "modules", "modules": ("cuda/12.4", "pytorch/2.3"), "python": "python3"},
        {
            "environment": "container",
            "container_runtime": "pyxis",
            "container_image": "nvcr.io#nvidia/pytorch:24.05-py3",
            "python": "python3",
            "device": "cuda",
            "backend": "nccl",
            "partition": "gpu",
        },
        {
            "environment": "container",
            "container_runtime": "apptainer",
            "container_image": "/images/pt.sif",
            "python": "python3",
            "device": "cuda",
        },
        {
            "environment": "container",
            "container_runtime": "podman",
            "container_image": "localhost/pt",
            "python": "python3",
            "env_setup": ("export X=1",),
        },
    ],
)
def test_every_environments_check_script_is_valid_bash(
    changes: dict[str, Any], tmp_path: Path
) -> None:
    spec = venv_spec(**changes)
    script = render_env_check(spec, "/runs/.ddp-tui/env-checks/x", code=CHECK_CODE,
                              exit_mark=EXIT_MARK)  # fmt: skip
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    res = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lines: Sequence[str] = script.splitlines()
    assert "#SBATCH --export=NONE" in lines and "#SBATCH --time=00:05:00" in lines
    assert "#SBATCH --nodes=1" in lines and "#SBATCH --cpus-per-task=1" in lines
    assert ("#SBATCH --gres=gpu:1" in lines) is (spec.device == "cuda")
    assert lines[-1] == f'echo "{EXIT_MARK} $?"'
    if spec.container_runtime == "pyxis":
        assert any(ln.startswith("srun --export=ALL --nodes=1 --ntasks=1") for ln in lines)
        assert any("--container-image=" in ln for ln in lines)
