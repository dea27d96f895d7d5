"""Remote mode: the executor interface over one paramiko connection.

``SSHExecutor("mycluster", prompter=ui)`` resolves ``mycluster`` through ``~/.ssh/config``
(:mod:`.config`: HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyJump chains,
ProxyCommand, ServerAliveInterval/CountMax, ConnectTimeout, UserKnownHostsFile,
HostKeyAlias, IdentityAgent), opens the hops (:mod:`.transport`), checks host keys
against known_hosts (:mod:`.hostkeys`: unknown keys are shown to the :class:`Prompter`,
changed ones refused) and logs in (:mod:`.auth`: agent, key files with passphrases asked
once per session, keyboard-interactive and password, in that order). The executor
(:mod:`.connection`) owns the connection state and delegates commands to :mod:`.commands`
and files to :mod:`.files` (one SFTP session). ``run_batch`` answers a whole refresh with
one request to a helper program (:mod:`.batch`, :mod:`.batch_helper`). When the connection
drops, operations raise :class:`ConnectionLost` while a background thread reconnects with
capped backoff; ``state_callback`` hears "reconnecting", "connected" and "disconnected".
What the UI needs (:mod:`.api`: the prompter protocol, the errors) imports no paramiko,
so :class:`SSHExecutor` is loaded only when first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddp_tui.remote.backends.ssh.api import (
    CONNECTED,
    DISCONNECTED,
    RECONNECTING,
    AuthenticationFailed,
    ConnectFailed,
    ConnectionLost,
    ConnectTimeout,
    HostKeyChanged,
    HostKeyError,
    HostKeyRejected,
    HostNotFound,
    NoPrompter,
    Prompter,
    RemoteProtocolError,
    SSHConfigError,
    SSHError,
)

if TYPE_CHECKING:
    from ddp_tui.remote.backends.ssh.connection import SSHExecutor

__all__ = [
    "CONNECTED",
    "DISCONNECTED",
    "RECONNECTING",
    "AuthenticationFailed",
    "ConnectFailed",
    "ConnectTimeout",
    "ConnectionLost",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyRejected",
    "HostNotFound",
    "NoPrompter",
    "Prompter",
    "RemoteProtocolError",
    "SSHConfigError",
    "SSHError",
    "SSHExecutor",
]


def __getattr__(name: str) -> object:
    # Lazy, so that importing the API (or this package) does not load paramiko.
    if name == "SSHExecutor":
        from ddp_tui.remote.backends.ssh.connection import SSHExecutor

        return SSHExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
