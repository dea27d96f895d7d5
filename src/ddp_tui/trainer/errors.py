"""Errors that the entry points turn into exit codes and one-line messages (never tracebacks)."""

from __future__ import annotations


class UsageError(Exception):
    """A bad command-line argument or input; exit code 2. The message names the argument."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"argument {argument}: {message}")
        self.argument = argument
        self.message = message


class RendezvousError(RuntimeError):
    """The process group could not be formed; the message says where it waited and why."""
