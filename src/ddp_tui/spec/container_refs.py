"""Image references and mounts, read as each container runtime reads them: pyxis takes an
image as a file only when it starts with ``/`` or ``.`` (its args.c), enroot separates a
registry with ``#``, apptainer reads a path or a URI with a scheme, podman a name; a mount is
``SRC[:DST[:ro|rw]]`` with absolute paths, since ``,`` and ``:`` separate the runtimes' own
lists (their documented syntax: README "Environments and containers"). Pure.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Final

from ddp_tui.spec.checks import CONTROL_RE

__all__ = [
    "APPTAINER_LIKE",
    "SQUASH_SUFFIXES",
    "ImageRef",
    "Mount",
    "looks_like_registry_host",
    "parse_image",
    "parse_mount",
    "under",
]

#: The runtimes that read an image file with apptainer's rules (singularity is its ancestor).
APPTAINER_LIKE: Final = ("apptainer", "singularity")
#: Image file suffixes each runtime reads as a file rather than a registry name.
SQUASH_SUFFIXES: Final = (".sqsh", ".squashfs", ".sqfs")
_APPTAINER_URI_SCHEMES: Final = ("docker://", "docker-archive:", "oras://", "library://", "shub://")
_MOUNT_PATH_RE: Final = re.compile(r"/[^\s,:'\"\\$`]*")


# -- mounts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """One bind mount: ``source`` on the host at ``target`` inside, read-only or not."""

    source: str
    target: str
    read_only: bool = False

    @property
    def text(self) -> str:
        """``SRC:DST[:ro]``, as ``container_mounts`` holds it (:func:`parse_mount` reads it)."""
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")

    def covers(self, path: str) -> bool:
        """Whether host ``path`` is this mount's source or under it."""
        return under(path, self.source)


def under(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def parse_mount(text: str) -> Mount:
    """``SRC[:DST[:ro|rw]]`` with absolute paths and no ``,`` or ``:`` inside them (pyxis
    separates mounts with ``,`` and the parts with ``:``; apptainer and podman the same).
    Raises ValueError naming what is wrong."""
    if not text or CONTROL_RE.search(text) or any(c.isspace() for c in text):
        raise ValueError(f"{text!r}: a mount is SRC[:DST[:ro|rw]] without spaces")
    if "," in text:
        raise ValueError(
            f"{text}: one mount per item (',' separates mounts in --container-mounts and --bind)"
        )
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"{text}: at most SRC:DST:MODE (':' cannot be part of a path)")
    source = parts[0]
    if len(parts) == 2 and parts[1] in ("ro", "rw"):
        raise ValueError(f"{text}: the mode comes third: write {source}:{source}:{parts[1]}")
    target = parts[1] if len(parts) > 1 and parts[1] else source
    mode = parts[2] if len(parts) > 2 else "rw"
    if mode not in ("ro", "rw"):
        raise ValueError(f"{text}: the mode must be ro or rw, got {mode!r}")
    for what, path in (("source", source), ("target", target)):
        if not _MOUNT_PATH_RE.fullmatch(path):
            raise ValueError(
                f"{text}: the {what} must be an absolute path (pyxis mounts need / or ./, and "
                "the job starts in the run directory, so ./ would name the run directory); "
                "no quotes, $ or \\ in it"
            )
    return Mount(posixpath.normpath(source), posixpath.normpath(target), mode == "ro")


# -- image references --------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRef:
    """An image reference as ``runtime`` reads it.

    ``kind``: ``registry`` (pulled by name: an enroot URI for pyxis, a docker/oras URI or a
    name for the others), ``squashfs`` (a .sqsh file), ``sif`` (a .sif file), ``sandbox``
    (a directory), or ``file`` (another path). ``path`` is set for the file kinds, ``registry``
    and ``name`` for a registry image (the registry is "" for the runtime's default)."""

    text: str
    runtime: str
    kind: str
    path: str = ""
    registry: str = ""
    name: str = ""

    @property
    def is_file(self) -> bool:
        return self.kind != "registry"


def parse_image(text: str, runtime: str) -> ImageRef:
    """How ``runtime`` reads image ``text``: pyxis takes a file only when it starts with ``/``
    or ``.`` (its args.c), apptainer a path or a URI with a scheme, podman a name or a
    transport."""
    if runtime == "pyxis":
        if text.startswith(("/", ".")):
            return ImageRef(text, runtime, _file_kind(text), path=text)
        user_host, sep, name = text.rpartition("#")
        registry = user_host.rpartition("@")[2] if sep else ""
        return ImageRef(text, runtime, "registry", registry=registry, name=name)
    if runtime in APPTAINER_LIKE:
        if text.startswith(_APPTAINER_URI_SCHEMES):
            scheme, _, rest = text.partition(":")
            return ImageRef(text, runtime, "registry", registry=scheme, name=rest.lstrip("/"))
        return ImageRef(text, runtime, _file_kind(text), path=text)
    # podman: a path only through a transport (oci-archive:, dir:); else a name
    if text.startswith(("/", "./", "../")):
        return ImageRef(text, runtime, _file_kind(text), path=text)
    first, slash, rest = text.partition("/")
    registry = first if slash and looks_like_registry_host(first) else ""
    return ImageRef(text, runtime, "registry", registry=registry, name=rest if registry else text)


def _file_kind(path: str) -> str:
    if path.endswith(SQUASH_SUFFIXES):
        return "squashfs"
    if path.endswith(".sif"):
        return "sif"
    if path.endswith("/"):
        return "sandbox"
    return "file"


def looks_like_registry_host(word: str) -> bool:
    """A first path component that names a registry host: ``nvcr.io``, ``host:5000``,
    ``localhost`` (Docker's own rule for the first component of a reference)."""
    return "." in word or ":" in word or word == "localhost"
