"""The checks before a job queues (ddp_tui.remote.submit.prequeue), with real parts: the local
executor running a real interpreter without torch (a fresh venv), the test venv's own python
(it has torch), real missing and existing data roots, and the real cache file; over real
SSH, the check is one exec."""

from __future__ import annotations

import importlib.metadata
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.remote.submit.prequeue import (
    PythonCheckCache,
    PythonKey,
    check_command,
    default_cache_path,
    prequeue_errors,
)
from ddp_tui.spec import ExperimentSpec, FieldError
from tests.helpers.counting_executor import CountingExecutor

WHERE = "local scheduler"


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real python without torch: a fresh venv (no site packages, so not the test venv's)."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    res = subprocess.run([str(python), "-c", "import torch"], capture_output=True, text=True)
    assert res.returncode != 0 and "No module named 'torch'" in res.stderr
    return str(python)


def spec(**changes: Any) -> ExperimentSpec:
    return ExperimentSpec(name="pq", device="cpu", backend="gloo", python=sys.executable).replace(
        **changes
    )


def errors(ex: CountingExecutor, s: ExperimentSpec, **kw: Any) -> list[FieldError]:
    profile = kw.pop("profile", Profile(scheduler="local"))
    return prequeue_errors(ex, s, profile, where=WHERE, **kw)


def test_a_python_without_torch_is_a_python_error_naming_it_and_is_not_remembered(
    no_torch: str,
) -> None:
    ex = CountingExecutor()
    s = spec(python=no_torch, env_setup=("export X=1",))
    (err,) = errors(ex, s)
    assert err.field == "python"
    assert no_torch in err.message and "No module named 'torch'" in err.message
    assert "export X=1" in err.message  # the set-up it ran after
    assert len(ex.commands) == 1
    # A failure is never remembered: the next plan checks again (a fix shows at once).
    assert errors(ex, s) == [err] and len(ex.commands) == 2
    assert PythonCheckCache().get(PythonKey.of("local", WHERE, s)) is None


def test_a_python_with_torch_passes_once_then_is_remembered_until_a_recheck() -> None:
    ex = CountingExecutor()
    s = spec()
    assert errors(ex, s) == [] and len(ex.commands) == 1
    record = PythonCheckCache().get(PythonKey.of("local", WHERE, s))
    found = [importlib.metadata.version(m) for m in ("torch", "torchvision")]
    assert record is not None and record.versions.split() == found
    assert default_cache_path().is_file()
    assert errors(ex, s) == [] and len(ex.commands) == 1  # no command the second time
    assert errors(ex, s, recheck=True) == [] and len(ex.commands) == 2
    # Another set-up (or interpreter, profile, place) is another check.
    assert errors(ex, s.replace(env_setup=("true",))) == [] and len(ex.commands) == 3


def test_the_profile_override_and_the_remembered_override_skip_the_check(no_torch: str) -> None:
    ex = CountingExecutor()
    s = spec(python=no_torch)
    assert errors(ex, s, profile=Profile(scheduler="local", check_python=False)) == []
    assert ex.commands == []
    cache, key = PythonCheckCache(), PythonKey.of("local", WHERE, s)
    cache.override(key)
    assert errors(ex, s) == [] and ex.commands == []
    cache.forget(key)  # a re-check: the failure shows again
    assert [e.field for e in errors(ex, s)] == ["python"] and len(ex.commands) == 1


def test_a_missing_data_root_and_the_python_are_checked_in_one_command(
    no_torch: str, tmp_path: Path
) -> None:
    ex = CountingExecutor()
    missing = tmp_path / "no such dir"
    s = spec(
        python=no_torch,
        model="mlp",
        dataset="tabular",
        task="regression",
        target="y",
        data_root=str(missing),
    )
    found = errors(ex, s)
    assert [e.field for e in found] == ["python", "data_root"]
    assert f"{missing} does not exist on this host" in found[1].message
    assert len(ex.commands) == 1
    (tmp_path / "d.csv").write_text("x,y\n1,2\n")
    assert errors(ex, s.replace(python=sys.executable, data_root=str(tmp_path / "d.csv"))) == []


def test_data_roots_checked_only_where_the_trainer_reads_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = CountingExecutor()
    PythonCheckCache().put(PythonKey.of("local", WHERE, spec()), "2 1", ("torch", "torchvision"))
    gone = str(tmp_path / "gone")
    assert errors(ex, spec(dataset="mnist", data_root=gone, download=True)) == []
    assert errors(ex, spec(dataset="synthetic", data_root=gone)) == []
    assert ex.commands == []  # nothing to check: no command at all
    (err,) = errors(ex, spec(dataset="mnist", data_root=gone))  # download off
    assert err.field == "data_root" and len(ex.commands) == 1
    (err,) = errors(ex, spec(dataset="imagefolder", data_root="data/imgs"))
    assert err.field == "data_root" and "relative to the run directory" in err.message
    assert len(ex.commands) == 1  # known without asking the cluster
    # ~/ is the cluster's home, as in the job script.
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "imgs").mkdir()
    assert errors(ex, spec(dataset="imagefolder", data_root="~/imgs")) == []
    assert len(ex.commands) == 2


def test_a_failing_set_up_line_is_an_env_setup_error() -> None:
    ex = CountingExecutor()
    (err,) = errors(ex, spec(env_setup=("source /nonexistent/activate",)))
    assert err.field == "env_setup"
    assert "/nonexistent/activate" in err.message


def test_an_interpreter_that_is_not_there_is_named() -> None:
    ex = CountingExecutor()
    (err,) = errors(ex, spec(python="/nonexistent/python3"))
    assert err.field == "python" and "/nonexistent/python3 was not found" in err.message


def test_fields_wrong_on_their_own_and_script_runs_are_not_checked(no_torch: str) -> None:
    ex = CountingExecutor()
    s = spec(python=no_torch)
    assert errors(ex, s, known=[FieldError("python", "bad")]) == []
    assert errors(ex, s.replace(entry="script", script="/x.py")) == []
    assert ex.commands == []


def test_a_preflight_needs_only_torch_the_trainer_torchvision_too(
    no_torch: str, tmp_path: Path
) -> None:
    # A package named torch on the set-up's PYTHONPATH, and no torchvision.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    s = spec(python=no_torch, env_setup=(f"export PYTHONPATH={shlex.quote(str(tmp_path))}",))
    ex = CountingExecutor()
    assert errors(ex, s, kind="preflight") == []
    assert len(ex.commands) == 1
    (err,) = errors(ex, s)  # the torch-only answer does not count for the trainer
    assert err.field == "python" and "No module named 'torchvision'" in err.message
    assert "cannot import torch, torchvision" in err.message and len(ex.commands) == 2
    assert "torchvision" not in check_command(s, ("torch",), "")[2]


def test_every_value_is_quoted(tmp_path: Path) -> None:
    # The python and the data root hold shell syntax: nothing of it may run.
    pwned = tmp_path / "pwned"
    nasty = f"/x'; touch {pwned}; echo '$(touch {pwned})`touch {pwned}`"
    ex = CountingExecutor()
    s = spec(python=nasty, dataset="imagefolder", data_root=nasty)
    assert [e.field for e in errors(ex, s)] == ["python", "data_root"]
    assert not pwned.exists()


# -- through the facade --------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, CountingExecutor]]:
    ex = CountingExecutor()
    c = Cluster(
        ex,
        LocalScheduler(tmp_path / "state"),
        RunStore(ex, str(tmp_path / "runs")),
        profile=Profile(scheduler="local"),
        location=WHERE,
    )
    yield c, ex
    c.close()


def test_the_plan_carries_the_python_error_and_a_passed_check_costs_nothing(
    cluster: tuple[Cluster, CountingExecutor], no_torch: str
) -> None:
    c, ex = cluster
    plan = c.plan(spec(python=no_torch))
    assert not plan.ok and [e.field for e in plan.errors] == ["python"]
    assert len(ex.commands) == 1
    assert c.plan(spec()).ok and len(ex.commands) == 2
    assert c.plan(spec(epochs=3)).ok and len(ex.commands) == 2  # remembered
    pf = c.plan(spec(python=no_torch), kind="preflight")
    assert [e.field for e in pf.errors] == ["python"] and "import torch" in pf.errors[0].message


def test_the_local_scheduler_reports_its_free_slot(
    cluster: tuple[Cluster, CountingExecutor],
) -> None:
    c, _ = cluster
    (part,) = c.scheduler.partitions()
    assert (part.nodes, part.idle_nodes) == (1, 1)


# -- over SSH ------------------------------------------------------------------------------


@pytest.mark.ssh
def test_over_ssh_the_checks_are_one_exec(sshd_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.remote.test_ssh import Client

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    client = Client(sshd_env)
    try:
        ex = client.make("target")
        ex.connect()
        s = spec(
            python="/usr/bin/python3",  # the system python: no torch
            env_setup=("export DDP_TUI_X=1",),
            dataset="imagefolder",
            data_root="~/no-such-images",
        )
        execs = ex.exec_count
        found = prequeue_errors(ex, s, Profile(name="remote"), where=ex.description)
        assert ex.exec_count - execs == 1
        assert [e.field for e in found] == ["python", "data_root"]
        assert "No module named 'torch'" in found[0].message
        assert f"does not exist on {ex.description}" in found[1].message
    finally:
        client.close()


# -- on the Slurm test cluster ------------------------------------------------------------


@pytest.mark.slurm
def test_on_slurm_the_profiles_python3_without_torch_stops_the_plan(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    profile = Profile(scheduler="slurm", runs_root=str(tmp_path / "runs"), partition="debug")
    c = Cluster.open(profile)
    try:
        assert all(isinstance(p.idle_nodes, int) for p in c.partitions())
        s = c.default_spec().replace(name="pq", device="cpu", backend="gloo", cpus_per_task=1)
        which = subprocess.run(["bash", "-c", "python3 -c 'import torch'"], capture_output=True)
        plan = c.plan(s)  # python3: the profile's default
        if which.returncode != 0:  # this machine's python3 lacks torch, as the did
            assert [e.field for e in plan.errors] == ["python"]
            assert "python3 on this host cannot import torch" in plan.errors[0].message
        assert c.plan(s.replace(python=sys.executable)).ok
    finally:
        c.close()


def test_the_profile_key_check_python(tmp_path: Path) -> None:
    from ddp_tui.config import ConfigError, load_profiles

    path = tmp_path / "config.toml"
    path.write_text("[profiles.c]\ncheck_python = false\n")
    assert load_profiles(path)["c"].check_python is False
    assert load_profiles(path)["local"].check_python is True  # the default
    path.write_text('[profiles.c]\ncheck_python = "no"\n')
    with pytest.raises(ConfigError, match="check_python: must be true or false"):
        load_profiles(path)
