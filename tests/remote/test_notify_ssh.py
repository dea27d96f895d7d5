"""Notification claims over SSH (docs/notifications.md): the claim is one `mkdir` command
through the executor, so on a login node reached over SSH (the real OpenSSH server) it must
decide exactly as it does locally: of a remote-mode app and a local CLI claiming the same ends
at once, each event has one sender."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import Executor, LocalExecutor
from ddp_tui.remote.backends.ssh import SSHExecutor
from ddp_tui.remote.model.events import GROUP_FINISHED, RUN_END, NotifyEvent
from ddp_tui.remote.runs.reactions.notify import GROUP_CLAIMS, RUN_CLAIMS, Notifier
from tests.fixtures.sshd import SshEnv
from tests.unit.test_notify import DIAGNOSIS_ROUNDS, _ended_run, _store

pytestmark = pytest.mark.ssh


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A runs root that the sshd's test user may write into."""
    path = Path(tempfile.mkdtemp(prefix="ddp-tui-notify-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_claims_over_ssh_and_locally_give_each_event_one_sender(
    sshd_env: SshEnv, shared_root: Path
) -> None:
    store = _store(shared_root)
    refs = [
        _ended_run(store, "a", group="g", job_id="7"),
        _ended_run(store, "b", group="g", job_id="8"),
    ]
    # The claims' parent folders exist, writable by both users, before the race: on a real
    # cluster one user makes every claim, but here the sshd's test user and root race, and a
    # folder root made first (mode 0755) would refuse the other user's mkdir: a race of
    # permissions, not of claims.
    (Path(store.root) / GROUP_CLAIMS).mkdir()
    for ref in refs:
        (Path(ref.path) / RUN_CLAIMS).mkdir()
    for path in Path(store.root).rglob("*"):
        path.chmod(0o777)  # the ssh user makes claims inside the run directories
    Path(store.root).chmod(0o777)
    infos = store.list_runs()

    client = sshd_env.workdir()
    config = client / "config"
    config.write_text(sshd_env.host_block("target", sshd_env.target))
    known = sshd_env.known_hosts(client / "known_hosts", (sshd_env.target, "main"))
    ssh = SSHExecutor(
        "target", ssh_config_path=str(config), known_hosts_path=str(known), connect_timeout=10.0
    )
    ssh.connect()
    won: list[NotifyEvent] = []
    lock = threading.Lock()
    start = threading.Barrier(3)

    def claimer(executor: Executor) -> None:
        notifier = Notifier(executor, store.root)
        start.wait()
        for _ in range(DIAGNOSIS_ROUNDS):
            events, error = notifier.after_refresh(infos, [], {}, scope=lambda: None)
            assert error is None, error
            with lock:
                won.extend(events)

    try:
        threads = [
            threading.Thread(target=claimer, args=(ex,))
            for ex in (ssh, LocalExecutor(), LocalExecutor())
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        ssh.close()
    assert sorted((e.kind, e.name) for e in won) == [
        (GROUP_FINISHED, "g"),
        (RUN_END, "a"),
        (RUN_END, "b"),
    ]
    claims = sorted(p.name for p in Path(store.root).glob("*/notified/*"))
    assert claims == ["7.end", "8.end"]
