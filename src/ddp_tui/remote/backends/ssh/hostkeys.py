"""known_hosts, read and written the way OpenSSH does.

Reads plain entries (with ``*``/``?`` wildcards, ``!negation`` and ``[host]:port``),
hashed entries (``|1|salt|hmac``), ``@revoked`` lines; ``@cert-authority`` lines are
ignored (paramiko has no host certificates). Keeps line numbers so that a changed key
can name the offending ``FILE:LINE`` as OpenSSH does. New keys are appended hashed,
like OpenSSH with ``HashKnownHosts yes`` (Debian's and Ubuntu's default).
:class:`HostKeyPolicy` decides, per hop, whether a server's key is accepted.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ddp_tui.remote.backends.ssh.api import HostKeyChanged, HostKeyRejected, Prompter

if TYPE_CHECKING:  # config imports paramiko; this module does not need it
    from ddp_tui.remote.backends.ssh.config import HostConfig

#: Read (never written) after the user's own files, as OpenSSH does.
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")

_TYPE_NAMES = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA"}


def host_key_name(host: str, port: int) -> str:
    """The name OpenSSH looks up: ``host`` on port 22, ``[host]:port`` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint_sha256(blob: bytes) -> str:
    """OpenSSH's ``SHA256:<base64 without padding>`` fingerprint of a public key blob."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def key_type_of(blob: bytes) -> str:
    """The algorithm name written at the start of a public key blob."""
    if len(blob) < 4:
        raise ValueError("public key blob too short")
    (length,) = struct.unpack(">I", blob[:4])
    if length > len(blob) - 4:
        raise ValueError("public key blob truncated")
    return blob[4 : 4 + length].decode("ascii", "replace")


def display_type(key_type: str) -> str:
    """``ED25519``, ``ECDSA``, ``RSA``: how OpenSSH names a key type in its messages."""
    if key_type.startswith("ecdsa-"):
        return "ECDSA"
    return _TYPE_NAMES.get(key_type, key_type.upper())


def _hash_name(salt: bytes, name: str) -> bytes:
    return hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()


def _glob(pattern: str, name: str) -> bool:
    if "*" not in pattern and "?" not in pattern:
        return pattern == name
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, name, flags=re.DOTALL) is not None


@dataclass(frozen=True)
class KnownHostEntry:
    path: str
    line: int  # 1-based
    marker: str | None  # "@revoked", "@cert-authority" or None
    hosts: str  # the raw host field (patterns or one |1|salt|hash)
    key_type: str
    key_blob: bytes

    def matches(self, name: str) -> bool:
        if self.hosts.startswith("|1|"):
            parts = self.hosts[3:].split("|")
            if len(parts) != 2:
                return False
            try:
                salt = base64.b64decode(parts[0], validate=True)
                digest = base64.b64decode(parts[1], validate=True)
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(_hash_name(salt, name), digest)
        lowered = name.lower()
        matched = False
        for raw in self.hosts.split(","):
            negated = raw.startswith("!")
            pattern = (raw[1:] if negated else raw).lower()
            if pattern and _glob(pattern, lowered):
                if negated:
                    return False
                matched = True
        return matched


@dataclass(frozen=True)
class HostKeyCheck:
    status: Literal["ok", "unknown", "changed", "revoked"]
    #: The offending entry for "changed" / "revoked"; the matching one for "ok".
    entry: KnownHostEntry | None = None
    #: Key types known for the host when the server's type is not among them.
    other_types: list[str] = field(default_factory=list)


def parse_known_hosts(path: str) -> list[KnownHostEntry]:
    """Entries of one file; missing or unreadable files and malformed lines are skipped."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    entries: list[KnownHostEntry] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        marker = None
        if fields[0].startswith("@"):
            marker = fields.pop(0)
        if len(fields) < 3:
            continue
        hosts, key_type, key_b64 = fields[:3]
        try:
            blob = base64.b64decode(key_b64, validate=True)
        except (binascii.Error, ValueError):
            continue
        entries.append(KnownHostEntry(path, number, marker, hosts, key_type, blob))
    return entries


class KnownHosts:
    """The known_hosts files of one connection: the first of ``files`` receives new keys."""

    def __init__(self, files: Sequence[str], global_files: Sequence[str] = GLOBAL_KNOWN_HOSTS):
        if not files:
            raise ValueError("at least one known_hosts file is needed")
        self.files = [os.path.expanduser(f) for f in files]
        self.global_files = list(global_files)
        self.write_path = self.files[0]

    def entries(self) -> list[KnownHostEntry]:
        found: list[KnownHostEntry] = []
        for path in [*self.files, *self.global_files]:
            found.extend(parse_known_hosts(path))
        return found

    def matching(self, name: str) -> list[KnownHostEntry]:
        return [e for e in self.entries() if e.marker != "@cert-authority" and e.matches(name)]

    def known_types(self, name: str) -> list[str]:
        """Key types on record for ``name``, in file order, without duplicates."""
        types: list[str] = []
        for entry in self.matching(name):
            if entry.marker is None and entry.key_type not in types:
                types.append(entry.key_type)
        return types

    def check(self, name: str, blob: bytes) -> HostKeyCheck:
        key_type = key_type_of(blob)
        entries = self.matching(name)
        for entry in entries:
            if entry.marker == "@revoked" and entry.key_blob == blob:
                return HostKeyCheck("revoked", entry)
        plain = [e for e in entries if e.marker is None]
        for entry in plain:
            if entry.key_blob == blob:
                return HostKeyCheck("ok", entry)
        for entry in plain:
            if entry.key_type == key_type:
                return HostKeyCheck("changed", entry)
        return HostKeyCheck("unknown", None, [e.key_type for e in plain])

    def add(self, name: str, blob: bytes) -> None:
        """Append ``name``'s key, hashed; creates the file (and ``~/.ssh``) if needed."""
        salt = os.urandom(20)
        host_field = "|1|{}|{}".format(
            base64.b64encode(salt).decode("ascii"),
            base64.b64encode(_hash_name(salt, name)).decode("ascii"),
        )
        line = f"{host_field} {key_type_of(blob)} {base64.b64encode(blob).decode('ascii')}\n"
        directory = os.path.dirname(self.write_path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(self.write_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(fd, "r+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                size = os.fstat(fh.fileno()).st_size
                prefix = b""
                if size:
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        prefix = b"\n"
                fh.write(prefix + line.encode("ascii"))
                fh.flush()
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def changed_key_message(
    name: str, key_type: str, fingerprint: str, entry: KnownHostEntry, *, revoked: bool = False
) -> str:
    """The warning for a changed (or revoked) host key, worded after OpenSSH's."""
    kind = display_type(key_type)
    if revoked:
        return (
            f"@@@ WARNING: REVOKED HOST KEY DETECTED! @@@\n"
            f"The {kind} host key for {name} is marked as revoked in "
            f"{entry.path}:{entry.line}.\n"
            f"This could mean that a stolen key is being used to impersonate this host.\n"
            f"Host key verification failed; nothing was sent to the server."
        )
    return (
        "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\n"
        "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n"
        "Someone could be eavesdropping on you right now (man-in-the-middle attack)!\n"
        "It is also possible that a host key has just been changed.\n"
        f"The fingerprint for the {kind} key sent by the remote host {name} is\n"
        f"{fingerprint}.\n"
        "Please contact your system administrator.\n"
        f"Offending {display_type(entry.key_type)} key in {entry.path}:{entry.line}\n"
        f"If the change is expected, remove the old key with: "
        f"ssh-keygen -R '{name}' -f {entry.path}\n"
        f"Host key verification failed; nothing was sent to the server."
    )


class HostKeyPolicy:
    """Accepts a server's key as OpenSSH does: known keys pass, a changed or revoked key
    is refused without asking, an unknown key is shown to the user (the prompter) and
    saved when accepted.

    ``known_hosts_path``, when given, is the only file used (read and written); otherwise
    each hop's UserKnownHostsFile plus the global files. ``trusted`` remembers keys
    accepted this session, so a reconnect does not ask again even when known_hosts could
    not be written; ``warnings`` receives such non-fatal problems.
    """

    def __init__(
        self,
        prompter: Prompter,
        *,
        known_hosts_path: str | None,
        trusted: set[tuple[str, bytes]],
        warnings: list[str],
    ) -> None:
        self.prompter = prompter
        self._known_hosts_path = known_hosts_path
        self.trusted = trusted
        self.warnings = warnings

    def known_hosts(self, hop: HostConfig) -> KnownHosts:
        if self._known_hosts_path is not None:
            return KnownHosts([self._known_hosts_path], global_files=())
        return KnownHosts(hop.known_hosts_files)

    @staticmethod
    def key_name(hop: HostConfig) -> str:
        if hop.host_key_alias:
            return hop.host_key_alias
        return host_key_name(hop.hostname, hop.port)

    def known_types(self, hop: HostConfig) -> list[str]:
        """Key types on record for ``hop``, to ask the server for one of them first."""
        return self.known_hosts(hop).known_types(self.key_name(hop))

    def verify(self, hop: HostConfig, blob: bytes) -> None:
        """Return if the server key ``blob`` is accepted; raise a HostKeyError if not."""
        key_type = key_type_of(blob)
        fingerprint = fingerprint_sha256(blob)
        name = self.key_name(hop)
        if (name, blob) in self.trusted:
            return
        known = self.known_hosts(hop)
        check = known.check(name, blob)
        if check.status == "ok":
            return
        if check.status in ("changed", "revoked"):
            assert check.entry is not None
            raise HostKeyChanged(
                changed_key_message(
                    name, key_type, fingerprint, check.entry, revoked=check.status == "revoked"
                ),
                host=hop.hostname,
                port=hop.port,
                key_type=key_type,
                fingerprint=fingerprint,
                known_hosts_file=check.entry.path,
                line=check.entry.line,
            )
        if not self.prompter.confirm_host_key(hop.hostname, hop.port, key_type, fingerprint):
            raise HostKeyRejected(
                f"the {display_type(key_type)} host key of {name} ({fingerprint}) was not "
                "accepted; not connecting"
            )
        self.trusted.add((name, blob))
        try:
            known.add(name, blob)
        except OSError as exc:
            self.warnings.append(
                f"could not save the host key of {name} to {known.write_path}: {exc.strerror}"
            )
