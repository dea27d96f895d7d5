"""Slurm host-list expansion (``gpu[01-03,07],n[1-2]``) without Slurm binaries."""

from __future__ import annotations

import itertools


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested brackets in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _expand_range(spec: str, whole: str) -> list[str]:
    """``01-03,07`` -> ``['01', '02', '03', '07']``; zero padding follows the lower bound."""
    out: list[str] = []
    for piece in spec.split(","):
        piece = piece.strip()
        if not piece:
            raise ValueError(f"empty range in host list {whole!r}")
        low, sep, high = piece.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"bad range {piece!r} in host list {whole!r}")
        if not sep:
            out.append(low)
            continue
        start, stop = int(low), int(high)
        if stop < start:
            raise ValueError(f"descending range {piece!r} in host list {whole!r}")
        width = len(low)
        out.extend(str(n).zfill(width) for n in range(start, stop + 1))
    return out


def _expand_host(pattern: str) -> list[str]:
    """One host pattern, possibly with several bracket groups (``r[1-2]n[1-2]``)."""
    pieces: list[list[str]] = []
    rest = pattern
    while "[" in rest:
        head, _, tail = rest.partition("[")
        inner, closed, rest = tail.partition("]")
        if not closed:
            raise ValueError(f"unbalanced '[' in host list {pattern!r}")
        pieces.append([head])
        pieces.append(_expand_range(inner, pattern))
    if "]" in rest:
        raise ValueError(f"unbalanced ']' in host list {pattern!r}")
    pieces.append([rest])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm node list into host names, in order (duplicates kept, as Slurm does)."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_host(item))
    return hosts


def first_host(text: str) -> str:
    """The first host of a node list: the rendezvous host for one-task-per-GPU jobs."""
    hosts = expand_nodelist(text)
    if not hosts:
        raise ValueError(f"empty host list {text!r}")
    return hosts[0]
