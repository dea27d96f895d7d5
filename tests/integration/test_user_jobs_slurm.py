"""Every job of the user on the real Slurm test cluster: jobs sent with plain ``sbatch`` (no
ddp-tui) are listed beside ddp-tui's runs while pending, running and ended, their ``.out`` is
read by offset, they are cancelled by job id, and the listing costs one squeue and one sacct
whatever the number of jobs; one is brought in as a run (in a runs root of its own, so the
other tests' listings are as they were), followed and retried.

Every job is submitted once, by the module's set-up (the one brought in by its own test), and
held where a test needs it by construction: ``sbatch --hold`` (pending until released), a
script that waits while a file exists (running until the test removes it), a job that ends at
once (ended, in sacct).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor
from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import UserJob
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import Snapshot
from ddp_tui.remote.runs.adoption import AdoptionRefused
from ddp_tui.remote.store.runs import USAGE_FILE, RunStore
from ddp_tui.spec import ExperimentSpec
from tests.integration.story import tiny_spec

pytestmark = pytest.mark.slurm

EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"
#: The Slurm tools a listing may run.
TOOLS = ("squeue", "sacct", "sinfo", "scontrol", "sbatch", "scancel")

TWO_NODE = """#!/bin/bash
trap 'echo "got TERM"; exit 0' TERM
srun --ntasks-per-node=1 bash -c 'echo "rank $SLURM_PROCID on $(hostname)"'
echo ready
while [ -e {hold} ]; do sleep 0.2; done
"""
RELEASED = """#!/bin/bash
echo started
while [ ! -e {go} ]; do sleep 0.1; done
echo done
"""


class CountingLocalExecutor(LocalExecutor):
    """The real local executor, counting the Slurm tools it runs (a counting wrapper: every
    answer is the real one). A batch's commands come through run() too."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        tool = next((a for a in argv if a in TOOLS), None)
        if tool is not None:
            self.calls[tool] += 1
            self.argvs.append(list(argv))
        return super().run(argv, **kwargs)


@dataclass
class Jobs:
    """The module's jobs, by what each is for."""

    cluster: Cluster
    root: Path
    work: Path
    run_id: str
    run_job: str
    held: str  # held all along
    array: str  # a held array, 0-2
    two_node: str  # 2 nodes, running until cancelled
    ended: str  # ended at once
    released: str  # held, released by its test, then ended by it
    for_cli_cancel: str  # held, cancelled by ddp-tui cancel


def _spec() -> ExperimentSpec:
    """A ddp-tui run whose job ends at once (its python is ``true``: no trainer)."""
    return tiny_spec(name="ours", epochs=1, partition="debug", time_limit="00:05:00",
                     telemetry_sec=0, python="true")  # fmt: skip


def _open(root: Path, executor: LocalExecutor) -> Cluster:
    return Cluster(
        executor,
        SlurmScheduler(executor),
        RunStore(executor, str(root)),
        profile=Profile(scheduler="slurm", check_python=False, partition="debug"),
        location="Slurm on this host",
    )


@pytest.fixture(scope="module")
def jobs(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    base = tmp_path_factory.mktemp("user-jobs")
    base.chmod(0o755)
    work = base / "by-hand"
    work.mkdir()
    (work / "hold").touch()
    (work / "two.sh").write_text(TWO_NODE.format(hold=work / "hold"))
    (work / "rel.sh").write_text(RELEASED.format(go=work / "go"))
    (work / "short.sh").write_text("#!/bin/bash\necho short done\n")

    def sbatch(*args: str) -> str:
        res = slurm_cluster.run(["sbatch", "--parsable", f"--chdir={work}", *args])
        assert res.returncode == 0, res.stderr
        return str(res.stdout.strip().split(";")[0])

    cluster = _open(base / "runs", LocalExecutor())
    run = cluster.submit(cluster.plan(_spec()))
    assert run.job_id is not None
    two_node = ["-J", "two-node", "-N2", "--ntasks-per-node=1", "--gpus-per-node=1"]
    ids = {
        "held": sbatch("--hold", "-J", "held-by-hand", "-t", "30", str(work / "short.sh")),
        "array": sbatch("--hold", "-J", "arr", "--array=0-2", str(work / "short.sh")),
        "two_node": sbatch(*two_node, "-o", "two-%j-%N.out", str(work / "two.sh")),
        "ended": sbatch("-J", "short", str(work / "short.sh")),
        "released": sbatch("--hold", "-J", "released", "-o", "rel-%j.out", str(work / "rel.sh")),
        "for_cli_cancel": sbatch("--hold", "-J", "cli-cancel", str(work / "short.sh")),
    }
    try:
        slurm_cluster.wait_job(ids["two_node"], ["RUNNING"])
        slurm_cluster.wait_sacct(ids["ended"], ["COMPLETED"])
        yield Jobs(cluster, base / "runs", work, run.run_id, run.job_id, **ids)
    finally:
        (work / "hold").unlink(missing_ok=True)
        (work / "go").touch()
        slurm_cluster.run(["scancel", run.job_id, *ids.values()])
        cluster.close()


def _row(rows: Sequence[UserJob], job_id: str) -> UserJob:
    found = [j for j in rows if j.job_id == job_id]
    assert len(found) == 1, [j.job_id for j in rows]
    return found[0]


def _until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for something the job does at once (its first lines), bounded."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _cli(jobs: Jobs, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [EXE, "--scheduler", "slurm", "--runs-root", str(jobs.root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not check or res.returncode == 0, res.stderr
    return res


def test_sbatch_jobs_listed_beside_the_runs_followed_and_cancelled(
    jobs: Jobs, slurm_cluster: Any
) -> None:
    every = jobs.cluster.user_jobs()
    assert every.error is None
    assert jobs.run_id in {v.run_id for v in every.snapshot.runs}
    foreign = every.foreign
    assert jobs.run_job not in {j.job_id for j in foreign}  # a run's job stays a run
    held = _row(foreign, jobs.held)
    assert held.state is JobState.PENDING and held.reason == "JobHeldUser"
    assert (held.name, held.nodes, held.time_limit_sec, held.gpus) == ("held-by-hand", 1, 1800, 0)
    # Its batch script, as slurmctld keeps it: the file sbatch was given, byte for byte.
    assert jobs.cluster.job_script(jobs.held) == (jobs.work / "short.sh").read_text()
    tasks = [_row(foreign, f"{jobs.array}_{i}") for i in range(3)]
    assert [(t.array_job_id, t.array_task_id) for t in tasks] == [
        (jobs.array, i) for i in (0, 1, 2)
    ]
    two = _row(foreign, jobs.two_node)
    assert two.state is JobState.RUNNING and two.nodes == 2 and two.gpus == 2
    nodes = expand_hostlist(two.node_list)
    assert len(nodes) == 2
    assert two.stdout == f"{jobs.work}/two-{jobs.two_node}-{nodes[0]}.out"  # %N: batch host
    ended = _row(foreign, jobs.ended)
    assert ended.state is JobState.COMPLETED and ended.exit_code == 0 and ended.source == "sacct"

    # ls --all --json: the same rows, each marked as ddp-tui's or not.
    rows = json.loads(_cli(jobs, "ls", "--all", "--json").stdout)
    ours = {r["run_id"] for r in rows if r["ours"]}
    others = {r["job_id"]: r for r in rows if not r["ours"]}
    assert jobs.run_id in ours and jobs.run_job not in others
    assert {jobs.held, jobs.two_node, jobs.ended} <= set(others)
    assert others[jobs.two_node]["nodes"] == 2 and others[jobs.two_node]["gpus"] == 2
    assert others[jobs.held]["reason"] == "JobHeldUser"

    # The 2-node job's .out: one line per node from srun, then what it writes after.
    def both_ranks() -> bool:
        return "ready" in jobs.cluster.job_log(jobs.two_node).lines

    _until("the 2-node job's lines", both_ranks)
    log = jobs.cluster.job_log(jobs.two_node)
    assert sorted(ln for ln in log.lines if ln.startswith("rank ")) == [
        f"rank {i} on {n}" for i, n in enumerate(nodes)
    ]
    jobs.cluster.cancel_job(jobs.two_node)
    slurm_cluster.wait_sacct(jobs.two_node, ["CANCELLED"])
    new = jobs.cluster.job_log(jobs.two_node, offset=log.offset).lines
    assert new[-1] == "got TERM" and "ready" not in new  # what came after, only
    after = _row(jobs.cluster.user_jobs().foreign, jobs.two_node)
    assert after.state is JobState.CANCELLED and after.end_time

    # The command line: cancel and logs by job id.
    res = _cli(jobs, "cancel", jobs.for_cli_cancel)
    assert f"cancelled job {jobs.for_cli_cancel}" in res.stdout
    slurm_cluster.wait_job(jobs.for_cli_cancel, ["CANCELLED"])
    assert _cli(jobs, "logs", jobs.ended).stdout.splitlines() == ["short done"]


def test_a_held_job_released_runs_and_ends(jobs: Jobs, slurm_cluster: Any) -> None:
    assert _row(jobs.cluster.user_jobs().foreign, jobs.released).state is JobState.PENDING
    assert slurm_cluster.run(["scontrol", "release", jobs.released]).returncode == 0
    slurm_cluster.wait_job(jobs.released, ["RUNNING"])  # waits for the go file, by construction
    running = _row(jobs.cluster.user_jobs().foreign, jobs.released)
    assert running.state is JobState.RUNNING and running.start_time and running.node_list
    assert running.stdout == f"{jobs.work}/rel-{jobs.released}.out"
    _until("its first line", lambda: jobs.cluster.job_log(jobs.released).lines == ("started",))
    first = jobs.cluster.job_log(jobs.released)
    (jobs.work / "go").touch()
    slurm_cluster.wait_job(jobs.released, ["COMPLETED"])
    slurm_cluster.wait_sacct(jobs.released, ["COMPLETED"])
    ended = _row(jobs.cluster.user_jobs().foreign, jobs.released)
    assert ended.state is JobState.COMPLETED and ended.end_time and ended.exit_code == 0
    assert jobs.cluster.job_log(jobs.released, offset=first.offset).lines == ("done",)


def test_one_squeue_and_one_sacct_for_every_row_the_runs_included(jobs: Jobs) -> None:
    counting = CountingLocalExecutor()
    cluster = _open(jobs.root, counting)
    held = None
    try:
        # Once the run's job has ended and its end and usage are recorded (usage.json: one
        # sacct once, tested below), a refresh asks squeue alone.
        _until(
            "the run's end and usage",
            lambda: all(
                v.state.is_terminal and v.efficiency is not None for v in cluster.refresh().runs
            ),
        )
        counting.calls.clear()
        cluster.refresh()
        assert counting.calls == Counter({"squeue": 1}), counting.calls
        # A run whose job is alive (held): a refresh alone polls it with squeue and sacct.
        held = cluster.submit(cluster.plan(_spec().replace(name="held", extra_sbatch=("--hold",))))
        assert held.job_id is not None
        counting.calls.clear()
        assert _state(cluster.refresh(), held.run_id) is JobState.PENDING
        assert counting.calls == Counter({"squeue": 1, "sacct": 1}), counting.calls
        for _ in range(2):  # the whole window, then what changed since
            counting.calls.clear()
            every = cluster.user_jobs()
            # The runs' states come from the listing's own answers: nothing is asked twice.
            assert counting.calls == Counter({"squeue": 1, "sacct": 1}), counting.calls
            assert every.scheduler_calls == 2 and len(every.foreign) >= 7
            assert _state(every.snapshot, held.run_id) is JobState.PENDING
            assert held.job_id not in {j.job_id for j in every.foreign}
        sacct = [a for a in counting.argvs if "sacct" in a][-1]
        assert any(a.startswith("--starttime=now-") for a in sacct)
        assert not any(a.startswith("--jobs=") for a in sacct)  # nothing asked per row
    finally:
        if held is not None and held.job_id is not None:
            cluster.cancel_job(held.job_id)
        cluster.close()


def test_an_ended_runs_usage_is_recorded_once_in_one_sacct_for_every_ended_run(
    jobs: Jobs, slurm_cluster: Any
) -> None:
    # Every run of the root ended, its end recorded (the module's cluster records them), and
    # its record in accounting final; then no run has a usage record: a new process asks.
    _until("the runs' ends", lambda: all(v.state.is_terminal for v in jobs.cluster.refresh().runs))
    ended = {v.job_id for v in jobs.cluster.refresh().runs if v.job_id}
    for job_id in ended:
        _until(f"job {job_id}'s final accounting", partial(_accounted, slurm_cluster, job_id))
    for record in jobs.root.glob(f"*/{USAGE_FILE}"):
        record.unlink()
    counting = CountingLocalExecutor()
    cluster = _open(jobs.root, counting)
    try:
        snap = cluster.refresh()
        asks = [argv for argv in counting.argvs if "--duplicates" in argv]
        assert len(asks) == 1, asks  # one sacct for every ended run, not one per run
        (asked,) = [a.removeprefix("--jobs=") for a in asks[0] if a.startswith("--jobs=")]
        assert set(asked.split(",")) == ended and jobs.run_job in ended
        view = next(v for v in snap.runs if v.run_id == jobs.run_id)
        record = json.loads((jobs.root / jobs.run_id / USAGE_FILE).read_text())
        assert record["job_id"] == jobs.run_job and record["source"] == "sacct"
        # The figures are what `ddp-tui usage` reads of the same accounting.
        report = cluster.usage(jobs.run_id)
        assert record["cpu_efficiency"] == report.cpu_efficiency.value
        assert record["mem_efficiency"] == report.mem_efficiency.value
        assert view.efficiency is not None and view.efficiency.cpu == record["cpu_efficiency"]
        counting.argvs.clear()
        for _ in range(2):  # written once: never asked again
            cluster.refresh()
        assert not [argv for argv in counting.argvs if "--duplicates" in argv]
        rows = json.loads(_cli(jobs, "ls", "--json").stdout)
        row = next(r for r in rows if r["run_id"] == jobs.run_id)
        assert (row["cpu_efficiency"], row["mem_efficiency"]) == (
            record["cpu_efficiency"],
            record["mem_efficiency"],
        )
    finally:
        cluster.close()


def _accounted(slurm_cluster: Any, job_id: str) -> bool:
    """Accounting holds the job's final record: ended, and its steps in (one that never ran
    has none)."""
    res = slurm_cluster.run(["sacct", "-n", "-P", "-o", "JobID,State,ElapsedRaw", "-j", job_id])
    rows = [ln.split("|") for ln in res.stdout.splitlines() if ln.strip()]
    alloc = [r for r in rows if r[0] == job_id]
    if not alloc or alloc[-1][1].split()[0] in ("PENDING", "RUNNING", "REQUEUED"):
        return False
    return alloc[-1][2] == "0" or any(r[0].startswith(job_id + ".") for r in rows)


def _state(snapshot: Snapshot, run_id: str) -> JobState:
    (view,) = [v for v in snapshot.runs if v.run_id == run_id]
    return view.state


ADOPT_ME = """#!/bin/bash
echo "adopt-me out"
echo "adopt-me err" >&2
pwd
"""


def test_a_job_by_hand_brought_in_followed_and_retried(jobs: Jobs, slurm_cluster: Any) -> None:
    """``b``/``ddp-tui adopt``: a held sbatch job (its name to be made valid, its directory named
    with a space and a quote) becomes a run of its own runs root; the refresh follows its state,
    its .out and .err are read through the run once released, and a retry runs the original
    again from that directory, with the same resources, its logs in the run directory."""
    work = jobs.work.parent / "by hand's dir"
    work.mkdir()
    (work / "adopt.sh").write_text(ADOPT_ME)
    res = slurm_cluster.run([
        "sbatch", "--parsable", "--hold", f"--chdir={work}", "-J", "adopt me!", "-t", "5",
        "--gpus-per-node=1", "--cpus-per-task=2", "-o", "o-%j.out", "-e", "e-%j.err",
        str(work / "adopt.sh"),
    ])  # fmt: skip
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    root = jobs.work.parent / "adopted-runs"
    cluster = _open(root, LocalExecutor())
    again = None
    try:
        view = cluster.adopt_job(job_id)
        run = Path(view.run_dir)
        doc = json.loads((run / "spec.json").read_text())
        spec = doc["spec"]
        assert doc["kind"] == "adopted" and spec["name"] == "adopt_me" == view.name
        assert (spec["nodes"], spec["gpus_per_node"], spec["device"], spec["cpus_per_task"]) == (
            1, 1, "cuda", 2,
        )  # fmt: skip
        assert (spec["time_limit"], spec["partition"], spec["project_dir"]) == (
            "00:05:00", "debug", str(work),
        )  # fmt: skip
        assert doc["adopted"]["job_id"] == job_id and doc["adopted"]["left_out"] == []
        assert (run / "original.sbatch").read_text() == ADOPT_ME  # as slurmctld kept it
        lines = [json.loads(line) for line in (run / "jobs.jsonl").read_text().splitlines()]
        assert [(a["job_id"], a["scheduler"], a["attempt"]) for a in lines] == [
            (job_id, "slurm", 1)
        ]
        assert os.readlink(run / f"slurm-{job_id}.out") == f"{work}/o-{job_id}.out"
        assert os.readlink(run / f"slurm-{job_id}.err") == f"{work}/e-{job_id}.err"
        script = (run / "job.sbatch").read_text()
        for line in ("--gres=gpu:1", "--cpus-per-task=2", "--time=00:05:00", "--job-name=adopt_me"):
            assert f"#SBATCH {line}\n" in script

        # A run now: the refresh has its job's state, and the listing no other job of that id.
        every = cluster.user_jobs()
        assert job_id not in {j.job_id for j in every.foreign}
        assert _state(every.snapshot, view.run_id) is JobState.PENDING
        refused = subprocess.run(
            [EXE, "--scheduler", "slurm", "--runs-root", str(root), "adopt", job_id],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 1
        assert f"job {job_id} is an attempt of run {view.run_id} already" in refused.stderr
        # A whole array is refused; one task of it (held) is brought in as the listing names it.
        with pytest.raises(AdoptionRefused, match=f"job {jobs.array} is a job array"):
            cluster.adopt_job(jobs.array)
        task = cluster.adopt_job(f"{jobs.array}_1")
        assert task.job_id == f"{jobs.array}_1" and task.name == "arr"
        assert os.readlink(Path(task.run_dir, f"slurm-{jobs.array}_1.out")) == (
            f"{jobs.work}/slurm-{jobs.array}_1.out"
        )
        # An interactive job (srun) has no script to run again.
        inter = subprocess.Popen(
            ["srun", "-J", "inter-adopt", "sleep", "60"],
            env=slurm_cluster.client_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _until("the srun job", lambda: bool(_named(slurm_cluster, "inter-adopt")))
            srun_job = _named(slurm_cluster, "inter-adopt")
            with pytest.raises(AdoptionRefused, match=f"job {srun_job} .* is interactive"):
                cluster.adopt_job(srun_job)
        finally:
            inter.kill()
            inter.wait()
            slurm_cluster.run(["scancel", "--me", "-n", "inter-adopt"])
        with pytest.raises(AdoptionRefused, match="Slurm does not know job 999999"):
            cluster.adopt_job("999999")

        assert slurm_cluster.run(["scontrol", "release", job_id]).returncode == 0
        slurm_cluster.wait_sacct(job_id, ["COMPLETED"])
        _until("its end", lambda: _state(cluster.refresh(), view.run_id) is JobState.COMPLETED)
        detail = cluster.follow(view.run_id)  # the first attempt's logs, through the links
        assert detail.out_lines == ["adopt-me out", str(work)]
        assert detail.err_lines == ["adopt-me err"]

        retried = cluster.retry(view.run_id)
        again = retried.job_id
        assert again is not None and again != job_id and len(retried.attempts) == 2
        slurm_cluster.wait_job(again, ["COMPLETED"])
        assert (run / f"slurm-{again}.out").read_text().splitlines() == [
            "adopt-me out",
            str(work),  # the original, run again from its own directory
        ]
        assert (run / f"slurm-{again}.err").read_text().splitlines() == ["adopt-me err"]
        shown = slurm_cluster.run(["scontrol", "-o", "show", "job", again]).stdout
        assert f"WorkDir={run} " in shown and "TresPerNode=gres:gpu:1" in shown
        assert "CPUs/Task=2" in shown and "TimeLimit=00:05:00" in shown
    finally:
        slurm_cluster.run(["scancel", job_id, *([again] if again else [])])
        cluster.close()


def _named(slurm_cluster: Any, name: str) -> str:
    """The id of the user's queued or running job named ``name`` ("" while there is none)."""
    res = slurm_cluster.run(["squeue", "--me", "-h", "-n", name, "-t", "RUNNING", "-o", "%i"])
    return str(res.stdout.strip())
