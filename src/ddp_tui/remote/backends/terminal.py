"""The user's terminal, handed to an interactive command (a shell where a job runs).

:meth:`~ddp_tui.remote.backends.executor.LocalExecutor.interactive` runs a local process on it
(:func:`run_on_terminal`); the SSH executor bridges it to a remote pty and uses the raw mode,
the size and the window-change signal from here (``ssh/interactive.py``). Whatever the
command does to the terminal, its mode and its foreground process group are given back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import termios
import threading
import tty
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from ddp_tui.errors import DdpTuiError

#: Used when the output is not a terminal (a test's pipe): what most terminals start at.
DEFAULT_SIZE = (80, 24)


class TerminalError(DdpTuiError):
    """An interactive command could not be given the terminal."""

    title = "Shell"


def terminal_fd(stream: object, fallback: int) -> int:
    """The file descriptor of ``stream`` (``sys.stdin``, ``sys.stdout``), else ``fallback``
    (a replaced stream, e.g. captured output, has none)."""
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return fallback


def terminal_size(fd: int) -> tuple[int, int]:
    """(columns, rows) of the terminal on ``fd``; :data:`DEFAULT_SIZE` when it is none."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return DEFAULT_SIZE
    return (size.columns or DEFAULT_SIZE[0], size.lines or DEFAULT_SIZE[1])


def _main_thread() -> bool:
    # signal.signal works in the main thread only; elsewhere the handlers stay as they are.
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def saved_mode(fd: int) -> Iterator[None]:
    """Restore the terminal mode of ``fd`` as it was on entry, however the block ends (a
    command killed in raw mode would leave the user's terminal unusable)."""
    try:
        before = termios.tcgetattr(fd)
    except (termios.error, OSError):
        yield  # not a terminal: nothing to restore
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSADRAIN, before)


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[bool]:
    """``fd`` in raw mode (every key, ctrl+c included, goes to the remote side as a byte),
    restored on exit; yields False, changing nothing, when ``fd`` is not a terminal."""
    if not os.isatty(fd):
        yield False
        return
    with saved_mode(fd):
        tty.setraw(fd, termios.TCSANOW)
        yield True


@contextlib.contextmanager
def signals_handled(
    handlers: dict[int, Callable[[int, FrameType | None], object]],
) -> Iterator[None]:
    """Install ``handlers`` for the block (main thread only), then the previous ones again."""
    if not _main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A handler that does nothing. Not SIG_IGN: an ignored signal stays ignored in a child
    after exec, and the shell must still be interruptible."""


def reclaim_foreground(fd: int) -> None:
    """Make this process's group the terminal's foreground group again: a job-control shell
    moves the terminal to its own groups, and one that ends without moving it back would
    leave the app in the background (stopped at its first read of the terminal)."""
    if not _main_thread():
        return
    with contextlib.suppress(OSError):
        if os.tcgetpgrp(fd) == os.getpgrp():
            return
        # Asking from the background raises SIGTTOU, which would stop this process.
        with signals_handled({signal.SIGTTOU: _ignore}):
            os.tcsetpgrp(fd, os.getpgrp())


def exit_status(returncode: int) -> int:
    """A process's exit status as a shell reports it (128 + N when signal N ended it)."""
    return 128 - returncode if returncode < 0 else returncode


def run_on_terminal(argv: Sequence[str], *, cwd: str | None = None) -> int:
    """Run ``argv`` here with this process's terminal and wait for it; its exit status.

    While it runs, ctrl+c and ctrl+\\ are the command's: this process notes and drops its own
    copy of the signal. Afterwards the terminal's mode and foreground group are restored.
    """
    if not argv:
        raise ValueError("run_on_terminal() needs a non-empty argv")
    if cwd is not None and not os.path.isdir(cwd):
        raise TerminalError(f"{cwd}: no such directory here")
    fd = terminal_fd(sys.__stdin__, 0)
    with saved_mode(fd), signals_handled({signal.SIGINT: _ignore, signal.SIGQUIT: _ignore}):
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd)
        except FileNotFoundError as exc:
            raise TerminalError(f"{argv[0]}: command not found") from exc
        except OSError as exc:
            raise TerminalError(f"{argv[0]}: {exc.strerror or exc}") from exc
        try:
            returncode = proc.wait()
        finally:
            if os.isatty(fd):
                reclaim_foreground(fd)
    return exit_status(returncode)
