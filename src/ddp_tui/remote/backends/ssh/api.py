"""What the UI needs from the SSH executor, without importing paramiko.

The :class:`Prompter` protocol is how the executor asks the user something (a host key,
a passphrase, a two-factor code). The errors are :class:`ExecutorError` subclasses whose
messages are meant to be shown as they are: one plain paragraph, never a traceback.
"""

from __future__ import annotations

from typing import Final, Protocol

from ddp_tui.remote.backends.executor import ExecutorError

#: Values passed to the executor's ``state_callback``.
CONNECTED: Final = "connected"
RECONNECTING: Final = "reconnecting"
DISCONNECTED: Final = "disconnected"


class Prompter(Protocol):
    """Asks the user; implemented by the TUI (modals) and by tests (scripted answers).

    Every method is called from a worker thread (or paramiko's transport thread for
    keyboard-interactive) and may block until the user answers.
    """

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        """Trust an unknown host key? ``fingerprint`` is ``SHA256:<base64, no padding>``."""
        ...

    def ask_secret(self, title: str, prompt: str) -> str | None:
        """A passphrase or password; None when the user cancels."""
        ...

    def keyboard_interactive(
        self, title: str, instructions: str, prompts: list[tuple[str, bool]]
    ) -> list[str] | None:
        """Answers to server prompts ``(text, echo)`` in order; None when the user cancels."""
        ...


class NoPrompter:
    """A prompter for non-interactive use: trusts nothing new and knows no secrets."""

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        return False

    def ask_secret(self, title: str, prompt: str) -> str | None:
        return None

    def keyboard_interactive(
        self, title: str, instructions: str, prompts: list[tuple[str, bool]]
    ) -> list[str] | None:
        return None


class SSHError(ExecutorError):
    """Base class of every SSH failure."""


class SSHConfigError(SSHError):
    """``~/.ssh/config`` (or a destination string) could not be used."""


class HostNotFound(SSHError):
    """The alias or host name does not resolve to an address."""


class ConnectFailed(SSHError):
    """TCP connect, a jump host's forward or the SSH handshake failed."""


class ConnectTimeout(ConnectFailed):
    """The server did not answer within ConnectTimeout."""


class HostKeyError(SSHError):
    """Host key verification failed; nothing was sent to the server."""


class HostKeyRejected(HostKeyError):
    """The user did not trust an unknown host key."""


class HostKeyChanged(HostKeyError):
    """The server's key differs from the one in known_hosts (or is revoked)."""

    def __init__(
        self,
        message: str,
        *,
        host: str,
        port: int,
        key_type: str,
        fingerprint: str,
        known_hosts_file: str,
        line: int,
    ) -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.known_hosts_file = known_hosts_file
        self.line = line


class AuthenticationFailed(SSHError):
    """No authentication method was accepted (or the user cancelled)."""

    def __init__(
        self, message: str, *, tried: list[str] | None = None, server_closed: bool = False
    ) -> None:
        super().__init__(message)
        self.tried = list(tried or [])
        #: The server hung up during authentication (too many tries, or LoginGraceTime).
        self.server_closed = server_closed


class ConnectionLost(SSHError):
    """The connection dropped; the operation's outcome is unknown. Reconnecting runs
    in the background (see the state callback)."""


class RemoteProtocolError(SSHError):
    """The remote side answered something that is not what was asked for."""
