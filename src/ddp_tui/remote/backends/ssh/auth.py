"""Authentication: which secrets to offer, in which order, asking the user through the
:class:`Prompter`.

:meth:`AuthStrategy.sources` yields what to try next (agent keys, then key files, then
keyboard-interactive rounds, then password prompts, as OpenSSH orders them);
:meth:`AuthStrategy.authenticate` tries each on the transport and keeps score. Sources
are produced one at a time because a partial success (two-factor logins) changes which
methods the server still accepts.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import paramiko
from paramiko.agent import AgentSSH
from paramiko.pkey import PublicBlob

from ddp_tui.remote.backends.ssh.api import AuthenticationFailed, ConnectFailed, Prompter
from ddp_tui.remote.backends.ssh.config import HostConfig
from ddp_tui.remote.backends.ssh.hostkeys import display_type, fingerprint_sha256, key_type_of
from ddp_tui.remote.backends.ssh.transport import CONNECTION_TROUBLE

_log = logging.getLogger(__name__)

#: Keyboard-interactive rounds offered per login.
KBD_ROUNDS = 3


@dataclass
class AuthSource:
    """One thing to try: a label for messages, and paramiko's call that tries it.

    ``interruption``, for prompts answered inside paramiko's call, says afterwards
    whether the user cancelled (or the prompter failed): that ends the login.
    """

    label: str
    attempt: Callable[[], list[str]]
    interruption: Callable[[], BaseException | None] = lambda: None


class _PromptCancelled(Exception):
    """Raised inside paramiko's handler to abort the login without sending answers."""


class _KeyboardInteractive:
    """paramiko's keyboard-interactive handler, answering through the prompter.

    paramiko calls it on its transport thread. On cancel (or a prompter error) it raises,
    which ends the transport at once: sending blank answers instead would count as a
    failed login on the server (and costs PAM's failure delay).
    """

    def __init__(self, prompter: Prompter, hop: HostConfig) -> None:
        self.prompter = prompter
        self.hop = hop
        self.cancelled = False
        self.error: BaseException | None = None

    def __call__(self, title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        if not prompts:
            return []  # an informational round (PAM sends one after the password)
        try:
            answers = self.prompter.keyboard_interactive(
                title or f"Login to {self.hop.display}",
                instructions,
                [(str(text), bool(echo)) for text, echo in prompts],
            )
        except Exception as exc:
            self.error = exc
            raise _PromptCancelled from exc
        if answers is None or len(answers) != len(prompts):
            self.cancelled = True
            raise _PromptCancelled
        return [str(a) for a in answers]


class _Login:
    """One login on one transport: what the server still accepts, and what was tried."""

    def __init__(self, transport: paramiko.Transport, hop: HostConfig) -> None:
        self.transport = transport
        self.hop = hop
        self.remaining: list[str] = []
        self.allowed_first: list[str] = []
        self.tried: list[str] = []
        #: Whether the last attempt got us further (success or partial success).
        self.progressed = False

    def start(self) -> bool:
        """The "none" method: True when it is enough; learns the methods allowed."""
        try:
            self.transport.auth_none(self.hop.user)
            self.remaining = []
        except paramiko.BadAuthenticationType as exc:
            self.remaining = list(exc.allowed_types)
        except paramiko.AuthenticationException:
            self.remaining = ["publickey", "keyboard-interactive", "password"]
        except CONNECTION_TROUBLE as exc:
            raise ConnectFailed(
                f"{self.hop.display} closed the connection before authentication: {exc}"
            ) from None
        self.allowed_first = list(self.remaining)
        return self.transport.is_authenticated()

    def attempt(self, source: AuthSource) -> None:
        """Try one source; sets :attr:`progressed`."""
        self.progressed = False
        try:
            result = source.attempt()
        except paramiko.BadAuthenticationType as exc:
            self.remaining = list(exc.allowed_types)
            self.tried.append(f"{source.label}: not allowed")
            return
        except paramiko.AuthenticationException:
            self.tried.append(f"{source.label}: rejected")
            return
        except CONNECTION_TROUBLE as exc:
            self.tried.append(f"{source.label}: {exc or type(exc).__name__}")
            raise self.failed(closed=True) from None
        self.progressed = True
        if self.transport.is_authenticated():
            return
        self.remaining = list(result or [])
        self.tried.append(
            f"{source.label}: accepted, the server wants more ({', '.join(self.remaining)})"
        )

    def cancelled(self, method: str) -> AuthenticationFailed:
        tried = self.tried
        before = f" (tried before: {'; '.join(tried)})" if tried else ""
        return AuthenticationFailed(
            f"login to {self.hop.display} cancelled at the {method} prompt{before}", tried=tried
        )

    def failed(self, *, closed: bool) -> AuthenticationFailed:
        methods = ", ".join(self.allowed_first) or "none"
        attempts = "; ".join(self.tried) or "nothing (no usable key, and no prompt was possible)"
        extra = (
            " The server closed the connection (too many failed attempts, or the login took "
            "longer than its LoginGraceTime)."
            if closed
            else ""
        )
        return AuthenticationFailed(
            f"permission denied for {self.hop.display} (the server accepts: {methods}). "
            f"Tried: {attempts}.{extra}",
            tried=self.tried,
            server_closed=closed,
        )


class AuthStrategy:
    """How this executor logs in. Decrypted key files are kept in :attr:`key_cache` for
    the session, so a passphrase is asked once however often it reconnects."""

    def __init__(self, prompter: Prompter) -> None:
        self.prompter = prompter
        self.key_cache: dict[str, paramiko.PKey] = {}

    def authenticate(self, transport: paramiko.Transport, hop: HostConfig) -> None:
        """Log in as ``hop.user``; raises :class:`AuthenticationFailed` (or ConnectFailed)."""
        login = _Login(transport, hop)
        if login.start():
            return
        agent, agent_keys = self._agent_keys(hop)
        try:
            for source in self.sources(login, agent_keys):
                try:
                    login.attempt(source)
                except Exception:
                    if source.interruption() is None:
                        raise
                interrupted = source.interruption()
                if interrupted is not None:
                    raise interrupted
        finally:
            if agent is not None:
                with contextlib.suppress(Exception):
                    getattr(agent, "_close")()  # noqa: B009 - private, untyped
        if not transport.is_authenticated():
            raise login.failed(closed=not transport.is_active())

    def sources(self, login: _Login, agent_keys: list[paramiko.PKey]) -> Iterator[AuthSource]:
        """What to try next, until logged in or out of options: the keys (agent, then key
        files) once, then keyboard-interactive rounds, then password prompts, each only
        while the server accepts that method (re-read after every attempt)."""
        transport, hop, user = login.transport, login.hop, login.hop.user
        pubkey_done = False
        kbd_left, password_left = KBD_ROUNDS, hop.password_prompts
        while not transport.is_authenticated():
            if not transport.is_active():
                raise login.failed(closed=True)
            if "publickey" in login.remaining and not pubkey_done:
                pubkey_done = True
                for label, key in self._public_keys(hop, agent_keys, login.tried):
                    if not transport.is_active():
                        break
                    yield AuthSource(label, functools.partial(transport.auth_publickey, user, key))
                    if login.progressed:
                        break
                continue
            if "keyboard-interactive" in login.remaining and kbd_left > 0:
                kbd_left -= 1
                handler = _KeyboardInteractive(self.prompter, hop)

                def interruption(handler: _KeyboardInteractive = handler) -> BaseException | None:
                    if handler.error is not None:
                        return handler.error
                    return login.cancelled("keyboard-interactive") if handler.cancelled else None

                yield AuthSource(
                    "keyboard-interactive",
                    functools.partial(transport.auth_interactive, user, handler),
                    interruption,
                )
                continue
            if "password" in login.remaining and password_left > 0:
                password_left -= 1
                secret = self.prompter.ask_secret(
                    f"Password for {hop.display}", f"{hop.user}@{hop.hostname}'s password:"
                )
                if secret is None:
                    raise login.cancelled("password")
                yield AuthSource(
                    "password",
                    functools.partial(transport.auth_password, user, secret, fallback=False),
                )
                continue
            return

    def _agent_keys(self, hop: HostConfig) -> tuple[AgentSSH | None, list[paramiko.PKey]]:
        if hop.identity_agent == "none":
            return None, []
        agent: AgentSSH
        try:
            if hop.identity_agent is None:
                agent = paramiko.Agent()
            else:
                agent = AgentSSH()
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(hop.identity_agent)
                # paramiko has no public way to use an agent socket given by path.
                getattr(agent, "_connect")(conn)  # noqa: B009 - private, untyped
            keys: list[paramiko.PKey] = list(agent.get_keys())
        except Exception as exc:
            _log.info("ssh-agent not usable: %s", exc)
            return None, []
        return agent, keys

    def _public_keys(
        self, hop: HostConfig, agent_keys: list[paramiko.PKey], tried: list[str]
    ) -> Iterator[tuple[str, paramiko.PKey]]:
        """Agent keys, then key files (loaded lazily: a passphrase is asked only if reached)."""
        seen: set[bytes] = set()
        if hop.identities_only:
            wanted = set()
            for path in hop.identity_files:
                with contextlib.suppress(Exception):
                    wanted.add(PublicBlob.from_file(path + ".pub").key_blob)
                cached = self.key_cache.get(path)
                if cached is not None:
                    wanted.add(cached.asbytes())
            agent_keys = [k for k in agent_keys if k.asbytes() in wanted]
        for key in agent_keys:
            blob = key.asbytes()
            seen.add(blob)
            yield f"agent key {display_type(key_type_of(blob))} {fingerprint_sha256(blob)}", key
        for path in hop.identity_files:
            file_key = self._load_key(path, hop, tried)
            if file_key is None or file_key.asbytes() in seen:
                continue
            seen.add(file_key.asbytes())
            yield f"key file {path}", file_key

    def _load_key(self, path: str, hop: HostConfig, tried: list[str]) -> paramiko.PKey | None:
        cached = self.key_cache.get(path)
        if cached is not None:
            return cached
        if not os.path.exists(path):
            if hop.identity_files_configured:
                tried.append(f"key file {path}: not found")
            return None
        try:
            key = paramiko.PKey.from_path(path)
        except TypeError:  # cryptography: "password-protected, but password was not provided"
            pass
        except Exception as exc:
            tried.append(f"key file {path}: cannot load ({exc})")
            return None
        else:
            self.key_cache[path] = key
            return key
        prompt = f"Enter passphrase for key '{path}':"
        for _ in range(3):
            secret = self.prompter.ask_secret("Key passphrase", prompt)
            if not secret:
                tried.append(f"key file {path}: no passphrase given")
                return None
            try:
                # paramiko 5.1 hands the password straight to cryptography, which wants bytes.
                key = paramiko.PKey.from_path(path, cast(str, secret.encode("utf-8")))
            except Exception:
                prompt = f"Wrong passphrase. Enter passphrase for key '{path}':"
                continue
            self.key_cache[path] = key
            return key
        tried.append(f"key file {path}: wrong passphrase")
        return None
