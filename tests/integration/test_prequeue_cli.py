"""The pre-queue checks from the real CLI (`ddp-tui submit`/`preflight`, the local
scheduler): field errors for a python without torch (a real fresh venv), a data root that is
not there and an image model on tabular data, and the override and re-check options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cli import EXE, SMALL, cli, cli_env


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real python without torch: a fresh venv without the test venv's packages."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_a_python_without_torch_is_a_field_error_and_can_be_skipped(
    tmp_path: Path, no_torch: str
) -> None:
    res = cli(tmp_path, "submit", *SMALL, "--python", no_torch, check=False)
    assert res.returncode == 2, res.stderr
    assert (
        f"ddp-tui: python: {no_torch} on this host cannot import torch, torchvision" in res.stderr
    )
    assert "No module named 'torch'" in res.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    pf = cli(tmp_path, "preflight", "--python", no_torch, check=False)
    assert pf.returncode == 2 and "cannot import torch (no environment set-up lines)" in pf.stderr
    dry = cli(tmp_path, "submit", "--dry-run", *SMALL, "--python", no_torch, "--skip-python-check")
    assert dry.stdout.startswith("#!/bin/bash\n") and dry.stderr == ""


def test_a_passed_check_is_remembered_until_recheck_python(tmp_path: Path) -> None:
    cache = tmp_path / "state" / "ddp-tui" / "python-checks.json"
    cli(tmp_path, "submit", "--dry-run", *SMALL)
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["python"] == sys.executable and entry["where"] == "local scheduler"
    cli(tmp_path, "submit", "--dry-run", *SMALL)
    assert json.loads(cache.read_text()) == {json.dumps([
        "local", "local scheduler", sys.executable, []]): entry}  # fmt: skip
    cli(tmp_path, "submit", "--dry-run", *SMALL, "--recheck-python")
    (again,) = json.loads(cache.read_text()).values()
    assert again["checked_at"] > entry["checked_at"]  # checked afresh


def test_the_profile_can_turn_the_check_off(tmp_path: Path, no_torch: str) -> None:
    env = cli_env(tmp_path)  # writes the test's config file: the profile then says no
    (tmp_path / "config.toml").write_text(
        '[profiles.local]\nscheduler = "local"\ncheck_python = false\n'
    )
    res = subprocess.run(
        [EXE, "--runs-root", str(tmp_path / "runs"), "submit", "--dry-run", *SMALL,
         "--python", no_torch],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr


def test_a_missing_data_root_and_an_image_model_on_tabular_data_are_field_errors(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-images"
    res = cli(
        tmp_path, "submit", *SMALL, "--dataset", "imagefolder", "--data-root", str(missing),
        check=False,
    )  # fmt: skip
    assert res.returncode == 2
    assert f"ddp-tui: data_root: {missing} does not exist on this host" in res.stderr
    # The second failure, stopped before it queues.
    csv = tmp_path / "d.csv"
    csv.write_text("x,y\n1,2\n")
    res = cli(
        tmp_path, "submit", *SMALL, "--model", "simple_cnn", "--dataset", "tabular",
        "--data-root", str(csv), "--target", "y", "--task", "regression", "--num-classes", "",
        check=False,
    )  # fmt: skip
    assert res.returncode == 2
    assert "ddp-tui: model: simple_cnn needs C,H,W images, but dataset tabular" in res.stderr
