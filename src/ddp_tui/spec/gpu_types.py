"""GPU types by name: what a cluster calls its GPUs, in plain words, and what a spec asks for.

Clusters name a GPU type as a GRES type (``gpu:h100:8``, or an autodetected
``nvidia_h100_80gb_hbm3``) or as a node feature (``--constraint=gpu_a100``).
:func:`normalise` maps either to a :class:`GpuKind` with a plain name (``H100 80GB``);
:func:`kinds_of_nodes` gathers a partition's kinds from its nodes (``sinfo`` ``%G`` and
``%f``); :func:`resolve_gpu_type` finds what a user typed (a raw type, any case, or a plain
name) among them. A spec's ``gpu_type`` holds the raw GRES type once resolved, or
``feature:NAME`` for a kind known only as a node feature (:func:`split_gpu_type` reads it
back for the job script). Pure functions; nothing here reads a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

#: What ``gpu_type`` may hold: a raw type, ``feature:NAME``, or a plain name (``H100 80GB``);
#: neither a space nor ``:`` at either end.
GPU_TYPE_PATTERN: Final = r"[A-Za-z0-9_.+-]([A-Za-z0-9_.:+ -]{0,62}[A-Za-z0-9_.+-])?"
#: How a resolved kind known only as a node feature is written in a spec.
FEATURE_PREFIX: Final = "feature:"
#: A raw type or feature as it can go on an ``#SBATCH`` line (``--gres=gpu:TYPE:N``).
RAW_PATTERN: Final = re.compile(r"[A-Za-z0-9_.+-]+")

# Words that name the vendor, product line or form factor, not the model: an autodetected
# type is the device name in lower case with "_" for spaces (``nvidia_a100-sxm4-80gb``).
_NOISE: Final = frozenset(
    {
        "nvidia", "tesla", "geforce", "quadro", "amd", "instinct", "gpu",
        "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "pcie", "hbm2", "hbm2e", "hbm3", "hbm3e",
    }
)  # fmt: skip
_MEMORY: Final = re.compile(r"(\d{1,4})gb?")
#: A feature that says only the memory (``gpu80g``): a qualifier, never a kind of its own.
_MEMORY_FEATURE: Final = re.compile(r"(?:gpu)?[-_]?(\d{1,4})gb?", re.IGNORECASE)

#: Model key (the words left, joined) -> (plain model name, the memory sizes it was sold
#: with in GB). A model with one size gets it; with several, only a name that says it.
_MODELS: Final[dict[str, tuple[str, tuple[int, ...]]]] = {
    "a100": ("A100", (40, 80)),
    "a800": ("A800", (40, 80)),
    "h100": ("H100", (80,)),
    "h100nvl": ("H100 NVL", (94,)),
    "h800": ("H800", (80,)),
    "h200": ("H200", (141,)),
    "gh200": ("GH200", (96, 144)),
    "b200": ("B200", (180,)),
    "v100": ("V100", (16, 32)),
    "v100s": ("V100S", (32,)),
    "l40s": ("L40S", (48,)),
    "l40": ("L40", (48,)),
    "l4": ("L4", (24,)),
    "a40": ("A40", (48,)),
    "a30": ("A30", (24,)),
    "a10": ("A10", (24,)),
    "rtxa6000": ("RTX A6000", (48,)),
    "a6000": ("RTX A6000", (48,)),
    "rtxa5000": ("RTX A5000", (24,)),
    "a5000": ("RTX A5000", (24,)),
    "rtx6000ada": ("RTX 6000 Ada", (48,)),
    "rtx8000": ("Quadro RTX 8000", (48,)),
    "rtx3090": ("RTX 3090", (24,)),
    "rtx4090": ("RTX 4090", (24,)),
    "rtx2080ti": ("RTX 2080 Ti", (11,)),
    "t4": ("T4", (16,)),
    "p100": ("P100", (12, 16)),
    "k80": ("K80", ()),
    "mi100": ("MI100", (32,)),
    "mi210": ("MI210", (64,)),
    "mi250": ("MI250", (128,)),
    "mi250x": ("MI250X", (128,)),
    "mi300x": ("MI300X", (192,)),
}


@dataclass(frozen=True)
class GpuKind:
    """One kind of GPU as a cluster names it: ``raw`` is the GRES type or node feature,
    ``model`` the plain model (the raw text itself for one not in the table)."""

    raw: str
    model: str
    memory_gb: int | None
    #: "gres" (a GRES type: ``--gres=gpu:RAW:N``) or "feature" (``--constraint=RAW``).
    source: str = "gres"
    #: Nodes that have it, where read from a partition (0: not counted).
    nodes: int = 0
    #: Whether the model is one the table knows (an unknown type is offered as it is).
    known: bool = True

    @property
    def plain(self) -> str:
        """``H100 80GB``; the model alone when its memory is unknown."""
        return f"{self.model} {self.memory_gb}GB" if self.memory_gb else self.model

    @property
    def request(self) -> str:
        """What a spec's ``gpu_type`` holds for this kind once resolved."""
        return self.raw if self.source == "gres" else f"{FEATURE_PREFIX}{self.raw}"

    def _bits(self, *, nodes: bool) -> list[str]:
        bits = (
            [f"{self.nodes} node{'s' if self.nodes != 1 else ''}"] if nodes and self.nodes else []
        )
        return [*bits, "feature"] if self.source == "feature" else bits

    @property
    def label(self) -> str:
        """``H100 80GB (h100, 16 nodes)``: how Compose offers it."""
        bits = ([] if self.plain == self.raw else [self.raw]) + self._bits(nodes=True)
        return f"{self.plain} ({', '.join(bits)})" if bits else self.plain

    def words(self, *, nodes: bool = True) -> str:
        """``h100 (H100 80GB, 2 nodes)``: how a message names it, by what a user types."""
        bits = ([] if self.plain == self.raw else [self.plain]) + self._bits(nodes=nodes)
        return f"{self.raw} ({', '.join(bits)})" if bits else self.raw


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[-_ ]+", text.lower()) if w]


def _model_and_memory(text: str) -> tuple[str, int | None] | None:
    """(model key, memory in GB or None) of a type name; None when it names no model."""
    memory: int | None = None
    rest: list[str] = []
    for word in _words(text):
        size = _MEMORY.fullmatch(word)
        if size is not None and memory is None:
            memory = int(size.group(1))
        elif word not in _NOISE:
            rest.append(word)
    key = "".join(rest)
    return (key, memory) if key in _MODELS else None


def normalise(raw: str, source: str = "gres") -> GpuKind | None:
    """The kind a GRES type or node feature names. A GRES type is always a kind (one the
    table does not know is offered by its own name); a feature only when it names a model
    (features also say ``ib`` or ``intel``), and a memory-only one (``gpu80g``) never."""
    found = _model_and_memory(raw)
    if found is None:
        if source != "gres" or not raw.strip():
            return None
        return GpuKind(raw, raw, None, source, known=False)
    key, memory = found
    model, sizes = _MODELS[key]
    if memory is None and len(sizes) == 1:
        memory = sizes[0]
    return GpuKind(raw, model, memory, source)


def gres_gpus(gres: str) -> list[tuple[str, int]]:
    """The GPUs of a GRES string as (type, count): ``gpu:a100:4(S:0-1),gpu:2,shard:8`` gives
    ``[("a100", 4), ("", 2)]``; ``gpu:tesla`` counts one, an unreadable count none."""
    out: list[tuple[str, int]] = []
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = parts[-1]
        if count.isdigit():
            out.append((parts[1] if len(parts) > 2 else "", int(count)))
        else:
            out.append((parts[1], 1 if len(parts) == 2 else 0))
    return out


def _memory_qualifier(features: Sequence[str]) -> int | None:
    for feature in features:
        if _model_and_memory(feature) is None and (size := _MEMORY_FEATURE.fullmatch(feature)):
            return int(size.group(1))
    return None


def node_kinds(gres: str, features: Sequence[str]) -> list[GpuKind]:
    """The kinds of one node: its GRES types; where its GPUs are untyped, the features that
    name a model. A memory-only feature fills in a kind's unknown memory."""
    typed = [t for t, count in gres_gpus(gres) if t and count > 0]
    if typed:
        kinds = [k for t in dict.fromkeys(typed) if (k := normalise(t)) is not None]
    elif any(count > 0 for _, count in gres_gpus(gres)):
        kinds = [k for f in features if (k := normalise(f, "feature")) is not None]
    else:
        return []
    memory = _memory_qualifier(features)
    if memory is None:
        return kinds
    return [k if k.memory_gb is not None else replace(k, memory_gb=memory) for k in kinds]


def kinds_of_nodes(nodes: Iterable[tuple[str, str, Sequence[str]]]) -> tuple[GpuKind, ...]:
    """The kinds of a partition from its nodes' (name, GRES, features), each with the
    number of nodes that have it, by plain name (a GRES type before a feature), then raw."""
    seen: dict[tuple[str, str], tuple[GpuKind, set[str]]] = {}
    for name, gres, features in nodes:
        for kind in node_kinds(gres, features):
            key = (kind.source, kind.raw)
            first, names = seen.setdefault(key, (kind, set()))
            names.add(name)
            if first.memory_gb != kind.memory_gb:  # nodes disagree: the memory is not known
                seen[key] = (replace(first, memory_gb=None), names)
    kinds = [replace(k, nodes=len(names)) for k, names in seen.values()]
    return tuple(sorted(kinds, key=lambda k: (k.plain.lower(), k.source != "gres", k.raw)))


def split_gpu_type(gpu_type: str) -> tuple[str, str]:
    """(GRES type, feature) of a spec's ``gpu_type``: ``("h100", "")``,
    ``("", "gpu_a100")`` for ``feature:gpu_a100``, ``("", "")`` for none."""
    text = gpu_type.strip()
    if text.startswith(FEATURE_PREFIX):
        return "", text.removeprefix(FEATURE_PREFIX)
    return text, ""


def render_error(gpu_type: str) -> str | None:
    """Why ``gpu_type`` cannot go on the job's ``#SBATCH`` lines as it is (None: it can). A
    plain name (``H100 80GB``) is resolved against the cluster's partitions first; without
    them (sinfo did not answer) only a raw type can be asked for."""
    if not isinstance(gpu_type, str) or not re.fullmatch(GPU_TYPE_PATTERN, gpu_type):
        return None  # none asked, or validate() reports it
    gres, feature = split_gpu_type(gpu_type)
    if RAW_PATTERN.fullmatch(gres or feature):
        return None
    return (
        f"{gpu_type!r} is not a type as the cluster names it, and the cluster's partitions "
        "were not read to find it: give the raw GRES type (e.g. h100), or feature:NAME"
    )


def and_words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def resolve_gpu_type(asked: str, kinds: Sequence[GpuKind]) -> GpuKind | tuple[GpuKind, ...]:
    """The kind of ``kinds`` that ``asked`` names; else every kind it could mean (none: it
    is not there; several: it is ambiguous, since one job cannot ask for either of two GRES
    types).

    An exact raw type wins (a GRES type before a feature of the same name); then one of
    another case (Slurm's types are case-sensitive: it refuses ``H100`` for ``h100``); then
    the plain name, by model and, where ``asked`` says it, memory."""
    text = " ".join(asked.split())
    gres, feature = split_gpu_type(text)
    if feature:
        return next((k for k in kinds if k.source == "feature" and k.raw == feature), ())
    exact = sorted((k for k in kinds if k.raw == gres), key=lambda k: k.source != "gres")
    if exact:
        return exact[0]
    for hits in (
        [k for k in kinds if k.raw.lower() == gres.lower()],
        [k for k in kinds if k.plain.lower() == gres.lower()],
        _same_model(gres, kinds),
    ):
        if hits:
            return hits[0] if len(hits) == 1 else tuple(hits)
    return ()


def _same_model(asked: str, kinds: Sequence[GpuKind]) -> list[GpuKind]:
    wanted = normalise(asked)
    if wanted is None or not wanted.known:
        return []
    return [
        k
        for k in kinds
        if k.known
        and k.model == wanted.model
        and (_model_and_memory(asked) or ("", None))[1] in (None, k.memory_gb)
    ]
