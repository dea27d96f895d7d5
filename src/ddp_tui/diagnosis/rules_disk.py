"""A disk the job could not write: full, over quota, or read-only.

The trainer and a script's wrapper say it in one line of their own
(:meth:`ddp_tui.jobfiles.RunWriteError.message`, exit code 4): the path, the error, and the
free space of that filesystem when the write failed. A user's script, or a job older than that
line, says it in Python's words: ``OSError: [Errno 28] No space left on device: '/path'``.
"""

from __future__ import annotations

import re

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make, rank_words
from ddp_tui.jobfiles import WRITE_FAILED_PREFIX

#: errno -> (the OS's words, the short form): ENOSPC, EROFS, EDQUOT.
_ERRORS = {
    28: ("No space left on device", "disk full"),
    30: ("Read-only file system", "read-only disk"),
    122: ("Disk quota exceeded", "disk quota exceeded"),
}
_WORDS = tuple(words for words, _ in _ERRORS.values())
_ERRNO_TEXT = "|".join(re.escape(words) for words in _WORDS)

# [ddp-tui] cannot write /runs/r1/checkpoints/latest.pt: [Errno 28] No space left on device;
#   0 B free of 8.0 MiB on its filesystem
_OURS = clue(
    rf"^{re.escape(WRITE_FAILED_PREFIX)}(?P<path>.+?): \[Errno (?P<errno>\d+)\] "
    rf"(?P<words>{_ERRNO_TEXT}); (?P<room>.+?)\s*$",
    WRITE_FAILED_PREFIX,
)
# OSError: [Errno 28] No space left on device: '/runs/r1/out.bin' (the path is optional:
# a write to an open file names none).
_PYTHONS = clue(
    rf"\[Errno (?P<errno>28|30|122)\] (?P<words>{_ERRNO_TEXT})(?::\s*'(?P<path>[^']+)')?",
    *_WORDS,
)
_FREE = re.compile(r"^(?P<free>.+?) free of (?P<total>.+?) on its filesystem$")


def disk_full(scan: Scan) -> Diagnosis | None:
    """A write failed for lack of space (or quota), or on a read-only filesystem."""
    hit = scan.find(_OURS) or scan.find(_PYTHONS)
    if hit is None:
        return None
    errno = int(hit.group("errno"))
    words, short = _ERRORS.get(errno, (hit.group("words"), "disk full"))
    path = hit.group("path")
    what = path or "a file"
    who = rank_words(hit).capitalize() or "The job"
    room = _FREE.match(hit.group("room")) if "room" in hit.match.groupdict() else None
    if room:
        free = (
            f" The job reported {room.group('free')} free of {room.group('total')} "
            "on that filesystem."
        )
    else:
        free = " The job did not report the free space there."
    if errno == 30:
        advice = (
            "Make that filesystem writable again (remounted read-only after an error? ask "
            "the admins), or set runs_root (the profile's runs_root, --runs-root) to a "
            "writable filesystem; then retry."
        )
    else:
        advice = (
            "Free space on that filesystem (old runs' checkpoints/ are the largest files; "
            "`du -sh` the runs root), or set runs_root (the profile's runs_root, --runs-root) "
            "to a filesystem with room; then retry: the run resumes from its last checkpoint, "
            "which a failed write never replaces."
        )
    return make(
        "disk-full" if errno != 30 else "read-only-disk",
        short,
        f"{who} could not write {what}: {words}.{free} The job stopped there.",
        advice,
        [hit],
    )
