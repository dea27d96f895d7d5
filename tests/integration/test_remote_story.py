"""The whole story over SSH, the way a laptop reaches a login node through a bastion.

The "laptop" is this process with ``HOME`` pointing at its own ``~/.ssh`` (config and
known_hosts). The "login node" is a private sshd (``tests/fixtures/sshd.py``) whose
sessions see the real Slurm test cluster (``tests/fixtures/slurm_cluster.py``) through
``SetEnv SLURM_CONF``; the alias reaches it with ``ProxyJump`` through the jump sshd.
Runs live in the remote user's home and its jobs run as that user on n1..n3, with this
venv's interpreter. Everything goes through ``Cluster.open(host=...)``.

A job that must still be running when the test acts is held there by a file in the remote
user's home (tests/helpers/hold.py), never by being slow enough.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.advisor.report import advice_json
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import ExecutorError, LocalExecutor
from ddp_tui.remote.backends.ssh import SSHExecutor
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.groups.advising import advise_group
from ddp_tui.remote.model.views import RunDetail, RunView
from ddp_tui.remote.store.runs import SCRIPT_FILE, RunStore
from tests.fixtures.sshd import SshdServer, SshEnv, free_port
from tests.helpers.hold import Hold
from tests.integration.story import (
    USER_SCRIPTS,
    epochs_in_metrics,
    tiny_script_spec,
    tiny_spec,
    wait_state,
)
from tests.tui.advice_runs import finished_sweep

pytestmark = [
    pytest.mark.ssh,
    pytest.mark.slurm,
    pytest.mark.torch,
    # A traceback from a paramiko thread would land on the user's screen: fail on it.
    pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"),
]

#: The job's interpreter: this venv's (torch is there); the remote user must reach it.
VENV_PYTHON = str(Path(sys.prefix) / "bin" / "python")
ALIAS = "cluster"


@dataclass
class Laptop:
    env: SshEnv
    login: SshdServer
    home: Path  # the laptop's HOME: .ssh/config and .ssh/known_hosts

    def add_hosts(self, *blocks: str) -> None:
        config = self.home / ".ssh" / "config"
        config.write_text(config.read_text() + "\n" + "\n".join(blocks))


@pytest.fixture(scope="module")
def laptop(
    sshd_env: SshEnv, slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Laptop:
    env = sshd_env
    env.grant_search(VENV_PYTHON)
    login = env.start_server("login", f"SetEnv SLURM_CONF={slurm_cluster.conf}")
    home = tmp_path_factory.mktemp("laptop")
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    (ssh_dir / "config").write_text(
        "\n".join(
            [
                env.host_block("bastion", env.jump),
                env.host_block(ALIAS, login, ProxyJump="bastion", ServerAliveInterval="5"),
                env.host_block(
                    "wrongkey", login, ProxyJump="bastion", IdentityFile=str(env.wrong_key)
                ),
            ]
        )
    )
    env.known_hosts(ssh_dir / "known_hosts", (env.jump, "main"), (login, "main"))
    # What the story needs on the login node, checked once with a plain message.
    with SSHExecutor(
        ALIAS,
        ssh_config_path=str(ssh_dir / "config"),
        known_hosts_path=str(ssh_dir / "known_hosts"),
    ) as ex:
        probe = ex.run(
            [
                "sh",
                "-c",
                'echo "$SLURM_CONF" && sinfo -h -o %P && "$0" -c "import torch, torchvision"',
                VENV_PYTHON,
            ]
        )
    assert probe.ok, f"the login node cannot run the story: {probe.stderr.strip()}"
    assert probe.stdout.split()[:2] == [str(slurm_cluster.conf), "debug*"], probe.stdout
    return Laptop(env, login, home)


@dataclass
class Remote:
    cluster: Cluster
    executor: SSHExecutor
    states: list[str]
    laptop: Laptop


@pytest.fixture
def remote(laptop: Laptop, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    monkeypatch.setenv("HOME", str(laptop.home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    states: list[str] = []
    profile = Profile(
        host=ALIAS, scheduler="auto", runs_root=f"~/runs-{secrets.token_hex(3)}", partition="debug"
    )
    cluster = Cluster.open(profile, host=ALIAS, state_callback=states.append)
    assert isinstance(cluster.executor, SSHExecutor)
    try:
        yield Remote(cluster, cluster.executor, states, laptop)
    finally:
        try:
            for v in cluster.refresh().runs:
                if v.state.is_active:
                    cluster.cancel(v.run_id)  # leave no job of ours for the next test
        finally:
            cluster.close()
            shutil.rmtree(cluster.store.root, ignore_errors=True)


@pytest.fixture
def remote_hold(laptop: Laptop) -> Iterator[Hold]:
    """A hold file the remote user's jobs can see: in that user's home."""
    directory = laptop.env.home / f"hold-{secrets.token_hex(3)}"
    try:
        with Hold.create(directory) as hold:
            yield hold
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Followed:
    """What the screens would show of one run: every followed line, the metrics."""

    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    metrics: list[dict[str, float | None]] = field(default_factory=list)
    details: int = 0

    def add(self, detail: RunDetail | None) -> None:
        if detail is None:
            return
        self.details += 1
        if detail.out_reset:
            self.out.clear()
        if detail.err_reset:
            self.err.clear()
        self.out += detail.out_lines
        self.err += detail.err_lines
        self.metrics = detail.metrics


def follow_until(
    cluster: Cluster,
    run_id: str,
    followed: Followed,
    pred: Callable[[RunView], bool],
    what: str,
    timeout: float,
) -> RunView:
    """``refresh(follow=run_id)`` until ``pred`` holds (the app's tick with a run open)."""
    deadline = time.monotonic() + timeout
    while True:
        snap = cluster.refresh(follow=run_id)
        followed.add(snap.detail)
        view = next(v for v in snap.runs if v.run_id == run_id)
        if pred(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}; last state {view.state.value}, "
                f"epochs {view.epochs_done}/{view.epochs_total}, error {snap.error}\n"
                f".out tail: {followed.out[-15:]}\n.err tail: {followed.err[-25:]}"
            )
        time.sleep(0.5)


def file_lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", "replace").splitlines()


def remote_spec(**changes: Any) -> Any:
    return tiny_spec(partition="debug", python=VENV_PYTHON, **changes)


def test_two_node_story_over_ssh_through_a_jump_host(remote: Remote, remote_hold: Hold) -> None:
    cluster, env = remote.cluster, remote.laptop.env
    assert cluster.location == f"ddptest@{ALIAS}" and cluster.scheduler.name == "slurm"
    assert cluster.store.root.startswith(f"{env.home}/runs-")  # the remote home
    forwards = f"target 127.0.0.1 port {remote.laptop.login.port}"
    assert forwards in env.jump.log_text()  # through the bastion's direct-tcpip

    # The first attempt waits after epoch 1 until the cancel; the retry is not held.
    view = cluster.submit(
        cluster.plan(remote_hold.after_epochs(remote_spec(name="ssh-story", nodes=2, epochs=4), 1))
    )
    assert view.job_id is not None
    run_dir = Path(view.run_dir)
    assert run_dir.stat().st_uid == pwd.getpwnam(env.user).pw_uid  # made by the remote user

    first = Followed()
    follow_until(cluster, view.run_id, first, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    assert first.metrics and first.metrics[0]["epoch"] == 1
    assert any("rank 0/2" in line for line in first.out + first.err), first.out[-10:]

    cluster.cancel(view.run_id)
    assert wait_state(cluster, view.run_id, JobState.CANCELLED, timeout=90)
    assert (run_dir / "checkpoints" / "latest.pt").exists()

    retried = cluster.retry(view.run_id)
    assert retried.job_id not in (None, view.job_id)
    assert retried.attempts[-1].retry_of == view.job_id
    second = Followed()
    done = follow_until(cluster, view.run_id, second, lambda v: v.state.is_terminal, "the end", 300)
    second.add(cluster.refresh(follow=view.run_id).detail)  # bytes written with the end
    assert done.state is JobState.COMPLETED, second.err[-30:]

    # The followed lines are the files' lines, and the followed metrics every epoch once.
    assert second.out == file_lines(run_dir / f"slurm-{retried.job_id}.out")
    assert second.err == file_lines(run_dir / f"slurm-{retried.job_id}.err")
    assert "resum" in "\n".join(second.out + second.err).lower()
    assert [r["epoch"] for r in second.metrics] == [1, 2, 3, 4]
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2, 3, 4]

    checks = cluster.verify(view.run_id)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
    run_json = cluster.store.read_run_json(cluster.store.ref(view.run_id))
    assert run_json is not None
    assert sorted(run_json["hosts"]) == ["n1", "n2"]
    assert run_json["world_size"] == 2 and run_json["backend"] == "gloo"
    assert retried.job_id is not None and retried.job_id in (run_dir / "sacct.txt").read_text()


def test_a_users_script_goes_up_in_one_command_and_a_retry_reuses_it(
    remote: Remote, tmp_path: Path
) -> None:
    cluster, ex, env = remote.cluster, remote.executor, remote.laptop.env
    # The laptop's project: a tutorial-style script and the module it imports.
    project = tmp_path / "proj"
    project.mkdir()
    for name in ("tutorial_ddp.py", "toy_task.py"):
        shutil.copy2(USER_SCRIPTS / name, project / name)
    spec = tiny_script_spec(
        project / "tutorial_ddp.py", partition="debug", python=VENV_PYTHON, nodes=2,
        gpus_per_node=1, cpus_per_task=1,
    )  # fmt: skip
    plan = cluster.plan(spec)
    assert plan.ok and plan.snapshot is not None, plan.errors
    # A submit of the trainer (ended at once by python=true) sends code/ in one tar stream...
    execs = ex.exec_count
    cluster.submit(cluster.plan(tiny_spec(name="no-project", partition="debug", python="true")))
    trainer_execs = ex.exec_count - execs
    # ...and a script's project goes up in that same stream: no command more. (The first
    # submit may also make the runs root.)
    execs = ex.exec_count
    view = cluster.submit(plan)
    assert ex.exec_count - execs <= trainer_execs
    upload = cluster.store.last_upload
    assert upload is not None and upload.project_files == 2 and upload.seconds >= 0
    run_dir = Path(view.run_dir)
    assert run_dir.is_relative_to(env.home)  # on the "cluster", as its user
    copied = {p.name: p.stat() for p in (run_dir / "project").iterdir() if p.is_file()}
    assert sorted(copied) == ["toy_task.py", "tutorial_ddp.py"]
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED, (run_dir / f"slurm-{done.job_id}.err").read_text()
    assert done.epoch_label == "2/2" and done.last_train_loss is not None
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2]

    # The laptop's copy changes; a retry still runs what was snapshotted, uploading nothing.
    (project / "tutorial_ddp.py").write_text("raise SystemExit('not the snapshot')\n")
    retried = cluster.retry(view.run_id)
    assert cluster.store.last_upload is upload  # nothing went up
    assert retried.attempts[-1].retry_of == view.job_id
    again = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert again.state is JobState.COMPLETED and again.job_id == retried.job_id
    for name, before in copied.items():
        after = (run_dir / "project" / name).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
    assert "not the snapshot" not in (run_dir / f"slurm-{retried.job_id}.err").read_text()


def test_killed_connection_mid_follow_reconnects_and_loses_no_line(
    remote: Remote, remote_hold: Hold
) -> None:
    cluster, ex = remote.cluster, remote.executor
    # RUNNING with two epochs done until the connection is back and the hold released.
    view = cluster.submit(
        cluster.plan(remote_hold.after_epochs(remote_spec(name="ssh-drop", epochs=10), 2))
    )
    followed = Followed()
    running = follow_until(
        cluster, view.run_id, followed, lambda v: v.epochs_done >= 2, "two epochs", 240
    )
    assert running.state is JobState.RUNNING and followed.out

    assert remote.laptop.login.kill_sessions()  # the login node's side of our connection
    snap = cluster.refresh(follow=view.run_id)  # must not raise
    followed.add(snap.detail)
    assert snap.connection == "reconnecting", (snap.connection, snap.error)
    assert snap.error is not None and "reconnecting" in snap.error
    assert [v.run_id for v in snap.runs] == [view.run_id]  # the last known rows stay
    assert ex.wait_connected(30), ex.state  # by itself: nobody called connect()
    remote_hold.release()

    done = follow_until(cluster, view.run_id, followed, lambda v: v.state.is_terminal, "end", 300)
    followed.add(cluster.refresh(follow=view.run_id).detail)
    assert done.state is JobState.COMPLETED, "\n".join(followed.err[-60:])
    assert remote.states == ["connected", "reconnecting", "connected"]
    run_dir = Path(view.run_dir)
    out = file_lines(run_dir / f"slurm-{view.job_id}.out")
    assert followed.out == out, "followed .out lines differ from the file (lost or doubled)"
    assert followed.err == file_lines(run_dir / f"slurm-{view.job_id}.err")
    assert sum(line.startswith("epoch") for line in out) >= 10
    assert [r["epoch"] for r in followed.metrics] == list(range(1, 11))


SLEEPER = """#!/bin/bash
#SBATCH --partition=debug
#SBATCH --time=00:10:00
#SBATCH --output={d}/slurm-%j.out
#SBATCH --error={d}/slurm-%j.err
echo started
{body}
"""


def add_runs(cluster: Cluster, count: int, body: str) -> list[str]:
    """Real run directories with a real (trivial) Slurm job each, written like submit()."""
    ids = []
    for i in range(count):
        spec = remote_spec(name=f"rt{i}")
        script = lambda d: SLEEPER.format(d=d, body=body)  # noqa: E731
        ref = cluster.store.create_run(spec.to_dict(), spec.name, script, None)
        job_id = cluster.scheduler.submit(ref.file(SCRIPT_FILE), ref.path)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record = {"job_id": job_id, "scheduler": "slurm", "submitted_at": now, "retry_of": None}
        cluster.store.append_job(ref, {**record, "attempt": 1})
        ids.append(ref.run_id)
    return ids


def wait_until_steady(cluster: Cluster, sleepers: list[str], finisher: str) -> None:
    """Until nothing changes between refreshes: every sleeper RUNNING with its one line
    written (a job that starts, or a log that appears, mid-measurement costs a read), and
    the other job ended. Jobs start when the nodes are free, which no test can time."""
    deadline = time.monotonic() + 180  # bounds a hang only
    while True:
        views = {v.run_id: v for v in cluster.refresh().runs}
        pending = [
            run_id
            for run_id in sleepers
            if views[run_id].state is not JobState.RUNNING
            or not _has_started(views[run_id].run_dir, views[run_id].job_id)
        ]
        if views[finisher].state is not JobState.COMPLETED:
            pending.append(finisher)
        if not pending:
            return
        states = {run_id: views[run_id].state.value for run_id in pending}
        assert time.monotonic() < deadline, f"never steady: {states}"
        time.sleep(0.5)


def _has_started(run_dir: str, job_id: str | None) -> bool:
    out = Path(run_dir) / f"slurm-{job_id}.out"
    return job_id is not None and out.exists() and "started" in out.read_text()


def test_steady_state_refresh_is_one_round_trip_whatever_the_number_of_runs(
    remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, ex = remote.cluster, remote.executor
    sftp_calls = 0
    sftp_call = ex._sftp_call

    def counting(what: str, call: Any) -> Any:
        nonlocal sftp_calls
        sftp_calls += 1
        return sftp_call(what, call)

    monkeypatch.setattr(ex, "_sftp_call", counting)

    def costs(follow: str | None) -> tuple[int, int, int, int]:
        before = (ex.round_trips, ex.exec_count, sftp_calls)
        snap = cluster.refresh(follow=follow)
        assert snap.error is None and snap.connection == "ok", snap.error
        return (
            ex.round_trips - before[0],
            ex.exec_count - before[1],
            sftp_calls - before[2],
            len(snap.runs),
        )

    sleepers = add_runs(cluster, 1, "sleep 600")
    followed = sleepers[0]
    finisher = add_runs(cluster, 1, "exit 0")[0]
    seen: dict[int, list[tuple[int, int, int, int]]] = {}
    for extra in (0, 6):
        sleepers += add_runs(cluster, extra, "sleep 600")
        wait_until_steady(cluster, sleepers, finisher)
        cluster.refresh()  # new runs: their first rows may take a second batch
        cluster.refresh(follow=followed)  # opening a run reads its logs from the start
        seen[2 + extra] = [costs(None), costs(None), costs(followed), costs(followed)]
    # One round trip, no new remote command, no SFTP call: for 2 runs as for 8.
    assert seen == {n: [(1, 0, 0, n)] * 4 for n in (2, 8)}, seen


def test_the_scaling_advice_over_ssh_is_the_one_made_from_the_same_files_on_the_login_node(
    remote: Remote,
) -> None:
    """The advisor reads every run's step_times.jsonl, run.json and metrics through the
    executor's batched reads: over SSH it gives exactly the advice the login node works out
    from the same files (the straggler it names comes from the step times)."""
    root = Path(remote.cluster.store.root)
    root.mkdir(parents=True, exist_ok=True)
    group = finished_sweep(root)
    over_ssh = advice_json(remote.cluster.advise(group))
    store = RunStore(LocalExecutor(), str(root))
    here = advice_json(advise_group(store, group, partitions=remote.cluster.partitions()))
    assert over_ssh == here
    assert [s["world_size"] for s in over_ssh["sizes"] if s["measured"]] == [1, 2]
    assert [(s["rank"], s["world_size"]) for s in over_ssh["stragglers"]] == [(1, 2)]


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("no-such-host.invalid", "not a Host in the SSH config"),
        ("refused", "refused"),
        # The login node also offers keyboard-interactive, which nobody can answer here.
        ("wrongkey", "id_wrong: rejected"),
    ],
)
def test_bad_host_is_a_clear_error_without_traceback(
    laptop: Laptop, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, alias: str, expected: str
) -> None:
    home = tmp_path / "home"
    shutil.copytree(laptop.home / ".ssh", home / ".ssh")
    port = free_port()  # nothing listens there
    config = home / ".ssh" / "config"
    config.write_text(
        config.read_text() + f"\nHost refused\n    HostName 127.0.0.1\n    Port {port}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    profile = Profile(runs_root="~/runs", scheduler="auto")
    with pytest.raises(ExecutorError) as info:
        Cluster.open(profile, host=alias)
    message = str(info.value)
    assert expected in message and "Traceback" not in message, message
    assert "Slurm" not in message, message  # the connection's fault, not "no Slurm there"

    # The command line says the same in one line, with no traceback.
    cli = shutil.which("ddp-tui", path=str(Path(sys.prefix) / "bin"))
    assert cli is not None
    res = subprocess.run(
        [cli, "--host", alias, "ls"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    assert res.returncode == 2, res
    assert res.stderr.startswith("ddp-tui: ") and expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
