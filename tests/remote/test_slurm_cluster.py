"""SlurmScheduler against the real multi-node test cluster (tests/fixtures/slurm_cluster.py).

Each node n1..n3 is its own network namespace with its own hostname and address, so a
job that prints its hostname really ran on another "machine".
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import (
    Batch,
    BatchResult,
    CommandResult,
    Executor,
    FileStat,
    LocalExecutor,
)
from ddp_tui.remote.backends.scheduler import JobStatus, SchedulerError, SchedulerUnavailable
from ddp_tui.remote.backends.slurm import AccountingUnavailable, SlurmScheduler
from ddp_tui.remote.backends.states import JobState
from tests.fixtures.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slurm

VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"


class RecordingExecutor(Executor):
    """The real LocalExecutor, counting the commands it runs."""

    def __init__(self) -> None:
        self.inner = LocalExecutor()
        self.commands: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        self.commands.append(tuple(argv))
        return self.inner.run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        return super().run_batch(batch, timeout=timeout)

    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        return self.inner.read_range(path, offset, max_bytes)

    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.inner.write_atomic(path, data, mode)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def stat(self, path: str) -> FileStat | None:
        return self.inner.stat(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def remove_tree(self, path: str) -> None:
        self.inner.remove_tree(path)

    def upload_tree(self, local_src: Path, dst: str) -> None:
        self.inner.upload_tree(local_src, dst)

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        return self.inner.upload_files(files, dst)

    def tools(self) -> list[str]:
        """The Slurm tool of each command (the argv starts with ``env -u ...``)."""
        return [next(a for a in argv if re.fullmatch(r"s[a-z]+", a)) for argv in self.commands]


@pytest.fixture
def sched(slurm_cluster: SlurmCluster) -> Iterator[SlurmScheduler]:
    s = SlurmScheduler(LocalExecutor())
    yield s
    slurm_cluster.run(["scancel", "--me"])  # nothing of this test keeps running


def write_script(run_dir: Path, body: str, *sbatch: str) -> str:
    lines = ["#!/bin/bash", "#SBATCH --output=slurm-%j.out", "#SBATCH --error=slurm-%j.err"]
    lines += [f"#SBATCH {opt}" for opt in sbatch]
    path = run_dir / "job.sbatch"
    path.write_text("\n".join([*lines, "set -eu", body, ""]))
    return str(path)


def wait_for(
    sched: SlurmScheduler, job_id: str, states: Iterable[JobState], timeout: float = 60.0
) -> JobStatus:
    wanted = set(states)
    deadline = time.monotonic() + timeout
    status: JobStatus | None = None
    while time.monotonic() < deadline:
        status = sched.poll([job_id]).get(job_id)
        if status is not None and status.state in wanted:
            return status
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} is {status}, wanted {sorted(s.value for s in wanted)}")


def test_sinfo_sees_partitions_nodes_and_gpus(sched: SlurmScheduler) -> None:
    parts = {p.name: p for p in sched.partitions()}
    assert set(parts) == {"debug", "small"}
    assert parts["debug"].is_default and parts["debug"].nodes == 3
    assert parts["debug"].gpus_per_node == 2 and parts["debug"].max_time_min == 60
    assert parts["small"].max_nodes == 1 and parts["small"].max_time_min == 10
    assert {n.name for n in sched.nodes()} == {"n1", "n2", "n3"}
    assert re.fullmatch(r"Slurm \d+\.\d+\.\d+", sched.version())


def test_two_node_job_runs_on_two_hosts_and_is_accounted(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    script = write_script(
        tmp_path,
        "srun bash -c 'echo \"task $SLURM_PROCID on $(hostname)\"'\nexit 0",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--job-name='two nodes'",
    )
    job_id = sched.submit(script, str(tmp_path))
    assert job_id.isdigit()
    status = wait_for(sched, job_id, {JobState.COMPLETED, JobState.FAILED}, timeout=60)
    out = (tmp_path / f"slurm-{job_id}.out").read_text()
    hosts = set(re.findall(r"task \d on (\S+)", out))
    assert len(hosts) == 2 and hosts <= {"n1", "n2", "n3"}, out
    assert status.state is JobState.COMPLETED and status.exit_code == 0
    # Not the name: for a job this short sacct may first hold a placeholder row
    # ("allocation", no partition) until slurmdbd has the job's start record.
    assert status.nodes == 2
    steps = sched.steps(job_id)
    assert {f"{job_id}.batch", f"{job_id}.0"} <= set(steps)
    assert steps[f"{job_id}.0"].nodes == 2
    summary = sched.accounting(job_id)
    assert "COMPLETED" in summary and f"{job_id}.0" in summary


def test_failed_job_has_its_exit_code(sched: SlurmScheduler, tmp_path: Path) -> None:
    job_id = sched.submit(write_script(tmp_path, "exit 3"), str(tmp_path))
    status = wait_for(sched, job_id, {JobState.FAILED}, timeout=60)
    assert status.exit_code == 3


def test_squeue_is_right_under_a_hostile_environment(
    sched: SlurmScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "evil|na\x1fme $(touch /tmp/pwned-ddp-tui) %j"
    job_id = sched.submit(
        write_script(tmp_path, "sleep 300", f"--job-name='{name}'"), str(tmp_path)
    )
    wait_for(sched, job_id, {JobState.RUNNING})
    for key, value in {
        "SQUEUE_FORMAT": "%i %j",
        "SQUEUE_FORMAT2": "jobid:3,name:2",
        "SQUEUE_SORT": "-i",
        "SQUEUE_STATES": "CD",
        "SQUEUE_USERS": "nobody",
        "SLURM_TIME_FORMAT": "%s",
        "SACCT_FORMAT": "JobID",
        "SINFO_FORMAT": "%N",
        "SCANCEL_INTERACTIVE": "1",
    }.items():
        monkeypatch.setenv(key, value)
    status = sched.poll([job_id])[job_id]
    assert status.state is JobState.RUNNING and status.name == name
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", status.start)
    assert {p.name for p in sched.partitions()} == {"debug", "small"}
    sched.cancel(job_id)  # would prompt with SCANCEL_INTERACTIVE if it were not cleared
    assert wait_for(sched, job_id, {JobState.CANCELLED}).state is JobState.CANCELLED
    assert not Path("/tmp/pwned-ddp-tui").exists()


def test_cancel_a_running_job(
    sched: SlurmScheduler, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_id = sched.submit(write_script(tmp_path, "sleep 300"), str(tmp_path))
    wait_for(sched, job_id, {JobState.RUNNING})
    sched.cancel(job_id)
    status = wait_for(sched, job_id, {JobState.CANCELLED})
    assert status.raw_state.startswith("CANCELLED")
    assert slurm_cluster.wait_sacct(job_id, {"CANCELLED"}, timeout=30) == "CANCELLED"


def test_requeue_puts_a_running_job_back_and_it_runs_again(
    sched: SlurmScheduler, tmp_path: Path
) -> None:
    job_id = sched.submit(write_script(tmp_path, "sleep 300"), str(tmp_path))
    wait_for(sched, job_id, {JobState.RUNNING})
    sched.requeue(job_id)
    status = wait_for(sched, job_id, {JobState.PENDING}, timeout=30)
    assert status.reason == "BeginTime"  # held for cred_expire + 1 s (10 s on this cluster)
    assert sched.show_job(job_id)["Restarts"] == "1"
    again = wait_for(sched, job_id, {JobState.RUNNING}, timeout=60)
    assert again.job_id == job_id
    assert "REQUEUED" in sched.accounting(job_id)


def test_gpu_requests(sched: SlurmScheduler, tmp_path: Path) -> None:
    ids = {}
    for n in (1, 2):
        d = tmp_path / f"gpu{n}"
        d.mkdir()
        body = 'echo "CVD=$CUDA_VISIBLE_DEVICES"'
        ids[n] = (d, sched.submit(write_script(d, body, f"--gres=gpu:{n}"), str(d)))
    for n, (d, job_id) in ids.items():
        wait_for(sched, job_id, {JobState.COMPLETED})
        out = (d / f"slurm-{job_id}.out").read_text()
        assert out.strip() == f"CVD={','.join(str(i) for i in range(n))}"
    too_many = tmp_path / "gpu3"
    too_many.mkdir()
    with pytest.raises(SchedulerError) as err:
        sched.submit(write_script(too_many, "true", "--gres=gpu:3"), str(too_many))
    assert not isinstance(err.value, SchedulerUnavailable)
    assert "Requested node configuration is not available" in err.value.message


def test_bad_job_ids_are_typed_errors(sched: SlurmScheduler) -> None:
    with pytest.raises(SchedulerError, match="Invalid job id specified"):
        sched.show_job("999999")
    with pytest.raises(SchedulerError, match="Invalid job id specified"):
        sched.requeue("999999")
    assert sched.poll(["999999"]) == {}


def test_poll_costs_at_most_two_commands(sched: SlurmScheduler, tmp_path: Path) -> None:
    ids = []
    for i in range(6):
        d = tmp_path / f"j{i}"
        d.mkdir()
        body = "true" if i % 2 else "sleep 300"
        ids.append(sched.submit(write_script(d, body), str(d)))
    for job_id in ids[1::2]:
        wait_for(sched, job_id, {JobState.COMPLETED})
    rec = RecordingExecutor()
    counted = SlurmScheduler(rec)
    statuses = counted.poll(ids)
    assert rec.tools() == ["squeue", "sacct"]
    assert all(statuses[j].state is JobState.COMPLETED for j in ids[1::2])
    assert all(statuses[j].state.is_active for j in ids[0::2])
    # Every job still in the queue: squeue alone answers.
    rec.commands.clear()
    counted.poll(ids[0::2])
    assert rec.tools() == ["squeue"]
    # The batched form, for one SSH round trip: the same two commands, answered together.
    rec.commands.clear()
    answers = rec.run_batch(Batch(commands=list(counted.poll_commands(ids))))
    assert rec.tools() == ["squeue", "sacct"]
    batched = counted.parse_poll(ids, answers.commands)
    assert {j: s.state for j, s in batched.items()} == {j: s.state for j, s in statuses.items()}
    assert counted.poll([]) == {} and len(rec.commands) == 2


def test_accounting_down_keeps_the_queue_answer(
    sched: SlurmScheduler, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = sched.submit(write_script(tmp_path, "true"), str(tmp_path))
    wait_for(sched, done, {JobState.COMPLETED})
    d = tmp_path / "running"
    d.mkdir()
    running = sched.submit(write_script(d, "sleep 300"), str(d))
    wait_for(sched, running, {JobState.RUNNING})
    slurm_cluster.stop_accounting()
    try:
        with pytest.raises(AccountingUnavailable) as err:
            sched.poll([done, running])
        assert isinstance(err.value, SchedulerError)
        assert "Connection refused" in err.value.message
        assert err.value.partial[running].state is JobState.RUNNING
    finally:
        slurm_cluster.start_accounting()
    assert wait_for(sched, done, {JobState.COMPLETED}).exit_code == 0


def test_controller_down_is_reported_and_recovers(
    sched: SlurmScheduler, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_id = sched.submit(write_script(tmp_path, "sleep 300"), str(tmp_path))
    wait_for(sched, job_id, {JobState.RUNNING})
    slurm_cluster.stop_controller()
    try:
        t0 = time.monotonic()
        with pytest.raises(SchedulerUnavailable) as err:
            sched.poll([job_id])
        assert "Unable to contact slurm controller" in err.value.message
        # A client timeout shorter than the tools' own retrying is a typed error too.
        impatient = SlurmScheduler(LocalExecutor(), timeout=2)
        with pytest.raises(SchedulerUnavailable, match="did not answer within 2 s"):
            impatient.submit(write_script(tmp_path, "true"), str(tmp_path))
        assert time.monotonic() - t0 < 30
    finally:
        slurm_cluster.start_controller()
    # The job survived the outage and the scheduler works again.
    assert wait_for(sched, job_id, {JobState.RUNNING}, timeout=30).job_id == job_id
    assert {p.name for p in sched.partitions()} == {"debug", "small"}


@pytest.mark.torch
def test_ddp_recipe_two_nodes_torchrun_c10d_gloo(sched: SlurmScheduler, tmp_path: Path) -> None:
    """The multi-node recipe for the templates: one srun task per node, each running
    torchrun with c10d rendezvous at the job's first host and a port from the job id."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"{VENV_PYTHON} is missing")
    probe = tmp_path / "allreduce.py"
    probe.write_text(
        "import socket, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "x = torch.ones(1) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(x)\n"
        "print(f'rank {dist.get_rank()}/{dist.get_world_size()} on {socket.gethostname()}"
        " sum {int(x.item())}', flush=True)\n"
        # No gloo teardown: a finished gloo job can abort there (SIGABRT) and fail the job.
        "dist.barrier()\n"
        "import os, sys; sys.stdout.flush(); os._exit(0)\n"
    )
    body = f"""\
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export TMPDIR="$PWD/tmp" && mkdir -p "$TMPDIR"  # torchrun leaves torchelastic_* dirs there
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
PORT=$((20000 + SLURM_JOB_ID % 10000))
echo "rendezvous $HEAD:$PORT"
srun --kill-on-bad-exit=1 --wait=60 --nodes=2 --ntasks-per-node=1 \\
  {VENV_PYTHON} -m torch.distributed.run --nnodes 2 --nproc-per-node 1 \\
    --rdzv-backend c10d --rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$SLURM_JOB_ID" \\
    {probe}"""
    script = write_script(tmp_path, body, "--nodes=2", "--ntasks-per-node=1", "--time=00:05:00")
    job_id = sched.submit(script, str(tmp_path))
    status = wait_for(sched, job_id, {JobState.COMPLETED, JobState.FAILED}, timeout=180)
    out = (tmp_path / f"slurm-{job_id}.out").read_text()
    err = (tmp_path / f"slurm-{job_id}.err").read_text()
    assert status.state is JobState.COMPLETED, out + err
    assert f"rendezvous n1:{20000 + int(job_id) % 10000}" in out
    ranks = re.findall(r"rank (\d)/2 on (\S+) sum 3", out)
    assert sorted(ranks) == [("0", "n1"), ("1", "n2")], out + err
