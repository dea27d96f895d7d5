"""Resolve a host alias through ``~/.ssh/config`` the way OpenSSH does.

paramiko parses the file (Host/Match blocks, ``%h``-style tokens); this module turns its
answer into a typed :class:`HostConfig` and parses destinations such as
``user@host:port`` (ProxyJump entries) and ``ssh://user@host:port``.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, replace

import paramiko

from ddp_tui.remote.backends.ssh.api import SSHConfigError

DEFAULT_CONFIG_PATH = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
#: OpenSSH's default identities, restricted to the key types paramiko can use.
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
#: ProxyJump chains longer than this are treated as a loop in the configuration.
MAX_JUMP_DEPTH = 8


@dataclass(frozen=True)
class HostConfig:
    """Everything needed to reach one SSH server (one hop)."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    #: True when IdentityFile was configured; False means OpenSSH's defaults are used.
    identity_files_configured: bool
    identities_only: bool
    #: None: use $SSH_AUTH_SOCK; "none": no agent.
    identity_agent: str | None
    proxy_jump: tuple[str, ...]
    proxy_command: str | None
    server_alive_interval: float
    server_alive_count_max: int
    connect_timeout: float | None
    known_hosts_files: tuple[str, ...]
    host_key_alias: str | None
    password_prompts: int
    #: Whether the alias names a ``Host`` pattern in the file (for error messages).
    in_config: bool

    @property
    def display(self) -> str:
        """``user@host`` or ``user@host:port`` as shown to the user."""
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.user}@{self.hostname}{port}"


def parse_destination(text: str) -> tuple[str | None, str, int | None]:
    """Split ``[ssh://][user@]host[:port]`` (IPv6 as ``[addr]:port``) into its parts."""
    rest = text.strip()
    if rest.startswith("ssh://"):
        rest = rest[len("ssh://") :].rstrip("/")
    if not rest:
        raise SSHConfigError(f"empty SSH destination in {text!r}")
    user: str | None = None
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not user:
            raise SSHConfigError(f"empty user name in SSH destination {text!r}")
    port_text: str | None = None
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise SSHConfigError(f"unbalanced '[' in SSH destination {text!r}")
        host = rest[1:end]
        tail = rest[end + 1 :]
        if tail.startswith(":"):
            port_text = tail[1:]
        elif tail:
            raise SSHConfigError(f"unexpected {tail!r} after ']' in SSH destination {text!r}")
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        host = rest  # a name, or a bare IPv6 address without a port
    if not host:
        raise SSHConfigError(f"empty host name in SSH destination {text!r}")
    port: int | None = None
    if port_text is not None:
        port = _parse_port(port_text, f"SSH destination {text!r}")
    return user, host, port


def _parse_port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise SSHConfigError(f"bad port {text!r} in {where}") from None
    if not 0 < port < 65536:
        raise SSHConfigError(f"port {port} out of range in {where}")
    return port


def _float_option(options: dict[str, str], key: str, where: str) -> float | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise SSHConfigError(f"{where}: {key} must be a number, not {raw!r}") from None
    return value if value > 0 else None


class SSHConfigFile:
    """One parsed ssh_config file; a missing file behaves as an empty one."""

    def __init__(self, path: str | None = None) -> None:
        self.path = os.path.expanduser(path or DEFAULT_CONFIG_PATH)
        self._config = paramiko.SSHConfig()
        self._patterns: set[str] = set()
        if os.path.isfile(self.path):
            try:
                self._config = paramiko.SSHConfig.from_path(self.path)
            except (OSError, paramiko.ssh_exception.ConfigParseError) as exc:
                raise SSHConfigError(f"cannot read SSH config {self.path}: {exc}") from None
            except Exception as exc:  # paramiko raises plain errors for odd syntax
                raise SSHConfigError(f"cannot parse SSH config {self.path}: {exc}") from None
            self._patterns = {p.lower() for p in self._config.get_hostnames()}

    def resolve(self, destination: str) -> HostConfig:
        """The settings for ``destination`` (an alias, ``user@host``, ``host:port``...)."""
        user, host, port = parse_destination(destination)
        try:
            options: dict[str, str | list[str]] = dict(self._config.lookup(host))
        except Exception as exc:  # e.g. a "Match exec" that cannot run
            raise SSHConfigError(
                f"{self.path}: cannot evaluate settings for {host!r}: {exc}"
            ) from None
        where = f"{self.path} (Host {host})"
        scalars = {k: v for k, v in options.items() if isinstance(v, str)}

        hostname = scalars.get("hostname", host)
        if port is None:
            port = _parse_port(scalars["port"], where) if "port" in scalars else 22
        if user is None:
            user = scalars.get("user") or getpass.getuser()

        raw_ids = options.get("identityfile")
        configured = isinstance(raw_ids, list) and bool(raw_ids)
        id_list = raw_ids if isinstance(raw_ids, list) and raw_ids else list(DEFAULT_IDENTITIES)
        identity_files = tuple(os.path.expanduser(p) for p in id_list if p.lower() != "none")

        jump_raw = scalars.get("proxyjump", "").strip()
        proxy_jump: tuple[str, ...] = ()
        if jump_raw and jump_raw.lower() != "none":
            proxy_jump = tuple(j.strip() for j in jump_raw.split(",") if j.strip())
        proxy_command = scalars.get("proxycommand")
        if proxy_command is not None and proxy_command.strip().lower() == "none":
            proxy_command = None

        alive = _float_option(scalars, "serveraliveinterval", where) or 0.0
        count_raw = scalars.get("serveralivecountmax", "3")
        try:
            count_max = max(1, int(count_raw))
        except ValueError:
            raise SSHConfigError(f"{where}: ServerAliveCountMax {count_raw!r}") from None
        prompts_raw = scalars.get("numberofpasswordprompts", "3")
        try:
            password_prompts = max(1, int(prompts_raw))
        except ValueError:
            raise SSHConfigError(f"{where}: NumberOfPasswordPrompts {prompts_raw!r}") from None

        known_raw = scalars.get("userknownhostsfile", "")
        known = tuple(os.path.expanduser(p) for p in known_raw.split() if p.lower() != "none")
        agent_raw = scalars.get("identityagent")
        agent: str | None = None
        if agent_raw is not None and agent_raw.lower() == "none":
            agent = "none"
        elif agent_raw is not None and agent_raw not in ("SSH_AUTH_SOCK", "$SSH_AUTH_SOCK"):
            agent = os.path.expanduser(os.path.expandvars(agent_raw))

        return HostConfig(
            alias=host,
            hostname=hostname,
            port=port,
            user=user,
            identity_files=identity_files,
            identity_files_configured=configured,
            identities_only=scalars.get("identitiesonly", "no").lower() == "yes",
            identity_agent=agent,
            proxy_jump=proxy_jump,
            proxy_command=proxy_command,
            server_alive_interval=alive,
            server_alive_count_max=count_max,
            connect_timeout=_float_option(scalars, "connecttimeout", where),
            known_hosts_files=known or (os.path.expanduser(DEFAULT_KNOWN_HOSTS),),
            host_key_alias=scalars.get("hostkeyalias"),
            password_prompts=password_prompts,
            in_config=host.lower() in self._patterns,
        )

    def hop_chain(self, destination: str) -> list[HostConfig]:
        """Every hop to reach ``destination``, first jump host first, target last.

        As in OpenSSH, the first jump host's own ProxyJump applies (recursively); the
        later entries of a ``ProxyJump a,b`` list are reached through the previous hop.
        """
        return self._chain(destination, depth=0)

    def _chain(self, destination: str, depth: int) -> list[HostConfig]:
        if depth > MAX_JUMP_DEPTH:
            raise SSHConfigError(
                f"ProxyJump chain for {destination!r} is longer than {MAX_JUMP_DEPTH} hops "
                f"(a loop in {self.path}?)"
            )
        target = self.resolve(destination)
        if not target.proxy_jump:
            return [target]
        if target.proxy_command:
            raise SSHConfigError(
                f"{self.path}: {destination!r} sets both ProxyJump and ProxyCommand; keep one"
            )
        hops = self._chain(target.proxy_jump[0], depth + 1)
        for entry in target.proxy_jump[1:]:
            hop = self.resolve(entry)
            hops.append(_without_proxy(hop))
        hops.append(target)
        return hops


def _without_proxy(hop: HostConfig) -> HostConfig:
    return replace(hop, proxy_jump=(), proxy_command=None)
