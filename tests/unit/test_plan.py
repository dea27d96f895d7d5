"""The submit plan is exactly what runs: one check, one render, one run directory.

The real facade on the real local scheduler and a temporary runs root. The jobs run
``true`` in place of the trainer, so they end at once and need no torch.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ddp_tui.remote.submit.plan as plan_module
import ddp_tui.sbatch_templates as templates
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RUN_ID_RE, RunStore
from ddp_tui.remote.submit.plan import ValidationFailed
from ddp_tui.spec import ExperimentSpec, SpecError, sweep_from_options, validate


def tiny(**changes: Any) -> ExperimentSpec:
    base = ExperimentSpec(
        name="plan",
        model="mlp",
        dataset="synthetic",
        synthetic_samples=64,
        synthetic_shape="1,8,8",
        num_classes=4,
        device="cpu",
        backend="gloo",
        gpus_per_node=1,
        cpus_per_task=1,
        epochs=1,
        workers=0,
        python="true",  # the job ends at once: these tests are about the run directory
    )
    return base.replace(**changes)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True)
    (code / "__init__.py").write_text("")
    (code / "trainer" / "__init__.py").write_text("")
    ex = LocalExecutor()
    c = Cluster(
        ex,
        LocalScheduler(tmp_path / "state"),
        RunStore(ex, str(tmp_path / "runs"), code_source=code),
        profile=Profile(scheduler="local"),
        location="local scheduler",
    )
    yield c
    c.close()


def _runs(root: Path) -> list[str]:
    return sorted(n for n in os.listdir(root) if RUN_ID_RE.match(n)) if root.exists() else []


def test_the_plans_script_is_the_submitted_job_sbatch_byte_for_byte(cluster: Cluster) -> None:
    plan = cluster.plan(tiny(name="exact"))
    assert plan.ok and plan.kind == "train" and plan.group == plan.spec.group_key()
    assert RUN_ID_RE.match(plan.run_id) and plan.run_dir == f"{cluster.store.root}/{plan.run_id}"
    assert f"#SBATCH --chdir={plan.run_dir}\n" in plan.script
    view = cluster.submit(plan)
    assert (view.run_id, view.run_dir, view.group) == (plan.run_id, plan.run_dir, plan.group)
    assert (Path(view.run_dir) / "job.sbatch").read_bytes() == plan.script.encode()
    assert view.job_id is not None


def test_a_plan_submitted_twice_is_refused_and_the_first_run_stays(
    cluster: Cluster, tmp_path: Path
) -> None:
    plan = cluster.plan(tiny(name="twice"))
    first = cluster.submit(plan)
    run_dir = Path(first.run_dir)
    before = {p: (run_dir / p).read_bytes() for p in ("spec.json", "job.sbatch")}
    with pytest.raises(ValidationFailed, match="submitted already") as err:
        cluster.submit(plan)
    assert [e.field for e in err.value.errors] == ["run_id"]
    assert _runs(tmp_path / "runs") == [first.run_id]
    assert {p: (run_dir / p).read_bytes() for p in before} == before
    attempts = [json.loads(x) for x in (run_dir / "jobs.jsonl").read_text().splitlines()]
    assert [a["job_id"] for a in attempts if a.get("event") is None] == [first.job_id]
    assert not [n for n in os.listdir(tmp_path / "runs") if n.endswith(".tmp")]


def test_a_bad_spec_gives_a_plan_with_errors_and_no_run_directory(
    cluster: Cluster, tmp_path: Path
) -> None:
    plan = cluster.plan(tiny(epochs=0, backend="mpi"))
    assert not plan.ok
    assert {e.field for e in plan.errors} >= {"epochs", "backend"}
    assert (plan.run_id, plan.run_dir, plan.script) == ("", "", "")
    with pytest.raises(ValidationFailed) as err:
        cluster.submit(plan)
    assert err.value.errors == list(plan.errors)
    assert cluster.validate(tiny(epochs=0, backend="mpi")) == list(plan.errors)
    assert _runs(tmp_path / "runs") == []


def test_the_local_scheduler_refuses_two_nodes_at_plan_time(cluster: Cluster) -> None:
    plan = cluster.plan(tiny(nodes=2))
    assert [e.field for e in plan.errors] == ["nodes"]
    assert "one-node torchrun jobs only" in plan.errors[0].message


def test_the_local_scheduler_gives_a_job_no_more_cpus_than_the_machine_has(
    cluster: Cluster,
) -> None:
    cpus = len(os.sched_getaffinity(0))
    plan = cluster.plan(tiny(cpus_per_task=cpus + 3, gpus_per_node=2))
    assert plan.ok and plan.spec.cpus_per_task == cpus
    assert f"#SBATCH --cpus-per-task={cpus}\n" in plan.script
    threads = max(1, cpus // 2)
    assert plan.warnings == (
        f"cpus_per_task: {cpus + 3} asked, but this machine has {cpus} CPUs: the local job "
        f"gets {cpus}, shared by its 2 process(es) ({threads} thread(s) each)",
    )
    # The group is the spec's as asked: a clamped run compares with its sweep's others.
    assert plan.group == tiny(cpus_per_task=cpus + 3, gpus_per_node=2).group_key()
    # What fits is left alone, without a word.
    fits = cluster.plan(tiny(cpus_per_task=cpus))
    assert fits.spec.cpus_per_task == cpus and fits.warnings == ()


def test_a_plan_checks_the_spec_once_and_the_render_does_not_check_it_again(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[ExperimentSpec] = []

    def counting(spec: ExperimentSpec) -> Any:
        calls.append(spec)
        return validate(spec)

    def refused(spec: ExperimentSpec) -> Any:
        raise AssertionError("the render validated the spec again")

    monkeypatch.setattr(plan_module, "validate", counting)
    monkeypatch.setattr(templates, "validate", refused)
    for kind in ("train", "preflight"):
        calls.clear()
        assert cluster.plan(tiny(), kind=kind).ok
        assert len(calls) == 1, kind


def test_the_public_render_still_validates() -> None:
    with pytest.raises(SpecError) as err:
        templates.render_training(tiny(epochs=0), "/runs/x")
    assert [e.field for e in err.value.errors] == ["epochs"]
    with pytest.raises(SpecError, match="run_dir"):  # checked=True still checks the path
        templates.render_training(tiny(), "relative/dir", checked=True)


def test_a_preflight_plan_is_named_for_it_in_no_group_and_runs_the_collective_test(
    cluster: Cluster,
) -> None:
    plan = cluster.plan(tiny(name="shape"), kind="preflight")
    assert plan.ok and plan.kind == "preflight" and plan.group is None
    assert plan.spec.name == "shape-preflight" and "-shape-preflight-" in plan.run_id
    assert "ddp_tui.trainer.preflight" in plan.script
    view = cluster.submit(plan)
    assert view.kind == "preflight" and view.name == "shape-preflight"
    assert (Path(view.run_dir) / "job.sbatch").read_text() == plan.script


def test_a_sweep_is_one_plan_per_size_in_one_group(cluster: Cluster, tmp_path: Path) -> None:
    plan = cluster.plan_sweep(tiny(name="sw"), sweep_from_options(["1,2"]))
    assert [p.spec.gpus_per_node for p in plan.plans] == [1, 2]
    assert [p.spec.name for p in plan.plans] == ["sw-g1", "sw-g2"]
    assert len({p.group for p in plan.plans}) == 1 and len({p.run_id for p in plan.plans}) == 2
    bad = cluster.plan_sweep(tiny(name="sw"), sweep_from_options(["1,2"], size_field="nodes"))
    assert [e.field for e in bad.errors] == ["sweep[1] nodes"]
    with pytest.raises(ValidationFailed):
        cluster.submit_sweep(bad)  # nothing is submitted unless every plan is ok
    assert _runs(tmp_path / "runs") == []
    views = cluster.submit_sweep(plan)
    assert [v.run_id for v in views] == [p.run_id for p in plan.plans]
    # The local scheduler runs the sweep as one job array: member i is task i.
    assert plan.summary() == "2 runs: one job array of 2"
    master = views[0].job_id.partition("_")[0] if views[0].job_id else ""
    assert [v.job_id for v in views] == [f"{master}_0", f"{master}_1"]
    with pytest.raises(SpecError, match="given twice"):
        sweep_from_options(["2,1,2"])
    with pytest.raises(SpecError, match="at least one field"):
        sweep_from_options([])


def test_dry_run_prints_the_plans_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ddp_tui.cli import main

    monkeypatch.setenv("HOME", str(tmp_path))
    args = ["--scheduler", "local", "--runs-root", str(tmp_path / "runs"), "submit", "--dry-run"]
    assert main([*args, "--name", "dry", "--python", sys.executable]) == 0
    out = capsys.readouterr().out
    chdir = next(line for line in out.splitlines() if line.startswith("#SBATCH --chdir="))
    assert RUN_ID_RE.match(Path(chdir.removeprefix("#SBATCH --chdir=")).name)
    assert not (tmp_path / "runs").exists()


# -- a user's own script ----------------------------------------------------------------------


def script_project(root: Path) -> Path:
    project = root / "proj"
    (project / "src").mkdir(parents=True)
    (project / "train.py").write_text("print('Epoch 1 - Avg Loss: 0.5')\n")
    (project / "src" / "model.py").write_text("X = 1\n")
    return project


def script_spec(script: str, **changes: Any) -> ExperimentSpec:
    return tiny(entry="script", script=script, script_args="--epochs 1", **changes)


def test_a_script_plan_resolves_its_paths_and_snapshots_the_project(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = script_project(tmp_path)
    monkeypatch.chdir(project)
    plan = cluster.plan(script_spec("train.py"))
    assert plan.ok, plan.errors
    # Relative paths are made absolute on the app's machine, where the snapshot is taken.
    assert plan.spec.script == str(project / "train.py")
    assert plan.spec.project_dir == str(project)
    assert plan.snapshot is not None
    assert sorted(arc for _, arc in plan.snapshot.files) == ["src/model.py", "train.py"]
    assert f"--cwd {plan.run_dir}/project" in plan.script
    assert "-- train.py" in plan.script
    cluster.submit(plan)
    run = Path(plan.run_dir)
    assert (run / "job.sbatch").read_text() == plan.script
    assert (run / "project" / "src" / "model.py").read_text() == "X = 1\n"
    assert json.loads((run / "snapshot.json").read_text())["files"] == 2


def test_a_script_that_is_not_there_is_an_inline_error(cluster: Cluster, tmp_path: Path) -> None:
    plan = cluster.plan(script_spec(str(tmp_path / "nope.py")))
    assert [e.field for e in plan.errors] == ["script"]
    assert "not found on this machine" in plan.errors[0].message
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_script_outside_its_project_or_left_out_of_it_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    project = script_project(tmp_path)
    other = tmp_path / "elsewhere.py"
    other.write_text("")
    plan = cluster.plan(script_spec(str(other), project_dir=str(project)))
    assert [e.field for e in plan.errors] == ["script"]
    assert "not inside the project directory" in plan.errors[0].message
    # A script in a directory the snapshot always skips (a cache) could not run in the job.
    cache = project / "__pycache__"
    cache.mkdir()
    (cache / "t.py").write_text("")
    plan = cluster.plan(script_spec(str(cache / "t.py"), project_dir=str(project)))
    assert [e.field for e in plan.errors] == ["script"]
    assert "left out of the snapshot" in plan.errors[0].message


def test_a_project_above_the_size_cap_is_refused_on_project_dir(
    cluster: Cluster, tmp_path: Path
) -> None:
    project = script_project(tmp_path)
    (project / "data.bin").write_bytes(b"\0" * (2 * 2**20))
    plan = cluster.plan(script_spec(str(project / "train.py"), snapshot_max_mb=1))
    assert [e.field for e in plan.errors] == ["project_dir"]
    assert "data.bin" in plan.errors[0].message
    assert "snapshot_max_mb" in plan.errors[0].message


def test_a_script_run_in_place_must_exist_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    project = script_project(tmp_path)
    plan = cluster.plan(script_spec(str(project / "missing.py"), code_mode="in-place"))
    assert [e.field for e in plan.errors] == ["script"]
    assert "does not exist on the cluster" in plan.errors[0].message
    plan = cluster.plan(script_spec(str(project / "train.py"), code_mode="in-place"))
    assert plan.ok and plan.snapshot is None
    assert any("a retry or requeue runs whatever is at" in w for w in plan.warnings)
    # In place, the script runs from where it is: nothing is copied, and a retry runs
    # whatever is there then.
    assert f"--cwd {project}" in plan.script
    assert f"-- {project / 'train.py'}" in plan.script


def test_a_module_script_snapshots_the_project_and_runs_with_dash_m(
    cluster: Cluster, tmp_path: Path
) -> None:
    project = script_project(tmp_path)
    plan = cluster.plan(script_spec("-m src.model", project_dir=str(project)))
    assert plan.ok, plan.errors
    assert "    -- -m\n    src.model\n    --epochs 1\n)" in plan.script


def test_a_submit_copies_the_project_as_it_is_then_not_as_it_was_planned(
    cluster: Cluster, tmp_path: Path
) -> None:
    # A Compose preview can be minutes old: a file added since is in the run, one removed
    # since is not.
    project = script_project(tmp_path)
    plan = cluster.plan(script_spec(str(project / "train.py")))
    assert plan.ok, plan.errors
    (project / "src" / "added.py").write_text("Y = 2\n")
    (project / "src" / "model.py").unlink()
    cluster.submit(plan)
    copied = Path(plan.run_dir) / "project" / "src"
    assert sorted(p.name for p in copied.iterdir()) == ["added.py"]
