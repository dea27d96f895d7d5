"""A program on a terminal of its own (a pseudo-terminal), driven like a user would: keys
in, screen text out, the window resized; and the terminal's mode read before and after.

The test keeps both ends: the program gets the slave end as its controlling terminal (so
it hears SIGWINCH and may switch it to raw mode), the test reads and writes the master end
and can still read the slave's mode once the program has exited.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from typing import Any


def _take_terminal() -> None:
    # In the child, after setsid: the slave (its stdin) becomes its controlling terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtySession:
    """``argv`` running on a fresh pty of ``columns`` x ``rows``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        columns: int = 100,
        rows: int = 30,
    ) -> None:
        self.master, self.slave = os.openpty()
        self.resize(columns, rows)
        self.mode_before = termios.tcgetattr(self.slave)
        self.output = bytearray()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_take_terminal,  # the only way to give it a controlling terminal
        )

    def resize(self, columns: int, rows: int) -> None:
        """Change the window size (the kernel sends SIGWINCH to the program)."""
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: no process holds the slave any more
            return False
        self.output += data
        return bool(data)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def expect(self, pattern: str, *, after: int = 0, timeout: float = 30.0) -> re.Match[str]:
        """Wait until the output from offset ``after`` matches ``pattern`` (a regex)."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.output[after:].decode("utf-8", "replace"))
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {pattern!r}; the program wrote:\n{self.text}"
                )
            self._read(0.1)

    def wait(self, timeout: float = 30.0) -> int:
        """The program's exit status, once it has exited (its last output read)."""
        returncode = self.proc.wait(timeout)
        while self._read(0.05):
            pass
        return returncode

    def mode(self) -> list[Any]:
        return termios.tcgetattr(self.slave)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)
        os.close(self.slave)
