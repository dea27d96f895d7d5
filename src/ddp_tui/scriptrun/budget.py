"""A script's step budget, read from its own arguments: ``--max_iters 600``,
``--max-steps=600``, nanoGPT's ``--max_iters=600`` override, Hydra's ``trainer.max_steps=600``.

Progress is by steps where the budget is known (``450/600 it``); the spec's ``max_steps`` field,
when given, wins over what is read here.
"""

from __future__ import annotations

from collections.abc import Sequence

#: What scripts call their step budget (normalised: lower case, ``-`` as ``_``).
BUDGET_NAMES = frozenset(
    {
        "max_iters",
        "max_iter",
        "max_iterations",
        "max_steps",
        "max_step",
        "num_iterations",
        "num_iters",
        "num_steps",
        "num_train_steps",
        "total_steps",
        "total_iters",
        "train_steps",
        "training_steps",
        "iters",
        "iterations",
    }
)


def _name(word: str) -> str:
    """``--max-steps`` -> ``max_steps``; ``trainer.max_steps`` -> ``max_steps``."""
    return word.lstrip("-").lower().replace("-", "_").rsplit(".", 1)[-1]


def steps_budget(args: Sequence[str]) -> int | None:
    """The last step budget the arguments set, or None (a budget of 0 or less is none)."""
    found: int | None = None
    words = list(args)
    for i, word in enumerate(words):
        key, sep, value = word.partition("=")
        if not sep:
            if not word.startswith("-") or i + 1 >= len(words):
                continue
            value = words[i + 1]
        if _name(key) not in BUDGET_NAMES:
            continue
        try:
            number = int(float(value)) if value.strip() else 0
        except ValueError:
            continue
        if number > 0:
            found = number
    return found
