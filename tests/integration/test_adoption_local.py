"""Bringing in a job ddp-tui did not submit, on the real local scheduler: a job queued by hand
from a directory whose name holds a space and a quote becomes a run (its directory, its script,
its attempt, links to its logs), is followed through the run, ends, and is retried from the
run's own ``job.sbatch``, which runs the original again from that directory; what cannot be
brought in is refused, naming why; ``ddp-tui adopt`` prints the new run. Real processes; the
job is held running by a file that exists until the test removes it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.runs.adoption import AdoptionRefused
from tests.integration.test_cli import cli
from tests.remote.local_env import wait_for

BY_HAND = """#!/bin/bash
#SBATCH --job-name='my job!'
#SBATCH --output=hand-%j.out
#SBATCH --error=hand-%j.err
echo "adopt-me out"
echo "adopt-me err" >&2
pwd
while [ -e hold ]; do sleep 0.05; done
"""


@pytest.fixture
def cluster(local_jobs_facade: Cluster) -> Cluster:
    return local_jobs_facade


def _by_hand(cluster: Cluster, work: Path, *, hold: bool) -> str:
    """A job queued without ddp-tui, from ``work``."""
    work.mkdir(exist_ok=True)
    (work / "job.sh").write_text(BY_HAND)
    if hold:
        (work / "hold").touch()
    return cluster.scheduler.submit(str(work / "job.sh"), str(work))


def _state(cluster: Cluster, run_id: str) -> JobState:
    return next(v.state for v in cluster.refresh().runs if v.run_id == run_id)


def test_a_job_by_hand_brought_in_followed_and_retried(cluster: Cluster, tmp_path: Path) -> None:
    work = tmp_path / "it's my dir"
    job_id = _by_hand(cluster, work, hold=True)
    wait_for(lambda: cluster.job_state(job_id) is JobState.RUNNING, what="the job running")

    view = cluster.adopt_job(job_id)
    assert view.kind == "adopted" and view.name == "my_job" and view.job_id == job_id
    run = Path(view.run_dir)
    doc = json.loads((run / "spec.json").read_text())
    assert doc["kind"] == "adopted" and doc["spec"]["name"] == "my_job"
    assert (doc["spec"]["entry"], doc["spec"]["script"]) == ("script", "original.sbatch")
    adopted = doc["adopted"]
    assert adopted["job_id"] == job_id and adopted["work_dir"] == str(work)
    assert adopted["stdout"] == str(work / f"hand-{job_id}.out")
    assert adopted["stderr"] == str(work / f"hand-{job_id}.err") and adopted["name"] == "my job!"
    assert (run / "original.sbatch").read_text() == BY_HAND
    assert (run / "original.sbatch").stat().st_mode & 0o777 == 0o755
    (attempt,) = [json.loads(line) for line in (run / "jobs.jsonl").read_text().splitlines()]
    assert (attempt["job_id"], attempt["attempt"], attempt["retry_of"]) == (job_id, 1, None)
    assert os.readlink(run / f"slurm-{job_id}.out") == adopted["stdout"]
    assert os.readlink(run / f"slurm-{job_id}.err") == adopted["stderr"]
    assert not (run / "code").exists()

    # A run now: listed as one, not among the other jobs, followed through its links.
    every = cluster.user_jobs()
    assert job_id not in {j.job_id for j in every.foreign}
    assert _state(cluster, view.run_id) is JobState.RUNNING
    seen: list[str] = []

    def followed() -> bool:
        seen.extend(cluster.follow(view.run_id).out_lines)
        return "adopt-me out" in seen

    wait_for(followed, what="its first line, read through the run")

    # What cannot be brought in, each refused naming why.
    with pytest.raises(AdoptionRefused, match=f"attempt of run {view.run_id} already"):
        cluster.adopt_job(job_id)
    with pytest.raises(AdoptionRefused, match="local scheduler does not know job 999"):
        cluster.adopt_job("999")
    with pytest.raises(AdoptionRefused, match="not a job id"):
        cluster.adopt_job("12.batch")
    assert len(cluster.refresh().runs) == 1  # nothing made by a refusal

    (work / "hold").unlink()
    wait_for(lambda: _state(cluster, view.run_id) is JobState.COMPLETED, what="its end")
    retried = cluster.retry(view.run_id)
    again = retried.job_id
    assert again is not None and again != job_id and len(retried.attempts) == 2
    wait_for(lambda: _state(cluster, view.run_id) is JobState.COMPLETED, what="the retry's end")
    out = (run / f"slurm-{again}.out").read_text().splitlines()
    assert out == ["adopt-me out", str(work)]  # the original, run again from its directory
    assert (run / f"slurm-{again}.err").read_text().splitlines() == ["adopt-me err"]
    assert cluster.verify(view.run_id)[0].ok  # job completed


def test_the_first_attempts_logs_read_through_the_run(cluster: Cluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    job_id = _by_hand(cluster, work, hold=False)
    wait_for(lambda: cluster.job_state(job_id) is JobState.COMPLETED, what="the job's end")
    view = cluster.adopt_job(job_id)
    detail = cluster.follow(view.run_id)
    assert detail.out_lines == ["adopt-me out", str(work)]
    assert detail.err_lines == ["adopt-me err"]


def test_ddp_tui_adopt_prints_the_new_run(cluster: Cluster, tmp_path: Path) -> None:
    job_id = _by_hand(cluster, tmp_path / "work", hold=False)
    state = str(tmp_path / "state")
    config = f'[profiles.local]\nscheduler = "local"\nlocal_state_dir = "{state}"\n'
    res = cli(tmp_path, "adopt", job_id, config=config)
    run_id, job, run_dir = res.stdout.splitlines()[0].split("\t")
    assert job == f"job {job_id}" and Path(run_dir, "original.sbatch").is_file()
    assert f"ddp-tui watch {run_id}" in res.stdout and f"ddp-tui retry {run_id}" in res.stdout
    again = cli(tmp_path, "adopt", job_id, "--json", config=config, check=False)
    assert again.returncode == 1
    assert f"job {job_id} is an attempt of run {run_id} already" in again.stderr
    rows = json.loads(cli(tmp_path, "ls", "--all", "--json", config=config).stdout)
    assert [(r["ours"], r.get("run_id")) for r in rows if r.get("job_id") == job_id] == [
        (True, run_id)
    ]
    second = _by_hand(cluster, tmp_path / "other", hold=False)
    made = json.loads(cli(tmp_path, "adopt", second, "--json", config=config).stdout)
    assert (made["job_id"], made["kind"], made["name"]) == (second, "adopted", "my_job")
    assert cli(tmp_path, "adopt", "--help", config=config).stdout.count("original.sbatch") == 1
