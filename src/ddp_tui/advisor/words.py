"""How the advice writes its numbers in prose (a sentence reads "4.2 min", not "252.1")."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``3.2 s``, ``4.5 min``, ``2.3 h``, ``1.5 d``: three significant figures at most."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def size_words(world_size: int, nodes: int, per_node: int) -> str:
    """``world size 4 (2x2)``: the ranks, and nodes x ranks per node."""
    return f"world size {world_size} ({nodes}x{per_node})"
