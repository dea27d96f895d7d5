"""SSHExecutor against real OpenSSH servers (tests/fixtures/sshd.py), plus the pieces
that need no server: known_hosts, ssh_config resolution and the batch helpers run
locally against LocalExecutor."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddp_tui.remote.backends.executor import (
    Batch,
    CommandTimeout,
    ExecutorError,
    FileRead,
    LocalExecutor,
)
from ddp_tui.remote.backends.ssh import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionLost,
    HostKeyChanged,
    HostKeyRejected,
    HostNotFound,
    RemoteProtocolError,
    SSHExecutor,
)
from ddp_tui.remote.backends.ssh.batch import (
    LAUNCHERS,
    PY_HELPER,
    build_request,
    new_nonce,
    parse_response,
)
from ddp_tui.remote.backends.ssh.config import SSHConfigFile, parse_destination
from ddp_tui.remote.backends.ssh.hostkeys import KnownHosts, fingerprint_sha256, host_key_name
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.remote.store.snapshot import build_manifest
from tests.fixtures.sshd import NOISE_LINE, SshEnv, fingerprint, free_port

# --------------------------------------------------------------------------- helpers


class ScriptedPrompter:
    """A fake user: answers from scripts, records every question."""

    def __init__(
        self,
        *,
        host_keys: list[bool] | None = None,
        secrets: list[str | None] | None = None,
        kbd: list[list[str] | None] | None = None,
    ) -> None:
        self.host_keys = list(host_keys or [])
        self.secrets = list(secrets or [])
        self.kbd = list(kbd or [])
        self.calls: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        with self.lock:
            self.calls.append(("confirm_host_key", host, port, key_type, fingerprint))
            return self.host_keys.pop(0) if self.host_keys else False

    def ask_secret(self, title: str, prompt: str) -> str | None:
        with self.lock:
            self.calls.append(("ask_secret", title, prompt))
            return self.secrets.pop(0) if self.secrets else None

    def keyboard_interactive(
        self, title: str, instructions: str, prompts: list[tuple[str, bool]]
    ) -> list[str] | None:
        with self.lock:
            self.calls.append(("keyboard_interactive", title, instructions, prompts))
            return self.kbd.pop(0) if self.kbd else None

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


class Client:
    """One test's client side: an ssh config with every alias, a known_hosts file."""

    def __init__(self, env: SshEnv) -> None:
        self.env = env
        self.dir = env.workdir()
        self.config = self.dir / "config"
        self.known_hosts = self.dir / "known_hosts"
        self.executors: list[SSHExecutor] = []
        t, j = env.target, env.jump
        blocks = [
            env.host_block("target", t),
            env.host_block("jump", j),
            env.host_block("jump2", j),
            env.host_block("viajump", t, ProxyJump="jump"),
            env.host_block("chain", t, ProxyJump="jump,jump2"),
            env.host_block("proxycmd", t, ProxyCommand=f"socat - TCP:127.0.0.1:{t.port}"),
            env.host_block("twofactor", t, "twofactor"),
            env.host_block("pwonly", t, "password", IdentityFile="none"),
            env.host_block("kbd", t, IdentityFile="none"),
            env.host_block("enc", t, IdentityFile=str(env.encrypted_key)),
            env.host_block("wrongkey", j, IdentityFile=str(env.wrong_key)),
            env.host_block("noise", t, "noise"),
            env.host_block("garbage", t, "garbage"),
        ]
        self.config.write_text("\n".join(blocks))
        roles = [(t, r) for r in t.ports] + [(j, "main")]
        env.known_hosts(self.known_hosts, *roles)

    def add_hosts(self, text: str) -> None:
        self.config.write_text(self.config.read_text() + "\n" + text)

    def make(self, alias: str, prompter: ScriptedPrompter | None = None, **kw: Any) -> SSHExecutor:
        kw.setdefault("connect_timeout", 10.0)
        ex = SSHExecutor(
            alias,
            prompter=prompter or ScriptedPrompter(),
            ssh_config_path=str(self.config),
            known_hosts_path=str(self.known_hosts),
            **kw,
        )
        self.executors.append(ex)
        return ex

    def close(self) -> None:
        for ex in self.executors:
            ex.close()


@pytest.fixture
def client(sshd_env: SshEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    c = Client(sshd_env)
    yield c
    c.close()


def accepted_logins(env: SshEnv) -> int:
    return env.target.log_text().count("Accepted ")


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def user_processes(cmdline_part: str, user: str = "ddptest") -> list[int]:
    """Pids of ``user``'s processes whose command line contains ``cmdline_part``."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if cmdline_part.encode() in cmd:
            found.append(int(entry))
    return found


def make_tree(root: Path, owner: str | None = None) -> Path:
    """Files that exercise every read case; chowned to ``owner`` when given."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "plain.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    nonce_like = b"\nDDPTUI-0123456789abcdef END\nDDPTUI-0123456789abcdef SIZES\n"
    (root / "binary.bin").write_bytes(bytes(range(256)) * 64 + nonce_like)
    (root / "empty").write_bytes(b"")
    (root / "dir").mkdir(exist_ok=True)
    (root / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    weird = root / "we'ird $name `x`\nnewline ü.txt"
    weird.write_text("weird\n")
    for link, target in (("link", "plain.txt"), ("dangling", "nowhere")):
        if not (root / link).is_symlink():
            (root / link).symlink_to(target)
    if owner is not None:
        shutil.chown(root, owner, owner)
        for path in root.rglob("*"):
            os.lchown(path, *_ids(owner))
    return root


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def reference_batch(root: Path) -> Batch:
    weird = str(root / "we'ird $name `x`\nnewline ü.txt")
    r = str(root)
    return Batch(
        commands=[
            ["printf", "%s\\n", "a b", "c'd", 'e"f', "$HOME", "`id`", "*", ";"],
            ["sh", "-c", "echo out; echo err >&2; exit 3"],
            ["cat", f"{r}/plain.txt"],
            ["ls", "-a", r],
            ["wc", "-c", f"{r}/big.bin"],
            ["sh", "-c", "head -c 100000 /dev/zero; printf '\\377\\376' >&2"],
        ],
        reads=[
            FileRead(f"{r}/plain.txt"),
            FileRead(f"{r}/plain.txt", 5, 10),
            FileRead(f"{r}/plain.txt", 10**6),
            FileRead(f"{r}/missing"),
            FileRead(f"{r}/dir"),
            FileRead(f"{r}/binary.bin"),
            FileRead(f"{r}/binary.bin", 100, 0),
            FileRead(f"{r}/empty"),
            FileRead(f"{r}/link", 3),
            FileRead(f"{r}/dangling"),
            FileRead(weird),
            FileRead(f"{r}/big.bin", 1000),
            FileRead(f"{r}/big.bin", 10, 70000),
            # tails: a negative offset is the last bytes (a diagnosis reads only those)
            FileRead(f"{r}/plain.txt", -7),
            FileRead(f"{r}/plain.txt", -(10**6)),
            FileRead(f"{r}/big.bin", -70000),
            FileRead(f"{r}/big.bin", -5000, 100),
            FileRead(f"{r}/empty", -10),
        ],
    )


class ExecCounter:
    """Counts real ``exec`` requests by wrapping paramiko's Channel.exec_command."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = paramiko.Channel.exec_command

        def counting(chan: paramiko.Channel, command: str | bytes) -> None:
            self.count += 1
            original(chan, command)

        monkeypatch.setattr(paramiko.Channel, "exec_command", counting)


# ------------------------------------------------------------- connection & host keys


@pytest.mark.ssh
def test_proxyjump_alias_goes_through_the_jump_host(client: Client) -> None:
    env = client.env
    marker = f"target 127.0.0.1 port {env.target.port}"
    before = env.jump.log_text().count(marker)
    ex = client.make("viajump")
    assert ex.description == "ddptest@viajump"
    res = ex.run(["sh", "-c", 'echo "$USER"'])
    assert res.stdout == "ddptest\n"
    assert ex._conn is not None and len(ex._conn.transports) == 2
    assert env.jump.log_text().count(marker) == before + 1  # one direct-tcpip forward

    chained = client.make("chain")
    assert chained.run(["true"]).ok
    assert chained._conn is not None and len(chained._conn.transports) == 3
    # jump -> jump2 (same server, second hop) -> target: two more forwards in its log
    assert env.jump.log_text().count(f"target 127.0.0.1 port {env.jump.port}") >= 1
    assert env.jump.log_text().count(marker) == before + 2


@pytest.mark.ssh
def test_proxycommand_is_honoured(client: Client) -> None:
    if shutil.which("socat") is None:
        pytest.skip("socat is not installed")
    ex = client.make("proxycmd")
    assert ex.run(["echo", "via proxy"]).stdout == "via proxy\n"


@pytest.mark.ssh
def test_unknown_host_key_accepted_is_saved_hashed(client: Client) -> None:
    env = client.env
    client.known_hosts.write_text("")
    prompter = ScriptedPrompter(host_keys=[True])
    ex = client.make("target", prompter)
    ex.connect()
    expected = fingerprint(Path(f"{env.target.host_keys[0]}.pub"))  # ed25519 is offered first
    assert prompter.calls == [
        ("confirm_host_key", "127.0.0.1", env.target.port, "ssh-ed25519", expected)
    ]
    saved = client.known_hosts.read_text().splitlines()
    assert len(saved) == 1 and saved[0].startswith("|1|")
    # OpenSSH itself finds the hashed entry we wrote.
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[127.0.0.1]:{env.target.port}", "-f", str(client.known_hosts)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0 and "ssh-ed25519" in found.stdout
    # A second connection trusts it without asking.
    again = ScriptedPrompter()
    client.make("target", again).connect()
    assert again.calls == []


@pytest.mark.ssh
def test_unknown_host_key_rejected_aborts_before_login(client: Client) -> None:
    env = client.env
    client.known_hosts.write_text("")
    logins = accepted_logins(env)
    prompter = ScriptedPrompter(host_keys=[False])
    ex = client.make("target", prompter)
    with pytest.raises(HostKeyRejected) as info:
        ex.run(["true"])
    assert fingerprint(Path(f"{env.target.host_keys[0]}.pub")) in str(info.value)
    assert prompter.kinds() == ["confirm_host_key"]
    assert client.known_hosts.read_text() == ""
    assert accepted_logins(env) == logins
    assert not ex.connected


@pytest.mark.ssh
@pytest.mark.parametrize("hashed", [False, True])
def test_changed_host_key_is_refused_with_the_offending_line(client: Client, hashed: bool) -> None:
    env = client.env
    impostor = env.root / f"impostor-{hashed}"
    if not impostor.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(impostor)], check=True
        )
    other = Path(f"{impostor}.pub").read_text().split()[:2]
    client.known_hosts.write_text(
        f"unrelated.example.org {' '.join(other)}\n"
        f"[127.0.0.1]:{env.target.port} {' '.join(other)}\n"
    )
    if hashed:  # let OpenSSH hash the file; line numbers stay
        subprocess.run(
            ["ssh-keygen", "-H", "-f", str(client.known_hosts)], check=True, capture_output=True
        )
        assert "127.0.0.1" not in client.known_hosts.read_text()
    logins = accepted_logins(env)
    prompter = ScriptedPrompter(host_keys=[True])
    ex = client.make("target", prompter)
    with pytest.raises(HostKeyChanged) as info:
        ex.connect()
    message = str(info.value)
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in message
    assert f"{client.known_hosts}:2" in message
    assert info.value.line == 2 and info.value.known_hosts_file == str(client.known_hosts)
    assert "Traceback" not in message
    assert prompter.calls == []  # never offered to accept it
    assert accepted_logins(env) == logins


@pytest.mark.ssh
def test_hashed_known_hosts_from_ssh_keyscan(client: Client) -> None:
    env = client.env
    scan = subprocess.run(
        ["ssh-keyscan", "-H", "-p", str(env.target.port), "127.0.0.1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    client.known_hosts.write_text(scan.stdout)
    prompter = ScriptedPrompter()
    assert client.make("target", prompter).run(["true"]).ok
    assert prompter.calls == []


@pytest.mark.ssh
def test_known_key_type_is_negotiated(client: Client) -> None:
    """Only the ECDSA key is on record; the server would offer ED25519 first."""
    env = client.env
    ecdsa = [line for line in env.target.known_hosts_lines() if "ecdsa" in line]
    client.known_hosts.write_text("".join(f"{line}\n" for line in ecdsa))
    prompter = ScriptedPrompter()
    ex = client.make("target", prompter)
    ex.connect()
    assert prompter.calls == []
    assert ex._conn is not None
    assert ex._conn.transport.get_remote_server_key().get_name().startswith("ecdsa-")


# ------------------------------------------------------------------ authentication


@pytest.mark.ssh
def test_keyboard_interactive_is_answered_by_the_prompter(client: Client) -> None:
    env = client.env
    prompter = ScriptedPrompter(kbd=[["wrong password"], [env.password]])
    ex = client.make("kbd", prompter)
    assert ex.run(["id", "-un"]).stdout == "ddptest\n"
    kbd_calls = [c for c in prompter.calls if c[0] == "keyboard_interactive"]
    assert len(kbd_calls) == 2
    assert kbd_calls[0][3] == [("Password: ", False)]


@pytest.mark.ssh
def test_keyboard_interactive_cancel_is_a_clean_failure(client: Client) -> None:
    ex = client.make("kbd", ScriptedPrompter(kbd=[None]))
    with pytest.raises(AuthenticationFailed, match="cancelled"):
        ex.connect()


@pytest.mark.ssh
def test_two_factor_key_then_keyboard_interactive(client: Client) -> None:
    env = client.env
    prompter = ScriptedPrompter(kbd=[[env.password]])
    ex = client.make("twofactor", prompter)
    assert ex.run(["true"]).ok
    assert prompter.kinds() == ["keyboard_interactive"]


@pytest.mark.ssh
def test_password_authentication(client: Client) -> None:
    env = client.env
    prompter = ScriptedPrompter(secrets=[env.password])
    ex = client.make("pwonly", prompter)
    assert ex.run(["true"]).ok
    assert prompter.calls == [
        (
            "ask_secret",
            f"Password for ddptest@127.0.0.1:{env.target.ports['password']}",
            "ddptest@127.0.0.1's password:",
        )
    ]


@pytest.mark.ssh
def test_ssh_agent_keys_are_used(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    env = client.env
    with env.agent(env.key) as sock:
        client.add_hosts(
            env.host_block(
                "viaagent", env.target, IdentityFile="none", IdentitiesOnly="no", IdentityAgent=sock
            )
        )
        assert client.make("viaagent").run(["true"]).ok
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        client.add_hosts(
            env.host_block(
                "envagent", env.target, IdentityFile="none", IdentitiesOnly="no", IdentityAgent=""
            )
        )
        assert client.make("envagent").run(["true"]).ok


@pytest.mark.ssh
def test_identities_only_limits_agent_keys(client: Client) -> None:
    env = client.env
    with env.agent(env.key) as sock:
        # The agent holds the right key, but IdentitiesOnly names only the wrong one.
        client.add_hosts(
            env.host_block("strict", env.jump, IdentityFile=str(env.wrong_key), IdentityAgent=sock)
        )
        with pytest.raises(AuthenticationFailed) as info:
            client.make("strict").connect()
        assert "agent key" not in str(info.value)
        client.add_hosts(
            env.host_block(
                "loose",
                env.jump,
                IdentityFile=str(env.wrong_key),
                IdentitiesOnly="no",
                IdentityAgent=sock,
            )
        )
        assert client.make("loose").run(["true"]).ok


@pytest.mark.ssh
def test_encrypted_key_passphrase_asked_once_even_across_reconnects(client: Client) -> None:
    env = client.env
    prompter = ScriptedPrompter(secrets=["not it", env.encrypted_passphrase])
    states: list[str] = []
    ex = client.make("enc", prompter, reconnect_delays=(0.2,), state_callback=states.append)
    assert ex.run(["true"]).ok
    asks = [c for c in prompter.calls if c[0] == "ask_secret"]
    assert len(asks) == 2 and asks[1][2].startswith("Wrong passphrase")
    assert str(env.encrypted_key) in asks[0][2]
    env.target.kill_sessions()
    # Every state it went through, not a poll of the current one: the reconnect may be quicker.
    assert wait_for(lambda: "reconnecting" in states)
    assert ex.wait_connected(15)
    assert ex.run(["true"]).ok
    assert len([c for c in prompter.calls if c[0] == "ask_secret"]) == 2


@pytest.mark.ssh
def test_slow_passphrase_past_login_grace_time_still_logs_in(client: Client) -> None:
    """sshd hangs up while the user types; the decrypted key is kept and used at once."""
    env = client.env
    server = env.start_server("grace", "LoginGraceTime 2")
    env.known_hosts(client.known_hosts, (server, "main"))
    client.add_hosts(env.host_block("grace", server, IdentityFile=str(env.encrypted_key)))

    class SlowTypist(ScriptedPrompter):
        def ask_secret(self, title: str, prompt: str) -> str | None:
            # Types until the server has hung up on this login (its connection processes
            # are gone), not "for longer than LoginGraceTime".
            assert wait_for(lambda: not server.session_pids(), 60), server.session_pids()
            return super().ask_secret(title, prompt)

    prompter = SlowTypist(secrets=[env.encrypted_passphrase])
    assert client.make("grace", prompter).run(["true"]).ok
    assert prompter.kinds() == ["ask_secret"]
    # Two logins reached the server: the one it dropped, and the quick second one.
    assert server.log_text().count("attempt 0 failures 0") == 2


# ----------------------------------------------------------------------- bad input


@pytest.mark.ssh
def test_unknown_alias_is_a_clear_error(client: Client) -> None:
    ex = client.make("no-such-alias.invalid")
    with pytest.raises(HostNotFound) as info:
        ex.connect()
    message = str(info.value)
    assert "no-such-alias.invalid" in message and "not a Host in the SSH config" in message


@pytest.mark.ssh
def test_refused_port_is_a_clear_error(client: Client) -> None:
    port = free_port()
    client.add_hosts(f"Host closed\n    HostName 127.0.0.1\n    Port {port}\n")
    with pytest.raises(ConnectFailed, match=f"127.0.0.1 port {port} refused"):
        client.make("closed").connect()
    # Refused behind a jump host: the jump host's answer is passed on.
    client.add_hosts(
        client.env.host_block("closedviajump", client.env.target, ProxyJump="jump", Port=str(port))
    )
    with pytest.raises(ConnectFailed, match=r"jump host .* could not connect to 127.0.0.1 port"):
        client.make("closedviajump").connect()


@pytest.mark.ssh
def test_silent_server_times_out(client: Client) -> None:
    with socket.socket() as listener:  # a real TCP peer that never speaks SSH
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        client.add_hosts(
            f"Host silent\n    HostName 127.0.0.1\n    Port {port}\n    ConnectTimeout 1\n"
        )
        start = time.monotonic()
        with pytest.raises(ConnectFailed, match="handshake"):
            client.make("silent", connect_timeout=None).connect()
        assert time.monotonic() - start < 8


@pytest.mark.ssh
def test_wrong_key_lists_what_was_tried(client: Client) -> None:
    env = client.env
    with pytest.raises(AuthenticationFailed) as info:
        client.make("wrongkey").connect()
    message = str(info.value)
    assert f"permission denied for ddptest@127.0.0.1:{env.jump.port}" in message
    assert f"key file {env.wrong_key}: rejected" in message
    assert "publickey" in message
    assert "Traceback" not in message


@pytest.mark.ssh
def test_garbage_answer_is_reported(client: Client) -> None:
    ex = client.make("garbage")
    with pytest.raises(RemoteProtocolError, match="garbage"):
        ex.run_batch(Batch(commands=[["true"]], reads=[FileRead("/etc/hostname")]))


@pytest.mark.ssh
def test_login_banner_noise_is_skipped(client: Client, tmp_path: Path) -> None:
    env = client.env
    root = make_tree(env.home / "noise-tree", owner=env.user)
    try:
        batch = reference_batch(root)
        ex = client.make("noise")
        assert ex.run_batch(batch) == LocalExecutor().run_batch(batch)
        # Plain commands see it like OpenSSH does: the ForceCommand printed it.
        assert ex.run(["echo", "x"]).stdout == f"{NOISE_LINE}\nx\n"
    finally:
        shutil.rmtree(root)


# ------------------------------------------------------------------------ commands


@pytest.mark.ssh
def test_run_quotes_argv_and_honours_env_cwd_stdin(client: Client) -> None:
    ex = client.make("target")
    args = ["a b", "c'd", 'e"f', "$HOME", "`id`", "*", ";", "x\ny", "", "-n", "ü", "\\"]
    res = ex.run(["printf", "%s\\0", *args])
    assert res.ok and res.stdout.split("\0")[:-1] == args
    assert ex.run(["sh", "-c", 'echo "$FOO"'], env={"FOO": "bar $baz"}).stdout == "bar $baz\n"
    assert ex.run(["pwd"], cwd="/tmp").stdout == "/tmp\n"
    assert ex.run(["pwd"], cwd="~").stdout == f"{client.env.home}\n"
    assert ex.run(["sh", "-c", "exit 7"]).returncode == 7
    assert ex.run(["cat"], stdin=b"fed\x00in").stdout == "fed\x00in"
    with pytest.raises(ExecutorError, match="no-such-program-xyz: command not found"):
        ex.run(["no-such-program-xyz"])
    with pytest.raises(ExecutorError, match="no such directory"):
        ex.run(["true"], cwd="/no/such/dir")
    with pytest.raises(ValueError):
        ex.run(["true"], env={"BAD NAME": "x"})


@pytest.mark.ssh
def test_large_outputs_on_both_streams(client: Client) -> None:
    ex = client.make("target")
    size = 20_000_000
    script = f"yes o | head -c {size} & yes e | head -c {size} >&2; wait"
    start = time.monotonic()
    res = ex.run(["sh", "-c", script], timeout=120)
    assert (len(res.stdout), len(res.stderr)) == (size, size)
    assert set(res.stdout) == {"o", "\n"} and set(res.stderr) == {"e", "\n"}
    # stdin and stdout both large at once
    payload = os.urandom(8_000_000)
    echoed = ex.run(["sh", "-c", "cat | od -An -v -tx1 | wc -l; echo done >&2"], stdin=payload)
    assert int(echoed.stdout) == (len(payload) + 15) // 16 and echoed.stderr == "done\n"
    assert int(ex.run(["wc", "-c"], stdin=payload).stdout.split()[0]) == len(payload)
    # and through the batch helper
    batch = Batch(commands=[["sh", "-c", script]])
    got = ex.run_batch(batch, timeout=120).commands[0]
    assert (len(got.stdout), len(got.stderr)) == (size, size)
    assert time.monotonic() - start < 120


@pytest.mark.ssh
def test_timeout_kills_the_remote_command(client: Client) -> None:
    ex = client.make("target")
    start = time.monotonic()
    with pytest.raises(CommandTimeout):
        ex.run(["sleep", "1001"], timeout=1)
    assert time.monotonic() - start < 5
    assert wait_for(lambda: not user_processes("sleep 1001"), 30)
    with pytest.raises(CommandTimeout):
        ex.run_batch(Batch(commands=[["sleep", "1002"]]), timeout=1)
    assert wait_for(lambda: not user_processes("sleep 1002"), 30)
    assert ex.run_batch(Batch(commands=[["echo", "after"]])).commands[0].stdout == "after\n"


@pytest.mark.ssh
@pytest.mark.parametrize("helper", ["auto", "python", "sh"])
def test_run_batch_equals_local_and_is_one_round_trip(
    client: Client, monkeypatch: pytest.MonkeyPatch, helper: str
) -> None:
    env = client.env
    root = make_tree(env.home / f"batch-{helper}", owner=env.user)
    try:
        batch = reference_batch(root)
        local = LocalExecutor().run_batch(batch)
        ex = client.make("target", batch_helper=helper)
        ex.connect()
        execs = ExecCounter(monkeypatch)
        for i in range(3):
            trips = ex.round_trips
            before = execs.count
            assert ex.run_batch(batch) == local
            assert ex.round_trips == trips + 1
            if helper == "auto":  # the persistent helper starts once
                assert execs.count - before == (1 if i == 0 else 0)
            else:
                assert execs.count - before == 1
        # The same errors as LocalExecutor for a missing program.
        missing = Batch(commands=[["no-such-program-xyz"]])
        with pytest.raises(ExecutorError, match="command not found"):
            LocalExecutor().run_batch(missing)
        with pytest.raises(ExecutorError, match="command not found"):
            ex.run_batch(missing)
        # ~ is the remote home
        tilde = Batch(reads=[FileRead(f"~/batch-{helper}/plain.txt", 0, 6)])
        assert ex.run_batch(tilde).reads[0].data == b"line 0"
    finally:
        shutil.rmtree(root)


@pytest.mark.ssh
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    contents=st.lists(st.binary(max_size=3000), min_size=1, max_size=5),
    offsets=st.lists(st.integers(-4000, 4000), min_size=5, max_size=5),
    limits=st.lists(st.one_of(st.none(), st.integers(0, 3000)), min_size=5, max_size=5),
)
def test_batch_reads_match_local_for_any_content(
    client: Client, contents: list[bytes], offsets: list[int], limits: list[int | None]
) -> None:
    env = client.env
    root = env.home / "prop"
    root.mkdir(exist_ok=True)
    paths = []
    for i, data in enumerate(contents):
        path = root / f"f{i}"
        path.write_bytes(data)
        paths.append(str(path))
    reads = [FileRead(paths[i % len(paths)], offsets[i], limits[i]) for i in range(5)]
    batch = Batch(commands=[["cat", paths[0]]], reads=reads)
    if not client.executors:
        client.make("target")
    assert client.executors[0].run_batch(batch) == LocalExecutor().run_batch(batch)


# ---------------------------------------------------------------------- resilience


@pytest.mark.ssh
@pytest.mark.parametrize("alias", ["target", "viajump"])
def test_killed_connection_reconnects_and_carries_on(client: Client, alias: str) -> None:
    env = client.env
    states: list[str] = []
    ex = client.make(alias, state_callback=states.append, reconnect_delays=(1.0, 1.0))
    log = env.home / f"follow-{alias}.log"
    log.write_bytes(b"")
    shutil.chown(log, env.user, env.user)
    received = b""
    written = b""

    def follow_once() -> None:
        nonlocal received
        received += ex.read_range(str(log), len(received))

    follow_once()
    for i in range(5):
        chunk = f"step {i}\n".encode()
        with open(log, "ab") as fh:
            fh.write(chunk)
        written += chunk
        follow_once()
    assert received == written

    # A command in flight when the connection dies reports ConnectionLost, not a result.
    # In flight by construction: it has started, and it cannot end before we let it.
    started, go = env.home / f"inflight-{alias}.started", env.home / f"inflight-{alias}.go"
    for path in (started, go):
        path.unlink(missing_ok=True)
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.1; done"
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(_catch(ex.run, ["sh", "-c", command])))
    runner.start()
    try:
        assert wait_for(started.exists, 30), "the command never started"
        killed = (env.jump if alias == "viajump" else env.target).kill_sessions()
        assert killed
        runner.join(15)
    finally:
        go.touch()  # the orphaned remote loop ends too
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionLost)
    with open(log, "ab") as fh:
        fh.write(b"while down\n")
    written += b"while down\n"
    # While reconnecting, operations fail fast with ConnectionLost ...
    assert wait_for(lambda: "reconnecting" in states)
    if ex.state == "reconnecting":
        with pytest.raises(ConnectionLost):
            follow_once()
    # ... and after the automatic reconnect the follow carries on, nothing lost or doubled.
    assert ex.wait_connected(20)
    follow_once()
    assert received == written
    assert states == ["connected", "reconnecting", "connected"]
    ex.close()
    assert states[-1] == "disconnected"


def _catch(fn: Callable[..., object], *args: object) -> object:
    try:
        return fn(*args)
    except Exception as exc:
        return exc


@pytest.mark.ssh
def test_frozen_server_is_noticed_by_keepalive_probes(client: Client) -> None:
    """A server that stops answering (no RST, as behind a dead network) is detected by
    ServerAliveInterval x ServerAliveCountMax, and the executor reconnects."""
    env = client.env
    client.add_hosts(
        env.host_block("alive", env.target, ServerAliveInterval="1", ServerAliveCountMax="2")
    )
    states: list[str] = []
    ex = client.make("alive", state_callback=states.append, reconnect_delays=(0.5,))
    ex.connect()
    frozen = env.target.session_pids()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        assert wait_for(lambda: "reconnecting" in states, 15)
        assert time.monotonic() - start < 8
        assert ex.wait_connected(15)
        assert ex.run(["echo", "back"]).stdout == "back\n"
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.ssh
def test_fatal_reconnect_error_disconnects(client: Client) -> None:
    """A host key that changed while we were away stops reconnecting (no retry loop)."""
    env = client.env
    states: list[str] = []
    ex = client.make("target", state_callback=states.append, reconnect_delays=(0.3,))
    ex.connect()
    impostor = env.root / "impostor-reconnect"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(impostor)], check=True)
    fake = " ".join(Path(f"{impostor}.pub").read_text().split()[:2])
    client.known_hosts.write_text(f"[127.0.0.1]:{env.target.port} {fake}\n")
    ex._trusted.clear()
    env.target.kill_sessions()
    assert wait_for(lambda: states[-1:] == ["disconnected"], 15)
    with pytest.raises(ConnectionLost, match="REMOTE HOST IDENTIFICATION HAS CHANGED"):
        ex.run(["true"])


# --------------------------------------------------------------------------- files


@pytest.mark.ssh
def test_sftp_file_operations(client: Client, tmp_path: Path) -> None:
    env = client.env
    ex = client.make("target")
    base = f"~/files-{os.getpid()}"
    local_base = env.home / f"files-{os.getpid()}"
    ex.makedirs(f"{base}/a/b/c")
    ex.makedirs(f"{base}/a/b/c")  # existing is fine
    assert (local_base / "a/b/c").is_dir()
    ex.write_atomic(f"{base}/a/x.json", b'{"v": 1}\n', mode=0o600)
    assert (local_base / "a/x.json").read_bytes() == b'{"v": 1}\n'
    assert oct((local_base / "a/x.json").stat().st_mode & 0o777) == "0o600"
    ex.write_atomic(f"{base}/a/x.json", b'{"v": 2}\n')
    assert ex.read_range(f"{base}/a/x.json") == b'{"v": 2}\n'
    assert ex.read_range(f"{base}/a/x.json", 2, 3) == b'v":'
    assert ex.read_range(f"{base}/a/x.json", 100) == b""
    assert ex.listdir(f"{base}/a") == ["b", "x.json"]
    st = ex.stat(f"{base}/a/x.json")
    local_st = (local_base / "a/x.json").stat()
    assert st is not None and st.size == local_st.st_size and not st.is_dir
    assert st.mtime == float(int(local_st.st_mtime))
    assert ex.stat(f"{base}/missing") is None
    # append is O_APPEND on the server: interleaved with a local appender, nothing lost
    ex.append(f"{base}/jobs.jsonl", b'{"job_id": "1"}\n')
    with open(local_base / "jobs.jsonl", "ab") as fh:
        fh.write(b'{"job_id": "local"}\n')
    ex.append(f"{base}/jobs.jsonl", b'{"job_id": "2"}\n')
    assert (local_base / "jobs.jsonl").read_bytes().splitlines() == [
        b'{"job_id": "1"}',
        b'{"job_id": "local"}',
        b'{"job_id": "2"}',
    ]
    ex.rename(f"{base}/a/x.json", f"{base}/a/y.json")
    assert ex.listdir(f"{base}/a") == ["b", "y.json"]
    assert ex.listdir(base) == ["a", "jobs.jsonl"]
    big = os.urandom(5 * 1024 * 1024 + 3)
    ex.write_atomic(f"{base}/big", big)
    assert ex.read_range(f"{base}/big") == big
    assert ex.read_range(f"{base}/big", 1234, 2_000_000) == big[1234 : 1234 + 2_000_000]
    with pytest.raises(FileNotFoundError):
        ex.read_range(f"{base}/missing")
    with pytest.raises(FileNotFoundError):
        ex.listdir(f"{base}/missing")
    with pytest.raises(FileExistsError):
        ex.makedirs(f"{base}/big")
    # upload_tree skips caches, keeps modes, merges into an existing dir
    src = tmp_path / "snapshot"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("x = 1\n")
    (src / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    (src / "pkg" / "mod.pyc").write_bytes(b"\0")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    ex.upload_tree(src, f"{base}/run1/code")
    dst = local_base / "run1" / "code"
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*")) == [
        "pkg",
        "pkg/__init__.py",
        "run.sh",
    ]
    assert (dst / "run.sh").stat().st_mode & 0o100
    assert (dst / "pkg" / "__init__.py").stat().st_uid == _ids(env.user)[0]
    ex.remove_tree(base)
    assert not local_base.exists()
    ex.remove_tree(base)  # absent is fine
    with pytest.raises(ValueError):
        ex.remove_tree("~")


@pytest.mark.ssh
def test_a_symlink_made_over_sftp_points_where_a_local_one_does(client: Client) -> None:
    """An adopted run's log links: the link reads as its target, over SSH and locally, and
    a link that exists already is refused, never replaced."""
    env = client.env
    ex = client.make("target")
    base = f"~/links-{os.getpid()}"
    local_base = env.home / f"links-{os.getpid()}"
    ex.makedirs(f"{base}/run")
    ex.write_atomic(f"{base}/job.out", b"line from the job\n")
    target = str(local_base / "job.out")
    ex.symlink(target, f"{base}/run/slurm-7.out")
    link = local_base / "run" / "slurm-7.out"
    assert link.is_symlink() and os.readlink(link) == target
    assert ex.read_range(f"{base}/run/slurm-7.out") == b"line from the job\n"
    read = ex.run_batch(Batch(reads=[FileRead(f"{base}/run/slurm-7.out")])).reads[0]
    assert read.data == b"line from the job\n" and not read.error
    with pytest.raises(OSError):
        ex.symlink(str(local_base / "other"), f"{base}/run/slurm-7.out")
    assert os.readlink(link) == target
    local = LocalExecutor()
    local.symlink(target, str(local_base / "local.out"))
    assert local.read_range(str(local_base / "local.out")) == b"line from the job\n"
    with pytest.raises(FileExistsError):
        local.symlink(target, str(local_base / "local.out"))
    ex.remove_tree(base)


@pytest.mark.ssh
def test_a_snapshot_upload_is_one_command_and_arrives_intact(
    client: Client, tmp_path: Path
) -> None:
    """create_run with a project: code/ and project/ in one tar stream, one command (after
    the one that checks the runs root's free space)."""
    env = client.env
    project = tmp_path / "project"
    (project / "pkg" / "deep" / "er").mkdir(parents=True)
    for i in range(120):
        (project / "pkg" / f"m{i}.py").write_text(f"VALUE = {i}\n" * (i + 1))
    (project / "pkg" / "deep" / "er" / "weights.bin").write_bytes(os.urandom(2 * 1024 * 1024 + 5))
    (project / "we'ird $name `x` ü.py").write_text("odd = True\n")
    (project / "empty.txt").write_bytes(b"")
    (project / "run.sh").write_text("#!/bin/sh\n")
    (project / "run.sh").chmod(0o755)
    (project / "latest.py").symlink_to("pkg/m7.py")
    manifest = build_manifest(project, max_bytes=64 << 20)
    ex = client.make("target")
    ex.connect()
    root = f"~/runs-{os.getpid()}"
    store = RunStore(ex, root)
    execs, trips = ex.exec_count, ex.round_trips
    run = store.create_run({"name": "snap"}, "snap", "#!/bin/bash\n", snapshot=manifest)
    # Two commands: the free-space check (df) before anything is made, then the upload.
    assert (ex.exec_count - execs, ex.round_trips - trips) == (2, 2)
    run_dir = env.home / f"runs-{os.getpid()}" / run.run_id
    dst = run_dir / "project"
    got = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    assert got == sorted(arc for _, arc in manifest.files)
    assert len(got) == 125
    for path, arc in manifest.files:
        assert (dst / arc).read_bytes() == Path(path).read_bytes(), arc
    assert not (dst / "latest.py").is_symlink()  # sent as the file it points to
    assert (dst / "run.sh").stat().st_mode & 0o100
    assert (dst / "pkg" / "m1.py").stat().st_uid == _ids(env.user)[0]
    assert (run_dir / "code" / "ddp_tui" / "trainer").is_dir()
    doc = json.loads((run_dir / "snapshot.json").read_text())
    assert (doc["files"], doc["bytes"]) == (125, manifest.total_bytes)
    upload = store.last_upload
    assert upload is not None and upload.project_files == 125
    assert upload.bytes > manifest.total_bytes  # the tar stream: headers and padding too
    ex.remove_tree(root)


# ------------------------------------------------------------ no server needed


def _run_helper(argv: list[str], request: bytes) -> tuple[int, bytes, bytes]:
    proc = subprocess.run(argv, input=request, capture_output=True, check=False, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("variant", ["python-spawn", "python-fork", "sh"])
def test_batch_helpers_locally_match_local_executor(tmp_path: Path, variant: str) -> None:
    """The helper programs run here (no SSH): same answers as LocalExecutor."""
    if variant == "sh" and (shutil.which("stat") is None or sys.platform != "linux"):
        pytest.skip("the sh helper needs GNU coreutils")
    root = make_tree(tmp_path / "tree")
    batch = reference_batch(root)
    nonce = new_nonce()
    reads = [(r.path, r.offset, r.max_bytes) for r in batch.reads]
    if variant == "sh":
        argv = ["sh", "-c", LAUNCHERS["sh"]]
    else:
        prelude = "import posix\ndel posix.posix_spawnp\n" if variant == "python-fork" else ""
        argv = [sys.executable, "-I", "-S", "-c", prelude + PY_HELPER]
    status, out, err = _run_helper(argv, build_request(nonce, batch.commands, reads))
    got = parse_response(batch, nonce, out, err, status, "here")
    assert got == LocalExecutor().run_batch(batch)


def test_truncated_answer_is_reported(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree")
    batch = Batch(commands=[["echo", "hi"]], reads=[FileRead(str(root / "plain.txt"))])
    nonce = new_nonce()
    request = build_request(nonce, batch.commands, [(str(root / "plain.txt"), 0, None)])
    _, out, err = _run_helper([sys.executable, "-I", "-S", "-c", PY_HELPER], request)
    assert parse_response(batch, nonce, b"motd\n" + out, err, 0, "h").commands[0].stdout == "hi\n"
    for broken in (out[:-30], out.replace(b" SIZES\n", b" SIZE\n"), b"", out[:40]):
        with pytest.raises(RemoteProtocolError):
            parse_response(batch, nonce, broken, b"", 0, "h")


def test_known_hosts_matching(tmp_path: Path) -> None:
    blob_a = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + b"A" * 32
    blob_b = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + b"B" * 32
    import base64

    a64, b64 = base64.b64encode(blob_a).decode(), base64.b64encode(blob_b).decode()
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "# comment\n"
        f"*.example.org,!bad.example.org ssh-ed25519 {a64}\n"
        f"[10.0.0.1]:2222 ssh-ed25519 {b64}\n"
        f"@revoked * ssh-ed25519 {b64}\n"
        "garbage line\n"
    )
    known = KnownHosts([str(kh)], global_files=())
    assert known.check("login.example.org", blob_a).status == "ok"
    assert known.check("bad.example.org", blob_a).status == "unknown"
    changed = known.check("login.example.org", blob_b)
    assert changed.status == "revoked"
    assert known.check("[10.0.0.1]:2222", blob_a).status == "changed"
    assert known.check("[10.0.0.1]:2222", blob_a).entry.line == 3  # type: ignore[union-attr]
    assert known.check("10.0.0.1", blob_a).status == "unknown"
    assert host_key_name("h", 22) == "h" and host_key_name("h", 2) == "[h]:2"
    known.add("new.host", blob_a)
    assert known.check("new.host", blob_a).status == "ok"
    assert "new.host" not in kh.read_text()  # hashed
    if shutil.which("ssh-keygen"):
        found = subprocess.run(
            ["ssh-keygen", "-F", "new.host", "-f", str(kh)], capture_output=True, check=False
        )
        assert found.returncode == 0
    assert fingerprint_sha256(blob_a).startswith("SHA256:") and "=" not in fingerprint_sha256(
        blob_a
    )


def test_ssh_config_resolution(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        "Host login\n"
        "    HostName login.cluster.example\n"
        "    User alice\n"
        "    Port 2200\n"
        "    IdentityFile ~/.ssh/cluster_key\n"
        "    IdentitiesOnly yes\n"
        "    ProxyJump bastion,inner\n"
        "    ServerAliveInterval 15\n"
        "    ConnectTimeout 7\n"
        "Host bastion\n"
        "    HostName bastion.example\n"
        "    ProxyJump gate\n"
        "Host gate\n"
        "    User gatekeeper\n"
        "Host inner\n"
        "    ProxyJump somewhere-else\n"
    )
    config = SSHConfigFile(str(cfg))
    login = config.resolve("login")
    assert (login.hostname, login.user, login.port) == ("login.cluster.example", "alice", 2200)
    assert login.identity_files == (os.path.expanduser("~/.ssh/cluster_key"),)
    assert login.identities_only and login.in_config
    assert login.server_alive_interval == 15 and login.connect_timeout == 7
    chain = config.hop_chain("login")
    # gate (bastion's own jump), bastion, inner (its ProxyJump ignored), login
    assert [h.alias for h in chain] == ["gate", "bastion", "inner", "login"]
    assert chain[0].user == "gatekeeper" and chain[2].proxy_jump == ()
    other = config.resolve("bob@elsewhere:2222")
    assert (other.user, other.hostname, other.port, other.in_config) == (
        "bob",
        "elsewhere",
        2222,
        False,
    )
    assert parse_destination("ssh://u@[::1]:22") == ("u", "::1", 22)
    assert parse_destination("fe80::1") == (None, "fe80::1", None)
    missing = SSHConfigFile(str(tmp_path / "nope"))
    assert missing.resolve("x").hostname == "x"
