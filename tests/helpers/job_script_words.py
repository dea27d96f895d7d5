"""The words a rendered job script hands its launcher, as bash reads them."""

from __future__ import annotations

import shlex


def launch_words(script: str) -> list[str]:
    """The words of the job script's ``ARGS=( ... )`` array (shell-quoted there, one a line)."""
    lines = script.splitlines()
    start = lines.index("ARGS=(")
    end = lines.index(")", start)
    return shlex.split("\n".join(lines[start + 1 : end]))


def script_words(script: str) -> list[str]:
    """The user's script and its arguments: the launch words after the wrapper's ``--``."""
    words = launch_words(script)
    return words[words.index("--") + 1 :]
