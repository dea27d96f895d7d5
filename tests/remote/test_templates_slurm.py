"""The job scripts against real Slurm (the 3-node test cluster in tests/fixtures/slurm_cluster.py).

``sbatch --test-only`` parses every ``#SBATCH`` line the way a real submission does and asks
the controller whether the allocation could start, without running anything. The golden specs
ask for hardware this cluster lacks (8 GPUs, 4 nodes, partition "gpu"), so each is fitted to the
cluster first (debug partition, at most 3 nodes x 2 fake GPUs, 4 CPUs), keeping its shape:
launcher, node count > 1, CPU or GPU, extra options.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.scheduler import PartitionInfo
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.sbatch_templates import render_preflight, render_training
from ddp_tui.spec import ExperimentSpec, validate, validate_for_cluster
from tests.fixtures.slurm_cluster import SlurmCluster
from tests.golden.specs import GOLDEN_DIR, GOLDEN_SPECS

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
#: sbatch's words when the *controller* refuses an allocation (``--test-only`` says
#: "allocation failure: ..."); sbatch parsed every option before asking it.
CONTROLLER_REFUSAL = re.compile(r"^allocation failure: |Batch job submission failed", re.M)


def fit(spec: ExperimentSpec, cluster: SlurmCluster) -> ExperimentSpec:
    """``spec`` on the test cluster's debug partition, same shape, within its limits."""
    lay = cluster.layout
    gpn = min(spec.gpus_per_node, lay.gpus_per_node)
    tasks = gpn if spec.launcher == "srun" else 1
    return spec.replace(
        partition=cluster.default_partition,
        account="",
        qos="",
        constraint="",
        nodes=min(spec.nodes, len(lay.nodes)),
        gpus_per_node=gpn,
        cpus_per_task=max(1, min(spec.cpus_per_task, lay.cpus_per_node // tasks)),
        mem="1000M" if spec.mem else "",
        time_limit="00:30:00",
        signal_lead_sec=min(spec.signal_lead_sec, 300),
    )


@pytest.fixture(scope="module")
def partitions(slurm_cluster: SlurmCluster) -> list[PartitionInfo]:
    return SlurmScheduler(LocalExecutor(), env=slurm_cluster.env).partitions()


def sbatch_test_only(cluster: SlurmCluster, script: Path) -> subprocess.CompletedProcess[str]:
    return cluster.run(["sbatch", "--test-only", str(script)])


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
@pytest.mark.parametrize("kind", ["training", "preflight"])
def test_fitted_golden_specs_pass_sbatch_test_only(
    slurm_cluster: SlurmCluster,
    partitions: list[PartitionInfo],
    tmp_path: Path,
    name: str,
    kind: str,
) -> None:
    spec = fit(GOLDEN_SPECS[name], slurm_cluster)
    assert validate(spec) == []
    assert validate_for_cluster(spec, partitions) == []
    render = render_training if kind == "training" else render_preflight
    script = tmp_path / "job.sbatch"
    script.write_text(render(spec, str(tmp_path)))
    res = sbatch_test_only(slurm_cluster, script)
    assert res.returncode == 0, res.stderr
    # "sbatch: Job 12 to start at 2025-... using 4 processors on nodes n[1-2] in partition debug"
    m = re.search(r"to start at \S+ using (\d+) processors on nodes (\S+)", res.stderr)
    assert m, res.stderr
    hosts = slurm_cluster.run(["scontrol", "show", "hostnames", m.group(2)]).stdout.split()
    assert len(hosts) == spec.nodes


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_golden_files_as_written_parse_in_sbatch(slurm_cluster: SlurmCluster, name: str) -> None:
    """The golden text itself: every option parses; only the controller may refuse the
    hardware this small cluster lacks (partition "gpu", 8 GPUs, 4 nodes)."""
    res = sbatch_test_only(slurm_cluster, GOLDEN_DIR / f"{name}.sbatch")
    assert res.returncode == 0 or CONTROLLER_REFUSAL.search(res.stderr), res.stderr


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"gpus_per_node": 4}, "gpus_per_node"),
        ({"nodes": 4}, "nodes"),
        ({"partition": "small", "nodes": 2, "time_limit": "5"}, "nodes"),
        ({"partition": "nosuch"}, "partition"),
    ],
)
def test_what_validation_refuses_sbatch_refuses_too(
    slurm_cluster: SlurmCluster,
    partitions: list[PartitionInfo],
    tmp_path: Path,
    changes: dict[str, object],
    field: str,
) -> None:
    spec = fit(GOLDEN_SPECS["1node_1gpu"], slurm_cluster).replace(**changes)
    assert [e.field for e in validate_for_cluster(spec, partitions)] == [field]
    script = tmp_path / "job.sbatch"
    script.write_text(render_training(spec, str(tmp_path)))
    res = sbatch_test_only(slurm_cluster, script)
    assert res.returncode != 0 and CONTROLLER_REFUSAL.search(res.stderr), res.stderr


def test_over_long_time_limit_is_refused_up_front_where_slurm_would_pend_forever(
    slurm_cluster: SlurmCluster, partitions: list[PartitionInfo], tmp_path: Path
) -> None:
    """Slurm accepts a job over the partition's MaxTime (without EnforcePartLimits) and leaves
    it PENDING with Reason=PartitionTimeLimit; validation says so before submitting."""
    spec = fit(GOLDEN_SPECS["1node_1gpu"], slurm_cluster).replace(
        partition="small", time_limit="00:20:00"
    )
    (err,) = validate_for_cluster(spec, partitions)
    assert err.field == "time_limit" and "00:10:00" in err.message
    script = tmp_path / "job.sbatch"
    script.write_text(render_training(spec, str(tmp_path)))
    res = slurm_cluster.run(["sbatch", "--parsable", str(script)])
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip().split(";")[0]
    try:
        # The scheduler sets the reason on its next pass; the deadline only bounds a hang.
        reason = ""
        deadline = time.monotonic() + 60
        while True:
            show = slurm_cluster.run(["scontrol", "-o", "show", "job", job_id]).stdout
            found = re.search(r"Reason=(\S+)", show)
            reason = found.group(1) if found else ""
            if reason == "PartitionTimeLimit" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert "JobState=PENDING" in show and reason == "PartitionTimeLimit", show
    finally:
        slurm_cluster.run(["scancel", job_id])


FAKE_TRAINER = """#!/bin/bash
# FAKE trainer (stands in for torchrun + trainer, one per srun task): the first attempt waits
# for SIGTERM, then "checkpoints" and asks for a requeue like the real one (rank 0 writes
# requeue.request; exit 3); the second attempt finishes.
rank="${SLURM_PROCID:-0}"
if [ -e "attempt1.$rank" ]; then echo "fake trainer $rank: resumed and finished"; exit 0; fi
touch "attempt1.$rank"
on_term() {
    echo "fake trainer $rank: SIGTERM, checkpointing"
    touch "term.$rank"
    if [ "$rank" = 0 ]; then touch requeue.request; fi
    exit 3
}
trap on_term TERM
touch "started.$rank"
while :; do sleep 0.1; done
"""


@pytest.mark.parametrize(
    ("nodes", "launcher"), [(1, "torchrun"), (2, "torchrun"), (2, "srun")], ids=str
)
def test_pre_timeout_signal_checkpoints_and_requeues_on_slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path, nodes: int, launcher: str
) -> None:
    """The batch shell's USR2 (what --signal=B:USR2@lead delivers) reaches every trainer
    process as SIGTERM (never SIGKILL), and the script requeues the job itself; the log keeps
    both attempts."""
    fake = tmp_path / "fake_trainer"
    fake.write_text(FAKE_TRAINER)
    fake.chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = ExperimentSpec(
        name="requeue-me",
        nodes=nodes,
        launcher=launcher,
        device="cpu",
        backend="gloo",
        partition=slurm_cluster.default_partition,
        time_limit="00:05:00",
        cpus_per_task=1,
        python=str(fake),
    )
    tasks = nodes  # one per node: torchrun per node, or srun with 1 process per node
    script = run_dir / "job.sbatch"
    script.write_text(render_training(spec, str(run_dir)))
    res = slurm_cluster.run(["sbatch", "--parsable", str(script)])
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip().split(";")[0]
    state = ""
    try:
        deadline = time.monotonic() + 60
        while not all((run_dir / f"started.{r}").exists() for r in range(tasks)):
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.1)
        # What Slurm does lead seconds before the limit: USR2 to the batch shell only.
        sig = slurm_cluster.run(["scancel", "--batch", "--signal=USR2", job_id])
        assert sig.returncode == 0, sig.stderr
        deadline = time.monotonic() + 60
        while True:
            show = slurm_cluster.run(["scontrol", "-o", "show", "job", job_id]).stdout
            if "JobState=PENDING" in show and "Restarts=1" in show:
                break
            assert time.monotonic() < deadline, f"never requeued: {show}"
            time.sleep(0.2)
        # No `scontrol update StartTime=now`: a requeued job released before its old job
        # credential expires can be killed at launch ("Job credential revoked"). The test
        # cluster's short cred_expire restarts it by itself in about 12 s.
        state = slurm_cluster.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED"}, 120)
    finally:
        slurm_cluster.run(["scancel", job_id])
    out = (run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    assert state == "COMPLETED", out
    for rank in range(tasks):
        assert (run_dir / f"term.{rank}").exists(), f"rank {rank} got no SIGTERM:\n{out}"
        assert f"fake trainer {rank}: resumed and finished" in out
    assert f"requeueing job {job_id}" in out
    assert out.count(f"[ddp-tui] training job {job_id} ") == 2, out  # --open-mode=append


@pytest.mark.torch
def test_two_node_gloo_script_really_runs_across_two_hosts(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The multi-node recipe end to end: srun per node, torchrun with c10d rendezvous on the
    first host, the real trainer on synthetic data."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"no {VENV_PYTHON}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "code").symlink_to(REPO / "src")
    spec = ExperimentSpec(
        name="two-node-gloo",
        model="mlp",
        dataset="synthetic",
        synthetic_samples=256,
        synthetic_val_samples=64,
        synthetic_shape="1,8,8",
        nodes=2,
        gpus_per_node=1,
        device="cpu",
        backend="gloo",
        partition=slurm_cluster.default_partition,
        time_limit="00:10:00",
        cpus_per_task=1,
        epochs=1,
        batch_per_gpu=32,
        workers=0,
        python=str(VENV_PYTHON),
        extra_trainer_args=("--timeout-sec", "120"),
    )
    script = run_dir / "job.sbatch"
    script.write_text(render_training(spec, str(run_dir)))
    res = slurm_cluster.run(["sbatch", "--parsable", str(script)])
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip().split(";")[0]
    state = slurm_cluster.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, 240)
    out = (run_dir / f"slurm-{job_id}.out").read_text(errors="replace")
    err = (run_dir / f"slurm-{job_id}.err").read_text(errors="replace")
    assert state == "COMPLETED", f"{state}\n{out}\n{err}"
    port = 20000 + int(job_id) % 10000
    assert re.search(rf"\[ddp-tui\] rendezvous=n\d:{port}\b", out), out
    run = json.loads((run_dir / "run.json").read_text())
    assert run["world_size"] == 2 and run["backend"] == "gloo"
    assert len(set(run["hosts"])) == 2, run
    # Threads from Slurm's allocation (one CPU a node), however many the node has: torch's.
    assert (run["cpu"]["cores"], run["cpu"]["threads"]) == (1, 1), run["cpu"]
    assert "[ddp-tui] threads per rank=1 (1 of this node's" in out, out
