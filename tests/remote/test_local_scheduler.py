"""The embedded local scheduler, with real detached processes running small bash job scripts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.local import (
    LocalScheduler,
    expand_log_pattern,
    pid_alive,
    requested_nodes,
    sbatch_options,
)
from ddp_tui.remote.backends.local.supervisor import cpu_env
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.states import JobState

from .local_env import HEADER, WAIT_FOR_GO, Env, wait_for


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    if e.state.exists():
        e.stop_all()


def test_a_job_runs_detached_with_slurm_like_environment_and_completes(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir(
        'echo "id=$SLURM_JOB_ID nodes=$SLURM_JOB_NUM_NODES sched=$DDP_TUI_SCHEDULER"\n'
        'echo "submit=$SLURM_SUBMIT_DIR pwd=$(pwd) list=$SLURM_JOB_NODELIST"\n'
        "echo to-stderr >&2\n"
        "cut -d' ' -f5 /proc/$$/stat > pgid\n"
    )
    job_id = sched.submit(script, run)
    assert job_id.isdigit()
    st = env.wait_state(sched, job_id, JobState.COMPLETED)
    assert st.exit_code == 0
    assert st.nodes == 1
    assert st.name == "test"
    out = Path(run, f"slurm-{job_id}.out").read_text().splitlines()
    assert out[0] == f"id={job_id} nodes=1 sched=local"
    assert out[1].startswith(f"submit={run} pwd={run} list=")
    assert Path(run, f"slurm-{job_id}.err").read_text() == "to-stderr\n"
    # Its own process group, not the test's: it is detached.
    assert int(Path(run, "pgid").read_text()) != os.getpgid(0)
    assert "COMPLETED" in sched.accounting(job_id)


def test_a_failing_job_reports_its_exit_code(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("echo boom >&2\nexit 7\n")
    job_id = sched.submit(script, run)
    st = env.wait_state(sched, job_id, JobState.FAILED)
    assert st.exit_code == 7
    assert "exit code 7" in st.reason
    assert "7:0" in sched.accounting(job_id)


def test_over_capacity_jobs_wait_pending_and_start_in_order(env: Env) -> None:
    sched = env.scheduler(max_running=1)
    script_a, run_a = env.run_dir(WAIT_FOR_GO)
    script_b, run_b = env.run_dir("echo b ran\n")
    a = sched.submit(script_a, run_a)
    b = sched.submit(script_b, run_b)
    assert int(b) > int(a)
    assert env.status(sched, a).state is JobState.RUNNING
    time.sleep(0.3)
    st_b = env.status(sched, b)
    assert st_b.state is JobState.PENDING
    assert st_b.reason == "Resources"
    assert not Path(run_b, f"slurm-{b}.out").exists()

    Path(run_a, "go").touch()
    env.wait_state(sched, a, JobState.COMPLETED)
    env.wait_state(sched, b, JobState.COMPLETED)
    assert Path(run_b, f"slurm-{b}.out").read_text() == "b ran\n"


def test_two_slots_run_two_jobs_at_once(env: Env) -> None:
    sched = env.scheduler(max_running=2)
    jobs = [sched.submit(*env.run_dir(WAIT_FOR_GO)) for _ in range(3)]
    states = [env.status(sched, j).state for j in jobs]
    assert states == [JobState.RUNNING, JobState.RUNNING, JobState.PENDING]


def test_cancel_sends_term_and_the_job_ends_cancelled(env: Env) -> None:
    # A grace no test waits out: ending at all proves it was the TERM, however slow the machine.
    grace = 600.0
    sched = env.scheduler(cancel_grace_sec=grace)
    script, run = env.run_dir(
        "trap 'echo got TERM; exit 0' TERM\necho started\nwhile true; do sleep 0.05; done\n"
    )
    job_id = sched.submit(script, run)
    out = Path(run, f"slurm-{job_id}.out")
    wait_for(lambda: out.exists() and "started" in out.read_text(), what="job start")
    t0 = time.monotonic()
    sched.cancel(job_id)
    assert env.status(sched, job_id).state in (JobState.COMPLETING, JobState.CANCELLED)
    st = env.wait_state(sched, job_id, JobState.CANCELLED)
    assert time.monotonic() - t0 < grace  # it stopped on TERM, long before the grace
    assert "got TERM" in out.read_text()
    assert st.end


def test_cancel_kills_a_job_that_ignores_term_after_the_grace(env: Env) -> None:
    sched = env.scheduler(cancel_grace_sec=5)
    # It notes the TERM and carries on; "survived" says it ran on after the TERM came.
    script, run = env.run_dir(
        "trap 'touch got-term' TERM\necho $$ > pid\n(trap '' TERM; sleep 300) &\n"
        "echo $! > child\n"
        "while :; do if [ -e got-term ]; then touch survived; fi; sleep 0.05; done\n"
    )
    job_id = sched.submit(script, run)
    wait_for(lambda: Path(run, "child").exists() and Path(run, "child").read_text().strip() != "")
    pid, child = int(Path(run, "pid").read_text()), int(Path(run, "child").read_text())
    sched.cancel(job_id)
    wait_for(lambda: Path(run, "survived").exists(), what="the job to run on after the TERM")
    assert pid_alive(pid, None)  # TERM alone did not stop it
    env.wait_state(sched, job_id, JobState.CANCELLED, timeout=15)
    assert not pid_alive(pid, None)
    assert not pid_alive(child, None)  # the whole process group went


def test_cancel_of_a_pending_job_is_immediate_and_it_never_runs(env: Env) -> None:
    sched = env.scheduler()
    script_a, run_a = env.run_dir(WAIT_FOR_GO)
    script_b, run_b = env.run_dir("touch ran\n")
    a = sched.submit(script_a, run_a)
    b = sched.submit(script_b, run_b)
    sched.cancel(b)
    assert env.status(sched, b).state is JobState.CANCELLED
    Path(run_a, "go").touch()
    env.wait_state(sched, a, JobState.COMPLETED)
    assert not Path(run_b, "ran").exists()


def test_state_survives_an_app_restart_and_the_queue_moves_on_without_it(env: Env) -> None:
    sched = env.scheduler()
    script_a, run_a = env.run_dir(WAIT_FOR_GO)
    script_b, run_b = env.run_dir("touch ran\n")
    a = sched.submit(script_a, run_a)
    b = sched.submit(script_b, run_b)
    del sched  # the app closes; nobody polls from here on

    Path(run_a, "go").touch()
    # The supervisor of A starts B when A ends.
    wait_for(lambda: Path(run_b, "ran").exists(), what="B started by A's supervisor")

    again = env.scheduler()  # the app starts again
    env.wait_state(again, a, JobState.COMPLETED)
    env.wait_state(again, b, JobState.COMPLETED)
    c = again.submit(*env.run_dir("true\n"))
    assert int(c) > int(b)  # ids keep increasing across restarts


def test_a_running_job_is_seen_by_a_new_instance(env: Env) -> None:
    first = env.scheduler()
    script, run = env.run_dir(WAIT_FOR_GO)
    job_id = first.submit(script, run)
    second = env.scheduler()
    assert env.status(second, job_id).state is JobState.RUNNING
    Path(run, "go").touch()
    assert env.wait_state(second, job_id, JobState.COMPLETED).exit_code == 0


def test_a_lost_supervisor_and_job_are_noticed(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("echo $$ > pid\n" + WAIT_FOR_GO)
    job_id = sched.submit(script, run)
    wait_for(lambda: Path(run, "pid").exists() and Path(run, "pid").read_text().strip() != "")
    doc = env.job_file(job_id)
    supervisor = doc["supervisor_pid"]
    assert isinstance(supervisor, int)
    # What a reboot or the OOM killer would do.
    os.kill(supervisor, signal.SIGKILL)
    os.killpg(int(Path(run, "pid").read_text()), signal.SIGKILL)
    st = env.wait_state(sched, job_id, JobState.FAILED)
    assert "without recording an exit code" in st.reason


def test_a_reused_pid_is_not_taken_for_the_supervisor(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("echo $$ > pid\n" + WAIT_FOR_GO)
    job_id = sched.submit(script, run)
    wait_for(lambda: Path(run, "pid").exists() and Path(run, "pid").read_text().strip() != "")
    path = env.state / "jobs" / f"{job_id}.json"
    doc = json.loads(path.read_text())
    os.killpg(int(Path(run, "pid").read_text()), signal.SIGKILL)
    env.wait_state(sched, job_id, JobState.FAILED)
    # Pretend the job is still recorded as running under a pid that now belongs to
    # another process (this test's): its start time differs, so it is not the supervisor.
    doc.update(state="RUNNING", supervisor_pid=os.getpid(), job_pid=None, ended_at=None)
    path.write_text(json.dumps(doc))
    assert env.status(sched, job_id).state is JobState.FAILED


def test_requeue_stops_the_job_and_runs_it_again_under_the_same_id(env: Env) -> None:
    sched = env.scheduler(cancel_grace_sec=10)
    script, run = env.run_dir(
        'echo "attempt restart=$SLURM_RESTART_COUNT"\n'
        "if [ -e checkpoint ]; then echo resumed; exit 0; fi\n"
        "trap 'touch checkpoint; echo saved; exit 3' TERM\n"
        "while true; do sleep 0.05; done\n"
    )
    job_id = sched.submit(script, run)
    out = Path(run, f"slurm-{job_id}.out")
    wait_for(lambda: out.exists() and "attempt" in out.read_text(), what="first attempt")
    sched.requeue(job_id)
    st = env.wait_state(sched, job_id, JobState.COMPLETED)
    assert st.exit_code == 0
    assert out.read_text().splitlines() == [
        "attempt restart=0",
        "saved",
        "attempt restart=1",
        "resumed",
    ]
    assert "Restarts  1" in sched.accounting(job_id)


def test_jobs_in_dir_lists_every_job_of_a_run_directory_in_any_state_oldest_first(
    env: Env,
) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("true\n")
    other_script, other_run = env.run_dir(WAIT_FOR_GO)
    first = sched.submit(script, run)
    env.wait_state(sched, first, JobState.COMPLETED)
    running = sched.submit(other_script, other_run)
    env.wait_state(sched, running, JobState.RUNNING)
    pending = sched.submit(script, run)  # waits behind the running job: one slot
    assert env.status(sched, pending).state is JobState.PENDING
    # The same directory however it is spelled: a trailing slash, a "..", a relative path.
    spellings = [run, run + "/", os.path.join(run, "..", os.path.basename(run))]
    spellings.append(os.path.relpath(run))
    for spelling in spellings:
        assert sched.jobs_in_dir(spelling) == [first, pending], spelling
    assert sched.jobs_in_dir(other_run) == [running]
    assert sched.jobs_in_dir(str(env.tmp / "never-used")) == []
    # Another instance on the same state directory (another app, the CLI) sees them too.
    assert LocalScheduler(env.state).jobs_in_dir(run) == [first, pending]
    Path(other_run, "go").touch()
    env.wait_state(sched, pending, JobState.COMPLETED)


@pytest.mark.parametrize("flag", ["--nodes=2", "--nodes 3", "-N 2", "-N4", "--nodes=2-4"])
def test_multi_node_jobs_are_refused_with_a_clear_message(env: Env, flag: str) -> None:
    sched = env.scheduler()
    header = HEADER.replace("--nodes=1", flag)
    script, run = env.run_dir("true\n", header=header)
    with pytest.raises(SchedulerError, match=r"one-node jobs only.*use a Slurm profile"):
        sched.submit(script, run)
    assert os.listdir(env.state / "jobs") == []


def test_unknown_jobs_and_missing_scripts(env: Env) -> None:
    sched = env.scheduler()
    assert sched.poll(["12345", "not-a-number"]) == {}
    with pytest.raises(SchedulerError, match="no local job"):
        sched.cancel("12345")
    with pytest.raises(SchedulerError, match="cannot read"):
        sched.submit(str(env.tmp / "missing.sbatch"), str(env.tmp))
    assert sched.accounting("12345") == ""


def test_version_and_partition_describe_this_machine(env: Env) -> None:
    sched = env.scheduler()
    assert sched.version() == "local"
    (part,) = sched.partitions()
    assert part.name == "local"
    assert part.nodes == 1 and part.max_nodes == 1
    # The CPUs a job may run on here (its affinity), what the job script sizes threads from.
    assert part.cpus_per_node == len(os.sched_getaffinity(0))
    assert part.gpus_per_node >= 0
    assert part.is_default


@pytest.mark.parametrize(
    ("directives", "per_task", "on_node"),
    [
        ("#SBATCH --cpus-per-task=1\n", "1", 1),
        ("#SBATCH --cpus-per-task=1\n#SBATCH --ntasks-per-node=2\n", "1", 2),
        ("#SBATCH --cpus-per-task=999\n", "999", None),  # no more than the machine's
        ("", None, None),  # nothing asked: the one job of the node may use it all
    ],
)
def test_a_local_job_gets_slurms_cpu_counts_within_the_machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    directives: str,
    per_task: str | None,
    on_node: int | None,
) -> None:
    cpus = len(os.sched_getaffinity(0))
    script = tmp_path / "job.sbatch"
    script.write_text(HEADER + directives + "true\n")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = cpu_env(str(script))
    assert env.get("SLURM_CPUS_PER_TASK") == per_task
    assert env["SLURM_CPUS_ON_NODE"] == str(min(on_node or cpus, cpus))
    # Nothing holds a local job to cores of its own: its OpenMP threads wait asleep...
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    # ... unless the user's environment says otherwise.
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert cpu_env(str(script))["OMP_WAIT_POLICY"] == "ACTIVE"


def test_sbatch_option_parsing() -> None:
    script = (
        "#!/bin/bash\n"
        "#SBATCH --job-name='my job'\n"
        "#SBATCH -o /runs/x/slurm-%j.out -e err-%x.txt\n"
        "#SBATCH --exclusive  # a comment\n"
        "# a plain comment\n"
        "\n"
        "#SBATCH --time=10\n"
        "echo hi\n"
        "#SBATCH --nodes=8\n"  # after the first command: not an option any more
    )
    opts = sbatch_options(script)
    assert opts == {
        "job-name": "my job",
        "output": "/runs/x/slurm-%j.out",
        "error": "err-%x.txt",
        "exclusive": "",
        "time": "10",
    }
    assert requested_nodes(script) == 1
    assert expand_log_pattern("slurm-%j-%x-%5j-%%.out", "42", "job") == "slurm-42-job-00042-%.out"


@pytest.mark.parametrize("pythonpath", [None, "", "/elsewhere"])
def test_the_supervisor_runs_under_an_interpreter_without_ddp_tui_and_leaves_pythonpath_alone(
    env: Env, monkeypatch: pytest.MonkeyPatch, pythonpath: str | None
) -> None:
    # A bare venv: the supervisor module must come from this checkout, as it did with
    # the app's interpreter, and the job must see the PYTHONPATH the app had.
    bare = env.tmp / "bare"
    venv.create(bare, with_pip=False)
    python = str(bare / "bin" / "python")
    if pythonpath is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", pythonpath)
    assert subprocess.run([python, "-c", "import ddp_tui"], capture_output=True).returncode
    sched = LocalScheduler(env.state, python=python)
    env.schedulers.append(sched)
    script, run = env.run_dir('echo "PYTHONPATH=${PYTHONPATH-unset}"\n')
    job_id = sched.submit(script, run)
    assert env.wait_state(sched, job_id, JobState.COMPLETED).exit_code == 0
    expected = "unset" if pythonpath is None else pythonpath
    assert Path(run, f"slurm-{job_id}.out").read_text() == f"PYTHONPATH={expected}\n"


def test_the_supervisor_module_explains_its_arguments() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "ddp_tui.remote.backends.local.supervisor"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    assert (
        "usage: python -m ddp_tui.remote.backends.local.supervisor STATE_DIR JOB_ID" in res.stderr
    )
