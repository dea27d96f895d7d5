"""Delivering the events this process claimed: the profile's ``notify_command``, and the
desktop notification's terminal escape sequence.

``notify_command`` runs on this machine (where ddp-tui runs, not the cluster) through
``sh -c``, with the event as one JSON object on stdin, never on its command line: a run's
name is the user's text, and a shell must never read it. Each command runs in a thread of
its own with a timeout, so neither the app's screen nor a refresh waits for it; a failure is
reported, never raised. A CLI process waits for its commands (:meth:`NotifyCommand.wait`,
bounded) before it exits.

The desktop notification is an OSC escape sequence written to the terminal, which SSH and
tmux pass on to the terminal emulator on the user's desk: OSC 9 (iTerm2, WezTerm, ghostty),
OSC 777 (VTE terminals such as GNOME Terminal and Tilix, and foot). Under tmux
the sequence is wrapped in tmux's passthrough (tmux needs ``allow-passthrough on``).
Everything here but :class:`NotifyCommand` is a pure function. See docs/notifications.md.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Mapping

from ddp_tui.remote.model.events import NotifyEvent

#: How long one notify_command may run before it is killed.
COMMAND_TIMEOUT_SEC = 30.0
#: The longest text a desktop notification carries (terminals cut or refuse long OSCs).
MAX_TEXT = 200

ESC = "\x1b"
BEL = "\x07"
ST = ESC + "\\"

#: $TERM_PROGRAM values whose terminal shows OSC 9 as a desktop notification.
_OSC9_PROGRAMS = ("iTerm.app", "WezTerm", "ghostty")


# -- the terminal's escape sequences (pure) ---------------------------------------------


def sanitize(text: str, *, field: bool = False) -> str:
    """``text`` safe inside an OSC string: control characters (ESC, BEL, newlines...)
    become spaces, and for an OSC 777 field ``;`` (its separator) becomes ``,``. Cut to
    :data:`MAX_TEXT` characters."""
    out = "".join(" " if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) else c for c in text)
    if field:
        out = out.replace(";", ",")
    out = " ".join(out.split())
    return out if len(out) <= MAX_TEXT else out[: MAX_TEXT - 1] + "…"


def osc9(text: str) -> str:
    """``ESC ] 9 ; text BEL``: iTerm2's notification, understood by many terminals."""
    return f"{ESC}]9;{sanitize(text)}{BEL}"


def osc777(title: str, body: str) -> str:
    """``ESC ] 777 ; notify ; title ; body BEL``: rxvt-unicode's notification, which VTE
    terminals and foot show."""
    return f"{ESC}]777;notify;{sanitize(title, field=True)};{sanitize(body, field=True)}{BEL}"


def tmux_wrap(sequence: str) -> str:
    """``sequence`` in tmux's passthrough: ``ESC P tmux; ... ESC \\``, every ESC inside
    doubled, so that tmux hands it to the outer terminal untouched."""
    return f"{ESC}Ptmux;{sequence.replace(ESC, ESC + ESC)}{ST}"


def pick_osc(mode: str, env: Mapping[str, str]) -> str | None:
    """The sequence kind to use, ``"osc9"``, ``"osc777"`` or None, for the profile's
    ``desktop_notify`` and the terminal the environment names (``auto``)."""
    if mode in ("osc9", "osc777"):
        return mode
    if mode != "auto":
        return None
    program = env.get("TERM_PROGRAM", "")
    term = env.get("TERM", "")
    if program in _OSC9_PROGRAMS or term == "xterm-ghostty":
        return "osc9"
    if env.get("VTE_VERSION") or term.startswith("foot"):
        return "osc777"
    # Under tmux, $TERM is tmux's own; the outer terminal is only known where tmux passed
    # $TERM_PROGRAM on (it does for a new session). Unknown: no sequence rather than junk.
    return None


def desktop_sequence(title: str, body: str, mode: str, env: Mapping[str, str]) -> str | None:
    """The escape sequence that shows ``title`` and ``body`` as a desktop notification, or
    None where ``mode`` and the terminal call for none."""
    kind = pick_osc(mode, env)
    if kind is None:
        return None
    seq = osc9(f"{title}: {body}" if body else title) if kind == "osc9" else osc777(title, body)
    return tmux_wrap(seq) if env.get("TMUX") else seq


def event_sequence(event: NotifyEvent, mode: str, env: Mapping[str, str]) -> str | None:
    """:func:`desktop_sequence` for one event."""
    return desktop_sequence(event.title, event.body, mode, env)


def event_json(event: NotifyEvent) -> bytes:
    """The bytes ``notify_command`` reads: one JSON object and a newline."""
    return (json.dumps(event.to_json(), separators=(",", ":"), allow_nan=False) + "\n").encode()


# -- notify_command ---------------------------------------------------------------------


class NotifyCommand:
    """Runs the profile's ``notify_command`` once per event, each in a thread of its own."""

    def __init__(
        self,
        command: str,
        *,
        on_error: Callable[[str], None],
        timeout_sec: float = COMMAND_TIMEOUT_SEC,
    ) -> None:
        self.command = command
        self.on_error = on_error
        self.timeout_sec = timeout_sec
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def send(self, event: NotifyEvent) -> None:
        """Start the command for ``event`` and return at once (nothing when none is set)."""
        if not self.command.strip():
            return
        # Daemon: a CLI waits for it only as long as wait() allows, never at interpreter exit.
        t = threading.Thread(target=self._run, args=(event,), name="notify-command", daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _run(self, event: NotifyEvent) -> None:
        what = f"notify_command for {event.title.removeprefix('ddp-tui: ')}"
        try:
            res = subprocess.run(
                ["sh", "-c", self.command],
                input=event_json(event),
                capture_output=True,
                timeout=self.timeout_sec,
                check=False,
            )
        except subprocess.TimeoutExpired:
            self.on_error(f"{what}: killed after {self.timeout_sec:g} s")
            return
        except OSError as exc:
            self.on_error(f"{what}: could not start: {exc}")
            return
        if res.returncode != 0:
            tail = res.stderr.decode("utf-8", "replace").strip().splitlines()
            why = f": {tail[-1]}" if tail else ""
            self.on_error(f"{what}: exit {res.returncode}{why}")

    def wait(self, timeout_sec: float | None = None) -> bool:
        """Wait for the commands started so far (at most ``timeout_sec``, default the
        command timeout and a little); True when all have ended."""
        limit = self.timeout_sec + 2.0 if timeout_sec is None else timeout_sec
        deadline = time.monotonic() + limit
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)
