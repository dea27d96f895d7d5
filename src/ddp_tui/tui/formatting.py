"""How numbers, states and errors read on screen: pure functions, no widgets."""

from __future__ import annotations

import math

from rich.text import Text

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.states import JobState

STATE_STYLES: dict[JobState, str] = {
    JobState.PENDING: "yellow",
    JobState.RUNNING: "bold green",
    JobState.COMPLETING: "green",
    JobState.COMPLETED: "blue",
    JobState.FAILED: "bold red",
    JobState.CANCELLED: "magenta",
    JobState.TIMEOUT: "red",
    JobState.OUT_OF_MEMORY: "red",
    JobState.NODE_FAIL: "red",
    JobState.PREEMPTED: "yellow",
    JobState.REQUEUED: "yellow",
    JobState.SUSPENDED: "yellow",
    JobState.BOOT_FAIL: "red",
    JobState.DEADLINE: "red",
    JobState.LOST: "dim magenta",
    JobState.UNKNOWN: "dim",
}


def state_text(state: JobState) -> Text:
    """The state name in its colour."""
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def duration(seconds: float | None) -> str:
    """``m:ss`` below an hour, ``h:mm:ss`` above, ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def age(seconds: float) -> str:
    """A short age such as ``4s``, ``3m``, ``2h``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds // 3600)}h"


def _as_float(value: object) -> float | None:
    """``value`` as a float; None when it is missing or not a number (a CSV's stray text)."""
    if value is None:
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def number(value: float | None, digits: int = 4) -> str:
    """A metric with ``digits`` significant digits; ``-`` when missing or not finite."""
    value = _as_float(value)
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "-" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.{digits}g}"


def rate(value: float | None) -> str:
    """Samples per second, compact: ``950/s``, ``12.3k/s``, ``1.2M/s``."""
    value = _as_float(value)
    if value is None or not math.isfinite(value):
        return "-"
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}/s"
    return f"{value:.0f}/s"


def metric_label(name: str) -> str:
    """``val_acc`` -> ``acc``: the column says it is a validation metric."""
    return name.removeprefix("val_")


def size(nodes: int, gpus_per_node: int) -> str:
    """``2x4``: nodes x GPUs (or processes) per node."""
    return f"{nodes}x{gpus_per_node}"


def failure_title(what: str, error: BaseException | None) -> str:
    """A failure notification's title: what failed, and what kind of problem it was
    (ddp-tui's own errors carry a title; anything else is named by its type, since it is
    more likely a bug to report than a problem the user can fix)."""
    if error is None:
        return f"{what} failed"
    kind = error.title if isinstance(error, DdpTuiError) else type(error).__name__
    return f"{what} failed: {kind}"


def describe_error(error: BaseException) -> str:
    """One line for the user: the tool's own message, never a traceback."""
    message = getattr(error, "message", None)
    if not isinstance(message, str) or not message:
        message = str(error)
    message = " ".join(message.split())
    if not message:
        return type(error).__name__
    return message if len(message) <= 300 else message[:297] + "..."
