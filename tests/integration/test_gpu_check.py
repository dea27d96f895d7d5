"""``make gpu-check`` as CI runs it: on a machine without CUDA it says so, runs its own harness on
the CPU (the trainer against the plain loop, a real job on the local scheduler with verify,
Resources and Run detail, a user's own DDP script, the out-of-memory job planned, a one-rank
preflight) and exits 0.
This keeps the prepared GPU run from rotting between the rare chances to run it on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from gpucheck.report import FAIL, PASS, SKIP, Report, Step, Target  # noqa: E402

pytestmark = pytest.mark.torch

#: The two tests that read the CPU run of the GPU check: the first to run pays for it.
CPU_CHECK_IS_SLOW = (
    "one whole CPU run of `make gpu-check` (its module fixture): the trainer against the "
    "plain loop, then five real jobs, as CI must run it to keep the GPU run from rotting"
)


@pytest.fixture(scope="module")
def cpu_check(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("gpu-check")
    proc = subprocess.run(
        [
            sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--cpu", "--out", str(out),
            "--wheels", str(out / "no-wheels"), "--budget-sec", "500",
        ],
        capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
    )  # fmt: skip
    return proc, out


def _report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "gpu-check.json").read_text())
    return data


@pytest.mark.slow(reason=CPU_CHECK_IS_SLOW)
def test_without_cuda_it_says_so_checks_its_cpu_side_and_exits_0(
    cpu_check: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, out = cpu_check
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "no CUDA device" in proc.stdout
    report = _report(out)
    assert report["mode"] == "cpu" and report["ok"] is True
    assert report["device"]["summary"].startswith("no CUDA device")
    status = {s["name"]: s["status"] for s in report["steps"]}
    assert status == {
        "environment": PASS,
        "throughput": PASS,
        "input_pipeline": PASS,
        "local_job": PASS,
        "run_detail": PASS,
        "script_job": PASS,
        "lightning_job": PASS,
        "oom": SKIP,
        "preflight": PASS,
        "flight_recorder": PASS,  # over gloo, which shares the recorder
        "compile": SKIP,
    }


@pytest.mark.slow(reason=CPU_CHECK_IS_SLOW)
def test_the_cpu_run_measures_both_sides_and_runs_the_users_path(
    cpu_check: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = cpu_check
    steps = {s["name"]: s for s in _report(out)["steps"]}
    details = steps["throughput"]["details"]
    for side in ("trainer", "plain loop", "trainer, host loader", "plain loop, host loader"):
        assert len(details[f"{side} img/s per epoch"]) == 2  # both epochs, warm-up included
    # No target on a CPU: the numbers are the harness's, not a GPU's.
    assert steps["throughput"]["targets"] == []
    pipeline = steps["input_pipeline"]
    assert pipeline["targets"] == [] and "cpu decode" in pipeline["summary"]
    assert "no CUDA device" in pipeline["details"]["image folder decode"]
    for side in ("host loader, synthetic", "image folder"):
        assert "GiB" in pipeline["details"][f"{side} host RSS at the peak"]
    job = steps["local_job"]
    assert job["details"]["state"] == "COMPLETED" and job["details"]["run.json backend"] == "gloo"
    assert "[ok  ] world size and backend match the spec" in job["evidence"]["ddp-tui verify"]
    assert "host RSS" in job["evidence"]["ddp-tui resources"]
    script = steps["script_job"]["details"]
    assert script["the script says"] == "rank 0/1 backend gloo device cpu"
    assert [row["epoch"] for row in script["metrics.csv"]] == ["1", "2", "3"]
    lightning = steps["lightning_job"]["details"]
    assert lightning["run.json observed"]["frameworks"] == {
        "lightning": {"package": "pytorch_lightning"}
    }
    assert [row["epoch"] for row in lightning["metrics.csv"]] == ["1", "2", "3"]  # test: no row
    assert "planned (--dry-run)" in steps["oom"]["summary"]
    assert "moves no data" in steps["preflight"]["details"]["preflight"]["note"]
    for name in ("detail-logs", "detail-metrics", "detail-resources"):
        svg = (out / f"{name}.svg").read_text()
        assert svg.startswith("<svg") and "gpu-check" in svg
    markdown = (out / "gpu-check.md").read_text()
    assert "# ddp-tui GPU check" in markdown and "| Run detail of that job | pass |" in markdown


def test_a_missed_target_fails_its_step_and_the_report() -> None:
    step = Step("throughput", "Trainer throughput")
    step.targets = [Target("ratio", 0.99, 0.97, "x"), Target("img/s", 2900.0, 3000.0, "img/s")]
    step.settle()
    assert step.status == FAIL and "missed: img/s" in step.summary
    report = Report(mode="cuda", steps=[step])
    assert report.ok is False
    assert "| img/s | 2,900 img/s | >= 3,000 img/s | NO |" in report.to_markdown()
    met = Step("x", "X", targets=[Target("ratio", 0.98, 0.97)])
    met.settle()
    assert met.status == PASS and Report(mode="cuda", steps=[met]).ok


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, as PEP 427 lays one out: a module and its dist-info."""
    import zipfile

    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VALUE = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, text in files.items():
            zf.writestr(arcname, text)
    return path


def test_carried_wheels_are_installed_and_imported_only_into_their_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import time

    from gpucheck.context import Context
    from gpucheck.environment import NotForThisPython, install_wheels

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "ddp_tui_carried_demo", "1.2")
    ctx = Context(cuda=False, work=tmp_path / "work", out=tmp_path, deadline=time.monotonic() + 60)
    monkeypatch.setattr(sys, "path", list(sys.path))  # install_wheels prepends its folder
    (wheels / "python-version").write_text("2.7\n")
    with pytest.raises(NotForThisPython, match=r"for Python 2\.7"):
        install_wheels(ctx, wheels)
    assert ctx.site is None
    (wheels / "python-version").write_text(f"{sys.version_info.major}.{sys.version_info.minor}\n")
    assert install_wheels(ctx, wheels) == ["ddp_tui_carried_demo 1.2"]
    assert ctx.site is not None and str(ctx.site) in ctx.env()["PYTHONPATH"]
    assert importlib.import_module("ddp_tui_carried_demo").VALUE == "1.2"
    sys.modules.pop("ddp_tui_carried_demo")
    assert install_wheels(ctx, tmp_path / "none") == []
