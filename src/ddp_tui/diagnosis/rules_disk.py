"""A disk the job could not write: full, over quota, or read-only.

The trainer and a script's wrapper say it in one line of their own
(:meth:`ddp_tui.jobfiles.RunWriteError.message`, exit code 4): the path, the error, and the
free space of that filesystem when the write failed. A user's script, or a job older than that
line, says it in Python's words: ``OSError: [Errno 28] No space left on device: '/path'``.
"""

from __future__ import annotations

import re

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import make, rank_words, scheduler_evidence, state_of
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
#: Below this much free space on the runs root, a failed job with no error line of its own
#: is taken to have died of the full disk: its logs, on that disk, could not say so.
FULL_BELOW_BYTES = 1024 * 1024
_ADVICE_FULL = (
    "Free space on that filesystem (old runs' checkpoints/ are the largest files; "
    "`du -sh` the runs root), or set runs_root (the profile's runs_root, --runs-root) "
    "to a filesystem with room; then retry: the run resumes from its last checkpoint, "
    "which a failed write never replaces."
)


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
        advice = _ADVICE_FULL
    return make(
        "disk-full" if errno != 30 else "read-only-disk",
        short,
        f"{who} could not write {what}: {words}.{free} The job stopped there.",
        advice,
        [hit],
    )


def _bytes(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size // 1024} KiB"


def disk_full_by_space(scan: Scan) -> Diagnosis | None:
    """A failed job whose runs root has (almost) no free space left, where no log line
    says why: the disk filled, and took the job's own words with it."""
    facts = scan.facts
    free = facts.runs_root_free
    if free is None or free >= FULL_BELOW_BYTES or state_of(scan) not in ("FAILED", "NODE_FAIL"):
        return None
    if facts.exit_code == 0:
        return None
    where = facts.runs_root or "the runs root"
    return make(
        "disk-full",
        "disk full",
        f"The job failed, and the filesystem of {where} (where its run directory, logs and "
        f"checkpoints are) had {_bytes(free)} free when ddp-tui looked: it filled while the "
        "job ran, so the job could not even write its own error line.",
        _ADVICE_FULL,
        [scheduler_evidence(scan), Evidence("df", None, f"{where}: {_bytes(free)} free")],
    )
