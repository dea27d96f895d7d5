"""Field values by kind: from the text a form or the CLI gives, back to that text, and the
JSON types a saved spec may hold.

A field's kind (bool, int, optint, float, optfloat, str, strlist, env) comes from its type
annotation; ``lines`` marks a list field whose text holds one item per line rather than
shell words (``env_setup``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any, Final

#: What each kind is, in words, for a saved spec of the wrong JSON type.
KIND_WORDS: Final = {
    "bool": "true or false",
    "int": "an integer",
    "optint": "an integer or null",
    "float": "a number",
    "optfloat": "a number or null",
    "str": "a string",
    "strlist": "a list of strings",
    "env": "a table of NAME = value strings",
}
#: The kind of each type annotation a spec field may have.
KIND_OF_TYPE: Final = {
    "bool": "bool",
    "int": "int",
    "int | None": "optint",
    "float": "float",
    "float | None": "optfloat",
    "str": "str",
    "tuple[str, ...]": "strlist",
    "tuple[tuple[str, str], ...]": "env",
}

_TRUE: Final = frozenset({"1", "true", "yes", "on", "y"})
_FALSE: Final = frozenset({"0", "false", "no", "off", "n"})


def is_int(value: object) -> bool:
    """An int that is not a bool (JSON and Python both let True pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _conv_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"must be yes or no (true/false, 1/0), got {text!r}")


def _conv_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"must be an integer, got {text!r}") from None


def _conv_optint(text: str) -> int | None:
    return None if not text.strip() else _conv_int(text)


def _conv_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


def _conv_optfloat(text: str) -> float | None:
    return None if not text.strip() else _conv_float(text)


def _conv_str(text: str) -> str:
    return text.strip()


def _conv_lines(text: str) -> tuple[str, ...]:
    # One shell line per line of the text box; blank lines carry nothing.
    return tuple(line.rstrip() for line in text.split("\n") if line.strip())


def _conv_words(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as e:
        raise ValueError(f"cannot split into words ({e}), got {text!r}") from None


def _conv_env(text: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for word in _conv_words(text):
        # Commas separate items too (A=1,B=2), but a piece without "=" continues the value
        # before it, so that NCCL_IB_HCA=mlx5_0,mlx5_1 stays one item.
        pieces = [p for p in word.split(",") if p]
        for i, piece in enumerate(pieces):
            key, sep, value = piece.partition("=")
            if sep:
                pairs.append((key, value))
            elif i:
                pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]},{piece}")
            else:
                raise ValueError(f"each item must be NAME=value, got {word!r}")
    return tuple(pairs)


_CONVERTERS: Final[dict[str, Callable[[str], Any]]] = {
    "bool": _conv_bool,
    "int": _conv_int,
    "optint": _conv_optint,
    "float": _conv_float,
    "optfloat": _conv_optfloat,
    "str": _conv_str,
    "strlist": _conv_words,
    "env": _conv_env,
}


def from_text(kind: str, text: str, *, lines: bool = False) -> Any:
    """The value ``text`` stands for; raises ValueError saying what is allowed."""
    return _conv_lines(text) if lines else _CONVERTERS[kind](text)


def to_text(kind: str, value: Any, *, lines: bool = False) -> str:
    """``value`` as the text :func:`from_text` reads back to it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if lines:
        return "\n".join(value)
    if kind == "env":
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in value)
    if isinstance(value, tuple | list):
        return shlex.join(value)
    return str(value)


def json_type_ok(kind: str, value: object) -> bool:
    """Whether a saved spec's ``value`` has the JSON type a field of ``kind`` takes."""
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return is_int(value)
    if kind == "optint":
        return value is None or is_int(value)
    if kind == "float":
        return is_int(value) or isinstance(value, float)
    if kind == "optfloat":
        return value is None or is_int(value) or isinstance(value, float)
    if kind == "str":
        return isinstance(value, str)
    if kind == "strlist":
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return isinstance(value, list | tuple) and all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in value
    )
