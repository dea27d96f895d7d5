"""Slurm host lists (``n[1-2]``, ``gpu[01-03,07],login1``) expanded to host names.

The trainer has its own copy (``ddp_tui.trainer.nodelist``): it is copied into each run
directory and imports nothing of the app, and nothing of the app may import it. Both follow
Slurm's grammar; a bracket group is a comma list of numbers and ranges whose zero padding
follows the lower bound, and a name may hold several groups (``r[1-2]n[1-2]``).
"""

from __future__ import annotations

import itertools
import re

_GROUP = re.compile(r"\[([^\[\]]*)\]")


def _top_level(text: str) -> list[str]:
    """``text`` split on the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth not in (0, 1):
            raise ValueError(f"unbalanced or nested brackets in host list {text!r}")
        if char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _numbers(group: str, whole: str) -> list[str]:
    """``01-03,07`` -> ``01 02 03 07``."""
    out: list[str] = []
    for piece in (p.strip() for p in group.split(",")):
        low, dash, high = piece.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"bad range {piece!r} in host list {whole!r}")
        if not dash:
            out.append(low)
        elif int(high) < int(low):
            raise ValueError(f"descending range {piece!r} in host list {whole!r}")
        else:
            out.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
    return out


def expand_hostlist(text: str) -> list[str]:
    """The host names of a Slurm host list, in its order (``n[1-2],m3`` -> n1 n2 m3); a
    host named twice is kept once. Raises ValueError on a malformed list."""
    hosts: list[str] = []
    for item in _top_level(text.strip()):
        # Literal text and bracket groups alternate: "r", "1-2", "n", "1-2", "".
        pieces = _GROUP.split(item)
        if any(c in piece for piece in pieces[::2] for c in "[]"):
            raise ValueError(f"unbalanced brackets in host list {text!r}")
        choices = [[p] if i % 2 == 0 else _numbers(p, text) for i, p in enumerate(pieces)]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return list(dict.fromkeys(hosts))
