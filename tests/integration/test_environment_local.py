"""environment venv on the local scheduler: a real job (this project's own venv, a script that
prints what it was given) whose submitting process has variables that must not leak into it.

The local scheduler honours the script's ``#SBATCH --export=NONE`` as Slurm does: the job
starts from a login's few variables, and the venv's activation is what gives it its Python.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import ExperimentSpec
from tests.integration.story import wait_state

pytestmark = pytest.mark.torch  # torchrun starts the script

_PRINT_ENV = """\
import json, os, sys
names = ("LEAKME", "VIRTUAL_ENV", "PYTHONPATH", "DDP_TUI_RUN_DIR", "PATH")
seen = {n: os.environ.get(n) for n in names}
seen["prefix"] = sys.prefix
with open(os.path.join(os.environ["DDP_TUI_RUN_DIR"], "seen.json"), "w") as f:
    json.dump(seen, f)
"""


def test_a_venv_job_sees_its_venv_and_nothing_of_the_submit_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = Path(sys.prefix)
    assert (venv / "pyvenv.cfg").exists() and (venv / "bin" / "activate").exists()
    script = tmp_path / "proj" / "print_env.py"
    script.parent.mkdir()
    script.write_text(_PRINT_ENV)
    # What a user's shell may carry: none of it may reach the job.
    monkeypatch.setenv("LEAKME", "1")
    monkeypatch.setenv("VIRTUAL_ENV", "/fake/venv")
    monkeypatch.setenv("PYTHONPATH", "/leak")
    cluster = Cluster.open(
        Profile(scheduler="local", runs_root=str(tmp_path / "runs")),
        local_state_dir=str(tmp_path / "state"),
    )
    spec = ExperimentSpec(
        name="venv-env",
        entry="script",
        script=str(script),
        metrics="auto",
        epochs=None,
        nodes=1,
        gpus_per_node=1,
        device="cpu",
        backend="gloo",
        cpus_per_task=1,
        time_limit="00:05:00",
        telemetry_sec=0,
        environment="venv",
        python=str(venv / "bin" / "python"),
    )
    plan = cluster.plan(spec)
    assert plan.ok, plan.errors
    assert "#SBATCH --export=NONE\n" in plan.script
    run = cluster.submit(plan)
    done = wait_state(cluster, run.run_id, JobState.COMPLETED, JobState.FAILED, timeout=120)
    detail = cluster.follow(run.run_id)
    assert done.state is JobState.COMPLETED, detail.err_lines[-20:]
    seen = json.loads((Path(plan.run_dir) / "seen.json").read_text())
    assert seen["LEAKME"] is None
    assert seen["VIRTUAL_ENV"] == str(venv)  # from its activation, not the submit shell
    assert "/leak" not in (seen["PYTHONPATH"] or "")
    assert seen["PATH"].startswith(f"{venv}/bin:")
    assert seen["prefix"] == str(venv)
    assert seen["DDP_TUI_RUN_DIR"] == plan.run_dir
