"""A shell where a job runs: the host-list expansion, where the shell opens or why it does
not, and the commands, run for real with odd run-directory names (quoting)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.slurm.client import SlurmScheduler
from ddp_tui.remote.backends.ssh.interactive import remote_command
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.live.shells import ShellUnavailable, plan_shell, shell_argv
from ddp_tui.remote.store.runs import RunInfo, RunRef
from ddp_tui.trainer.nodelist import expand_nodelist

#: Directory names a shell must not read as code or split: spaces, quotes, $(...), globs,
#: a leading dash, a newline.
ODD_NAMES = ["a b", "it's", 'say "hi"', "$(touch pwned)", "`id`", "*", "-x", "two\nlines", "ü"]

# -- host lists ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("n1", ["n1"]),
        ("n[1-2]", ["n1", "n2"]),
        ("n[1-3],m7", ["n1", "n2", "n3", "m7"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[098-101]", ["gpu098", "gpu099", "gpu100", "gpu101"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a-b.c,d_e[5]", ["a-b.c", "d_e5"]),
        ("n1,n1,n[1-2]", ["n1", "n2"]),
        ("", []),
        (" n2 ", ["n2"]),
    ],
)
def test_a_host_list_expands_in_order(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["n[1-2", "n1-2]", "n[[1]]", "n[2-1]", "n[a-b]", "n[]", "n[1,]"])
def test_a_malformed_host_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="host list"):
        expand_hostlist(text)


_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True)
_RANGE = st.tuples(st.integers(0, 30), st.integers(0, 4), st.integers(1, 3)).map(
    lambda t: f"{t[0]:0{t[2]}d}-{t[0] + t[1]:0{t[2]}d}" if t[1] else f"{t[0]:0{t[2]}d}"
)
_ITEM = st.one_of(
    _NAME,
    st.builds(
        lambda n, rs: f"{n}[{','.join(rs)}]", _NAME, st.lists(_RANGE, min_size=1, max_size=3)
    ),
)


@given(st.lists(_ITEM, min_size=1, max_size=4))
def test_the_app_and_the_trainer_read_host_lists_alike(items: list[str]) -> None:
    """One grammar (ddp_tui.jobfiles) read two ways: the app's list is the trainer's, but
    for the duplicates the app drops."""
    text = ",".join(items)
    assert expand_hostlist(text) == list(dict.fromkeys(expand_nodelist(text)))


# -- the commands, run for real -----------------------------------------------------


@pytest.mark.parametrize("name", ODD_NAMES)
def test_the_shell_starts_in_the_run_directory_whatever_its_name(tmp_path: Path, name: str) -> None:
    run_dir = tmp_path / name
    run_dir.mkdir()
    # $SHELL is what the script becomes: here, a program that says where it started.
    done = subprocess.run(
        shell_argv(str(run_dir)),
        env={**os.environ, "SHELL": "/bin/pwd"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{run_dir}\n"
    assert not (tmp_path / "pwned").exists()


def test_a_run_directory_missing_there_is_said_and_the_shell_opens_anyway(tmp_path: Path) -> None:
    done = subprocess.run(
        shell_argv(str(tmp_path / "gone")),
        env={**os.environ, "SHELL": "/bin/pwd"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{tmp_path}\n"
    assert f"cannot enter {tmp_path / 'gone'} here" in done.stderr


def test_without_shell_the_login_shell_is_sh(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SHELL"}
    done = subprocess.run(
        shell_argv(str(tmp_path)),
        env=env,
        input="echo started in $PWD\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"started in {tmp_path}\n"


@pytest.mark.parametrize("name", ODD_NAMES)
def test_the_remote_command_line_keeps_every_argument_and_the_directory(
    tmp_path: Path, name: str
) -> None:
    """What the SSH executor hands the remote login shell, run by a shell here."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    argv = [sys.executable, "-c", "import os, sys; print(repr([os.getcwd(), *sys.argv[1:]]))"]
    args = [name, "", "a  b", "$HOME", "'"]
    line = remote_command([*argv, *args], cwd=str(run_dir))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True)
    assert done.stdout == repr([str(run_dir), *args]) + "\n"
    assert not (tmp_path / "pwned").exists()


# -- where it opens, or why not ------------------------------------------------------


def _info(run_dir: str, job_id: str | None = "41") -> RunInfo:
    jobs = ({"job_id": job_id, "attempt": 1},) if job_id else ()
    return RunInfo(RunRef("r1", run_dir), {"spec": {}}, jobs)


def _status(state: JobState, node_list: str = "", reason: str = "") -> JobStatus:
    return JobStatus("41", state, state.value, reason=reason, node_list=node_list)


@pytest.fixture
def slurm() -> SlurmScheduler:
    # Building the command runs nothing for a plain job id.
    return SlurmScheduler(LocalExecutor())


def test_a_running_slurm_job_opens_on_its_first_node_by_default(slurm: SlurmScheduler) -> None:
    plan = plan_shell(_info("/runs/it's"), _status(JobState.RUNNING, "n[1-2]"), slurm)
    assert (plan.node, plan.nodes, plan.job_id) == ("n1", ("n1", "n2"), "41")
    srun = ["srun", "--jobid=41", "--overlap", "--nodelist=n1", "--nodes=1", "--ntasks=1"]
    at = plan.argv.index("srun")  # after the env -u of the user's Slurm variables
    assert list(plan.argv[at : at + len(srun)]) == srun
    assert "--pty" in plan.argv
    assert list(plan.argv[-5:]) == shell_argv("/runs/it's")
    assert plan.cwd == "/runs/it's"
    assert plan.where == "node n1 (1 of 2) of job 41"
    assert "exit" in plan.banner and "n1" in plan.banner and "41" in plan.banner


def test_a_chosen_node_and_the_ssh_destination_are_named(slurm: SlurmScheduler) -> None:
    status = _status(JobState.RUNNING, "n[1-2]")
    plan = plan_shell(_info("/r"), status, slurm, node="n2", via="me@login")
    assert "--nodelist=n2" in plan.argv
    assert plan.where == "node n2 (2 of 2) of job 41, through me@login"
    with pytest.raises(ShellUnavailable, match=r"n3 is not a node of job 41; its nodes: n1, n2"):
        plan_shell(_info("/r"), status, slurm, node="n3")


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (_status(JobState.PENDING, reason="Resources"), "has not started yet (PENDING, Resources)"),
        (_status(JobState.COMPLETED, "n1"), "has ended (COMPLETED): its allocation is gone"),
        (_status(JobState.CANCELLED, "n1"), "has ended (CANCELLED)"),
        (_status(JobState.COMPLETING, "n1"), "a shell joins a RUNNING job only"),
        (None, "Slurm does not know job 41"),
    ],
)
def test_a_slurm_job_that_is_not_running_is_refused_saying_why(
    slurm: SlurmScheduler, status: JobStatus | None, words: str
) -> None:
    with pytest.raises(ShellUnavailable, match=words.replace("(", r"\(").replace(")", r"\)")):
        plan_shell(_info("/r"), status, slurm)


def test_a_run_never_submitted_has_no_shell(slurm: SlurmScheduler) -> None:
    with pytest.raises(ShellUnavailable, match="never submitted"):
        plan_shell(_info("/r", job_id=None), None, slurm)


def test_the_local_scheduler_opens_here_in_the_run_directory_even_after_the_end(
    tmp_path: Path,
) -> None:
    scheduler = LocalScheduler.from_state_dir(tmp_path / "state")
    plan = plan_shell(_info("/runs/a b"), _status(JobState.FAILED, "laptop"), scheduler)
    assert plan.argv == tuple(shell_argv("/runs/a b"))  # no srun: the job ran here
    assert plan.cwd == "/runs/a b"
    assert plan.where == "this machine (laptop); job 41 has ended (FAILED)"
