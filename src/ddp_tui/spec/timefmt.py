"""Slurm time limits: parsing the forms sbatch accepts, and writing minutes back."""

from __future__ import annotations

import math
import re
from typing import Final

TIME_HELP: Final = "use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 02:00:00)"

# Slurm's forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds. Digits are ASCII only (re.ASCII).
_TIME_FORMATS: Final = tuple(
    re.compile(p, re.ASCII)
    for p in (
        r"(?P<m>\d{1,9})",
        r"(?P<m>\d{1,9}):(?P<s>\d{1,2})",
        r"(?P<h>\d{1,7}):(?P<m>\d{1,2}):(?P<s>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2}):(?P<m>\d{1,2})",
        r"(?P<d>\d{1,4})-(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2})",
    )
)


def parse_time_limit_seconds(text: str) -> int:
    """Seconds in a Slurm time limit (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``). Raises ValueError saying what is allowed."""
    if not isinstance(text, str):
        raise ValueError(f"{TIME_HELP}, got {text!r}")
    s = text.strip()
    for pattern in _TIME_FORMATS:
        m = pattern.fullmatch(s)
        if m is None:
            continue
        parts = {k: int(v) for k, v in m.groupdict().items()}
        if parts.get("s", 0) >= 60:
            raise ValueError(f"seconds must be below 60, got {text!r}")
        if "h" in parts and parts.get("m", 0) >= 60:
            raise ValueError(f"minutes must be below 60, got {text!r}")
        if "d" in parts and parts["h"] >= 24:
            raise ValueError(f"hours must be below 24 after a day count, got {text!r}")
        seconds = (
            parts.get("d", 0) * 86400
            + parts.get("h", 0) * 3600
            + parts.get("m", 0) * 60
            + parts.get("s", 0)
        )
        if seconds <= 0:
            raise ValueError(f"must be at least 1 minute (0 means no limit in Slurm), got {text!r}")
        return seconds
    raise ValueError(f"{TIME_HELP}, got {text!r}")


def parse_time_limit(text: str) -> int:
    """Minutes in a Slurm time limit, rounded up as Slurm does."""
    return math.ceil(parse_time_limit_seconds(text) / 60)


def format_time_limit(minutes: int) -> str:
    """``HH:MM:00``, or ``D-HH:MM:00`` from one day on."""
    days, rest = divmod(int(minutes), 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"
