"""Whether the ranks trained together (ddp_tui.scriptrun.observe.sync): the bookkeeping over real
tensors and optimizers, journals read into run.json's ``observed`` and on into verify and
``why``, and real torchrun/gloo scripts that never sync, sync by hand, or spawn their own ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.model import RunFacts
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.verification import SYNC_CHECK, training_checks
from ddp_tui.scriptrun.observe.journal import Journal
from ddp_tui.scriptrun.observe.sync import SyncWatch
from ddp_tui.scriptrun.observed import Observations
from ddp_tui.spec import ExperimentSpec
from tests.scriptrun.test_observe import SRC, free_port, records

SCRIPTS = Path(__file__).resolve().parents[1] / "helpers" / "framework_scripts"


# -- the bookkeeping, over real tensors ------------------------------------------------------
@pytest.fixture
def torch_model() -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(20, 10)  # 210 parameters
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def backward(model: Any) -> None:
    import torch

    model.zero_grad(set_to_none=True)
    model(torch.ones(2, 20)).sum().backward()


def sync_records(tmp_path: Path) -> list[dict[str, Any]]:
    return [r for r in records(tmp_path) if r["kind"] == "sync"]


def test_only_collectives_over_gradients_count_as_gradient_sync(
    tmp_path: Path, torch_model: tuple[Any, Any]
) -> None:
    import torch

    model, optimizer = torch_model
    watch = SyncWatch(Journal(str(tmp_path), "1", {}))
    backward(model)
    watch.collective([torch.tensor([0.5, 1.0])])  # a logged [loss sum, count]: a metric
    watch.step(optimizer)
    assert (watch.steps, watch.grad_sync_steps) == (1, 0)

    backward(model)
    watch.collective([model.weight.grad])  # dist.all_reduce(param.grad)
    watch.step(optimizer)
    backward(model)
    watch.collective([model.weight.grad[:2]])  # a view into a gradient
    watch.step(optimizer)
    backward(model)
    watch.collective([torch.zeros(200)])  # a flat buffer of (most of) the gradients
    watch.step(optimizer)
    backward(model)
    watch.step(optimizer)  # no collective at all
    assert (watch.steps, watch.grad_sync_steps) == (5, 3)


def test_sync_records_come_at_doubling_steps_with_a_checksum_only_while_unsynchronised(
    tmp_path: Path, torch_model: tuple[Any, Any]
) -> None:
    from ddp_tui.scriptrun.observe.sync import param_checksum

    model, optimizer = torch_model
    watch = SyncWatch(Journal(str(tmp_path), "1", {}), clock=lambda: 0.0)
    watch.checksum = param_checksum
    for _ in range(5):
        backward(model)
        watch.step(optimizer)
    found = sync_records(tmp_path)
    assert [r["steps"] for r in found] == [1, 2, 4]
    expected = float(sum(p.detach().double().sum() for p in model.parameters()))
    assert found[-1]["checksum"] == pytest.approx(expected, rel=1e-6)  # after step 4
    watch.write()  # at exit: step 5
    watch.write()  # nothing new: no record
    watch.wrapped("ddp")
    watch.write()
    found = sync_records(tmp_path)
    assert [(r["steps"], r["ddp"]) for r in found[-2:]] == [(5, False), (5, True)]
    assert found[-1]["checksum"] is None  # synchronised: no device reads for evidence


# -- journals -> observed -> verify -> why -----------------------------------------------------
def write_journal(folder: Path, pid: int, *lines: dict[str, Any]) -> None:
    process = {"kind": "process", "pid": pid, "t": 1000.0, "env_rank": pid % 10}
    (folder / f"7-n1-{pid}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (process, *lines))
    )


def group(rank: int, world: int = 2) -> dict[str, Any]:
    return {"kind": "group", "rank": rank, "world_size": world, "backend": "gloo", "host": "n1"}


def sync(steps: int, checksum: float | None, ddp: bool = False, synced: int = 0) -> dict[str, Any]:
    return {"kind": "sync", "ddp": ddp, "fsdp": False, "grad_allreduce_steps": synced,
            "steps": steps, "checksum": checksum}  # fmt: skip


def observe(tmp_path: Path, launched: int = 2) -> dict[str, Any]:
    seen = Observations(tmp_path, "7", child_pid=0, since=1000.0)
    seen.poll()
    return seen.summary(launched)


def spec() -> ExperimentSpec:
    return ExperimentSpec(name="s", entry="script", script="t.py", nodes=1, gpus_per_node=2,
                          device="cpu", backend="gloo", epochs=1)  # fmt: skip


def verdicts(observed: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    run = {"state": "completed", "hosts": ["n1"], "observed": observed, "epochs": 1,
           "epochs_completed": 1, "metrics_source": "auto"}  # fmt: skip
    checks = training_checks(spec(), JobState.COMPLETED, run, [1])
    facts = RunFacts(state="COMPLETED", exit_code=0, entry="script", world_size=2, run_json=run)
    return {c.name: c for c in checks}, classify_strict(facts)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "observe").mkdir()
    return tmp_path / "observe"


def test_an_iteration_loop_with_no_group_is_group_none_though_it_closed_no_epoch(
    tmp_path: Path, folder: Path
) -> None:
    for pid in (10, 11):  # only steps: no DataLoader, so never an epoch nor a no_group record
        write_journal(folder, pid, {"kind": "device", "device": "cpu"}, sync(8, 1.5))
    observed = observe(tmp_path)
    assert observed["group"] == "none" and observed["trained_alone"] == 2, observed
    checks, why = verdicts(observed)
    assert checks["the ranks trained in one process group"].ok is False
    assert SYNC_CHECK not in checks  # the group check already says it
    assert why is not None and why.code == "trained-alone"


def test_a_group_that_never_syncs_fails_its_own_check_with_the_divergence_as_evidence(
    tmp_path: Path, folder: Path
) -> None:
    write_journal(folder, 10, group(0), sync(4, 1.0), sync(8, 3.1376e03), sync(16, 5.0))
    write_journal(folder, 11, group(1), sync(4, 1.0), sync(8, 6.8005e06))  # left before 16
    observed = observe(tmp_path)
    assert observed["group"] == "formed" and observed["sync"]["state"] == "never", observed
    assert observed["divergence"]["step"] == 8 and observed["divergence"]["diverged"]
    checks, why = verdicts(observed)
    assert checks["the ranks trained in one process group"].ok is True
    check = checks[SYNC_CHECK]
    assert check.ok is False and "rank 0 3137.6, rank 1 6.8005e+06" in check.detail, check
    assert why is not None and why.code == "no-grad-sync", why
    assert "DistributedDataParallel" in why.advice and "diverged" in why.cause
    assert [e.file for e in why.evidence] == ["run.json", "run.json"]


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param((sync(1, None, ddp=True), sync(16, None, ddp=True)), id="ddp"),
        pytest.param((sync(16, None, synced=16),), id="hand-averaged"),
    ],
)
def test_a_group_that_syncs_passes(
    tmp_path: Path, folder: Path, lines: tuple[dict[str, Any], ...]
) -> None:
    write_journal(folder, 10, group(0), *lines)
    write_journal(folder, 11, group(1), *lines)
    observed = observe(tmp_path)
    assert observed["sync"]["state"] == "synchronised" and "divergence" not in observed
    checks, why = verdicts(observed)
    assert checks[SYNC_CHECK].ok is True
    assert why is not None and why.code == "completed"


def test_pipeline_stages_that_send_tensors_point_to_point_are_not_judged(
    tmp_path: Path, folder: Path
) -> None:
    for pid, rank in ((10, 0), (11, 1)):  # stage 0 sends activations, stage 1 gradients back
        write_journal(folder, pid, group(rank), {**sync(16, float(rank)), "p2p": True})
    observed = observe(tmp_path)
    assert observed["sync"]["state"] == "unknown" and "point to point" in observed["sync"]["reason"]
    checks, why = verdicts(observed)
    assert SYNC_CHECK not in checks
    assert why is not None and why.code == "completed"


def test_launchers_whose_spawned_ranks_form_worlds_of_their_own_are_split(
    tmp_path: Path, folder: Path
) -> None:
    for launcher in (1, 2):  # 2 launched, each spawns 2 that form a world of 2: twice
        spawn = {"kind": "spawn", "nprocs": 2, "launcher_rank": launcher - 1, "launcher_world": 2}
        write_journal(folder, launcher, spawn)
        for rank in (0, 1):
            write_journal(folder, 10 * launcher + rank, group(rank), sync(4, None, ddp=True))
    observed = observe(tmp_path)
    assert observed["spawn"] == {"launchers": 2, "nprocs": 2}
    assert observed["group"] == "split", observed
    assert observed["reason"] == (
        "the script spawned 2 processes in each of 2 launcher process(es); "
        "4 processes formed 2 separate groups of world size 2"
    )


def test_launchers_of_which_one_spawned_world_never_formed_are_split(
    tmp_path: Path, folder: Path
) -> None:
    # Both worlds on one port: the second launcher's ranks died with EADDRINUSE.
    for launcher in (1, 2):
        spawn = {"kind": "spawn", "nprocs": 2, "launcher_rank": launcher - 1, "launcher_world": 2}
        write_journal(folder, launcher, spawn)
    for rank in (0, 1):
        write_journal(folder, 10 + rank, group(rank), sync(4, None, ddp=True))
    observed = observe(tmp_path)
    assert observed["group"] == "split" and observed["reason"].endswith(
        "only 2 of those 4 processes joined a group (of world size 2)"
    ), observed


# -- real scripts under torchrun ---------------------------------------------------------------
def run_script(run_dir: Path, nproc: int, script: str, *args: str) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--master-port", str(free_port()), "-m", "ddp_tui.scriptrun", "--run-dir", str(run_dir),
        "--epochs", "1", "--world-size", str(nproc), "--backend", "gloo", "--",
        str(SCRIPTS / script), *args,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert not [r for r in records(run_dir) if r["kind"] == "note"]
    observed: dict[str, Any] = json.loads((run_dir / "run.json").read_text())["observed"]
    return observed


@pytest.mark.torch
def test_a_real_group_without_ddp_is_seen_never_syncing_and_diverging(tmp_path: Path) -> None:
    observed = run_script(tmp_path, 2, "group_without_ddp.py")
    assert observed["group"] == "formed" and observed["sync"]["state"] == "never", observed
    assert observed["sync"]["steps"] >= 16  # the records at steps 1, 2, 4, 8, 16 at least
    assert observed["divergence"]["diverged"] is True, observed["divergence"]


@pytest.mark.torch
def test_real_gradients_averaged_by_hand_are_seen_synchronised(tmp_path: Path) -> None:
    observed = run_script(tmp_path, 2, "group_without_ddp.py", "--average-grads")
    sync = observed["sync"]
    assert sync["state"] == "synchronised" and not sync["ddp"], sync
    # Every step, and never the logged [loss, count] all-reduce alone.
    assert sync["grad_sync_steps"] == sync["steps"] >= 16, sync


@pytest.mark.torch
def test_ranks_spawned_by_the_script_are_observed_as_the_group(tmp_path: Path) -> None:
    port = str(free_port())
    observed = run_script(
        tmp_path, 1, "spawn_ranks.py", "--multiprocessing-distributed", "--port", port
    )
    assert observed["spawn"] == {"launchers": 1, "nprocs": 2}, observed
    assert observed["group"] == "formed" and observed["world_size"] == 2, observed
    assert [r["rank"] for r in observed["ranks"]] == [0, 1]
    assert observed["reason"].startswith("the script spawned 2 processes in each of 1 launcher")
    assert observed["sync"]["state"] == "synchronised" and observed["sync"]["ddp"], observed
    # The launcher and both spawned ranks kept journals: sitecustomize ran in the children.
    journals = sorted((tmp_path / "observe").glob("*.jsonl"))
    assert len(journals) == 3
    # The spawned ranks take their stacks on demand (`ddp-tui stacks`), though they inherited
    # the launcher's mark of a process a rank started.
    ranks = [p.stem.rsplit("-", 1)[1] for p in journals if '"kind": "group"' in p.read_text()]
    live = [p.stem.rsplit("-", 1)[1] for p in (tmp_path / "stacks" / "live").glob("*.txt")]
    assert len(ranks) == 2 and set(ranks) <= set(live), (ranks, live)
