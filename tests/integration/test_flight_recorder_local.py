"""A real NCCL run's directory on the local scheduler, holding FAKE flight recorder dumps.

There is no GPU here, so no NCCL collective can time out: the run is a real job of a user's
script with ``backend="nccl"`` (the job script checks this machine's real torch and turns
the recorder on, pointing it into the run directory) whose script exits 1 at once; the test
writes dumps in torch's format where the recorder would have
(tests/helpers/fake_flight_recorder.py) before the job ends. The facade's diagnosis, the
view's and ``ddp-tui why`` then name the collective and the rank that never entered it.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from tests.helpers.fake_flight_recorder import fake_hang, write_fake_dumps
from tests.integration.story import diagnosed, logs, tiny_script_spec, wait_state
from tests.integration.test_diagnosis_local import ENDED, open_cluster, why

pytestmark = pytest.mark.torch


def test_fake_dumps_in_a_real_nccl_run_name_the_hang_in_diagnose_and_why(tmp_path: Path) -> None:
    script = tmp_path / "proj" / "quits.py"
    script.parent.mkdir()
    script.write_text("import sys\nprint('step 1', flush=True)\nsys.exit(1)\n")
    # The pre-queue check would ask this Python for CUDA; the job needs none to exit 1.
    cluster = open_cluster(tmp_path, check_python=False)
    spec = tiny_script_spec(script, name="nccl-hang", backend="nccl", device="cuda")
    assert spec.world_size == 2
    run = cluster.submit(cluster.plan(spec))
    assert run.job_id is not None
    # Written before any refresh can see the end: the table's diagnosis reads them too.
    write_fake_dumps(run.run_dir, run.job_id, fake_hang(2, absent=[1]))
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.FAILED
    out, _err = logs(done)
    prefix = f"{run.run_dir}/nccl_trace/{run.job_id}/rank_"
    assert (
        f"[ddp-tui] NCCL flight recorder: on (torch {version('torch')}, 2000 entries per rank); "
        f"a collective timeout dumps to {prefix}<rank>"
    ) in out

    diagnosis = diagnosed(cluster, done, "nccl-hang")
    assert diagnosis.short == "rank 1 missed all_reduce #412"
    assert diagnosis.cause.startswith(
        "NCCL all_reduce #412 on group 0 (default_pg) did not complete: rank 1 never entered "
        "it (last: all_reduce #411 completed, in train_step at train.py:88)"
    )
    assert [e.file for e in diagnosis.evidence] == [
        f"nccl_trace/{run.job_id}/rank_0",
        f"nccl_trace/{run.job_id}/rank_1",
    ]

    res = why(tmp_path, run.run_id)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "rank 1 never entered it" in res.stdout
    assert f"nccl_trace/{run.job_id}/rank_1: rank 1 last: all_reduce #411" in res.stdout
