"""Every job of the user on the local scheduler: a job ddp-tui did not submit (queued on the
same state directory, outside any run) is listed beside the runs, its log is read by offset,
it is cancelled by its job id, and once ended it is listed within the window only; ``ls --all``
shows it as not ddp-tui's, and a bad ``--since`` is refused naming the option. Real scheduler,
real processes; the job is held running by a file that exists until the test cancels it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.cli.entry import main
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import UserJob, parse_since
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import tiny_spec
from tests.integration.test_cli import cli
from tests.remote.local_env import wait_for

FOREIGN = """#!/bin/bash
#SBATCH --job-name=by-hand
#SBATCH --output=hand-%j.out
echo "hello from a job ddp-tui did not submit"
trap 'echo "got TERM"; exit 0' TERM
while [ -e hold ]; do sleep 0.05; done
"""


@pytest.fixture
def cluster(local_jobs_facade: Cluster) -> Cluster:
    return local_jobs_facade


def _foreign(cluster: Cluster, job_id: str) -> UserJob | None:
    return next((j for j in cluster.user_jobs().foreign if j.job_id == job_id), None)


def test_a_job_ddp_tui_did_not_submit_beside_the_runs(cluster: Cluster, tmp_path: Path) -> None:
    run = cluster.submit(cluster.plan(tiny_spec(name="ours", epochs=1)))
    hand = tmp_path / "by-hand"
    hand.mkdir()
    (hand / "job.sh").write_text(FOREIGN)
    (hand / "hold").touch()
    job_id = cluster.scheduler.submit(str(hand / "job.sh"), str(hand))
    wait_for(lambda: cluster.scheduler.poll([job_id])[job_id].state is JobState.RUNNING)

    every = cluster.user_jobs()
    assert [v.run_id for v in every.snapshot.runs] == [run.run_id]
    assert run.job_id not in {j.job_id for j in every.foreign}  # a run stays a run
    job = next(j for j in every.foreign if j.job_id == job_id)
    assert job.state is JobState.RUNNING and job.name == "by-hand"
    assert (job.partition, job.nodes, job.source) == ("local", 1, "local")
    assert job.stdout == str(hand / f"hand-{job_id}.out") and job.work_dir == str(hand)
    assert every.scheduler_calls == 0  # its job files: no command
    assert cluster.job_script(job_id) == FOREIGN  # the script it was submitted with

    # Its log, whole lines from the end, then what it appends after that offset.
    wait_for(lambda: bool(cluster.job_log(job_id).lines), what="the job's first line")
    log = cluster.job_log(job_id)
    assert log.lines == ("hello from a job ddp-tui did not submit",) and log.path == job.stdout
    cluster.cancel_job(job_id)
    wait_for(lambda: cluster.job_state(job_id) is JobState.CANCELLED, what="cancelled")
    new = cluster.job_log(job_id, offset=log.offset).lines
    assert new[-1] == "got TERM" and log.lines[0] not in new  # only what came after

    ended = _foreign(cluster, job_id)
    assert ended is not None and ended.state is JobState.CANCELLED and ended.end_time
    in_future = cluster.user_jobs(parse_since("2999-01-01"))
    assert job_id not in {j.job_id for j in in_future.foreign}  # ended before the window


def test_cancel_and_logs_refuse_what_is_no_job_id(cluster: Cluster) -> None:
    for bad in ("", "12a", "-1", "12,13", "12.batch", "12_[1-3]"):
        with pytest.raises(SchedulerError, match=r"not a job id: .*1234, or one array task"):
            cluster.cancel_job(bad)
        with pytest.raises(SchedulerError, match="not a job id"):
            cluster.job_log(bad)
    unknown = cluster.job_log("999")
    assert unknown.path is None and "no local job 999" in unknown.source


def test_ls_all_refuses_a_bad_since_naming_the_option_and_the_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--scheduler", "local", "ls", "--all", "--since", "last week"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--since" in err and "'last week' is not a time" in err
    assert "30m, 12h, 7d, 2w" in err and "2026-11-20" in err


def test_ls_all_on_the_local_scheduler(cluster: Cluster, tmp_path: Path) -> None:
    """``ddp-tui ls --all --json`` and its table: the run as ddp-tui's, the other job not."""
    run = cluster.submit(cluster.plan(tiny_spec(name="ours", epochs=1)))
    hand = tmp_path / "by-hand"
    hand.mkdir()
    (hand / "job.sh").write_text("#!/bin/bash\n#SBATCH --job-name=by-hand\necho hi\n")
    job_id = cluster.scheduler.submit(str(hand / "job.sh"), str(hand))
    state = str(tmp_path / "state")
    rows = json.loads(cli(tmp_path, "ls", "--all", "--json", config=_local(state)).stdout)
    assert {(r["ours"], r.get("run_id") or r["job_id"]) for r in rows} >= {
        (True, run.run_id),
        (False, job_id),
    }
    foreign = next(r for r in rows if not r["ours"])
    assert set(foreign) >= {"job_id", "array_task_id", "name", "state", "partition", "nodes"}
    assert set(foreign) >= {"gpus", "elapsed_sec", "time_limit_sec", "reason"}
    table = cli(tmp_path, "ls", "--all", config=_local(state)).stdout
    assert "NOT DDP-TUI'S: 1 other jobs" in table and f"\n{job_id}\t-\tby-hand\t" in table
    res = cli(tmp_path, "ls", "--since", "7d", check=False, config=_local(state))
    assert res.returncode == 2
    assert "--since" in res.stderr and "--all" in res.stderr


def _local(state_dir: str) -> str:
    """The CLI's profile: the local scheduler on this test's state directory."""
    return f'[profiles.local]\nscheduler = "local"\nlocal_state_dir = "{state_dir}"\n'
