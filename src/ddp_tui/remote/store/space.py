"""Room in the runs root: checked before a submit, so that a full or read-only disk refuses
it cleanly, naming the real cause.

A submit that starts on a full filesystem fails halfway (a traceback, a half-made run
directory) or, worse, queues a job whose run directory cannot take its first checkpoint.
The target machine (the login node, over SSH from a laptop) is asked, in one command, for
the runs root or, before the first submit made it, the nearest directory above it that
exists: whether this user may write there (``test -w``; where not, a probe ``mkdir`` says
why in the system's words: a read-only filesystem, permission denied), and how much ``df``
says is free. A root that cannot be written is refused as such, whatever its free space:
freeing space would not help.
"""

from __future__ import annotations

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import CommandResult, Executor, ExecutorError

MIB = 1024 * 1024
#: What a run needs beyond its snapshot and code: logs, metrics, telemetry and at least one
#: checkpoint of a small model. A run that needs more says so when it fails, by its diagnosis.
MARGIN_BYTES = 64 * MIB


class NoRoom(DdpTuiError):
    """The runs root's filesystem is too full for what was asked."""

    title = "Disk space"


class NotWritable(NoRoom):
    """The runs root (or a run directory in it) cannot be written by this user."""

    title = "Runs root not writable"


# The nearest existing directory at or above $1, then its filesystem's free space in KiB.
_DF = 'p=$1; while [ ! -e "$p" ]; do p=$(dirname -- "$p"); done; df -Pk -- "$p"'
# The same, after a first line that says whether this user may write there: "writable", or
# "unwritable<TAB>why<TAB>directory", why as mkdir(1) says it in the C locale. The probe
# directory is made only where test -w said no (root passes test -w on a mode 0555
# directory, and may write there; a read-only filesystem fails it for everyone).
_WRITE_PROBE = ".ddp-tui-write-probe"
_ROOM = (
    'p=$1; while [ ! -e "$p" ]; do p=$(dirname -- "$p"); done; '
    'probe="$p/' + _WRITE_PROBE + '.$$"; '
    'if [ -w "$p" ]; then echo writable; '
    'elif out=$(LC_ALL=C mkdir -- "$probe" 2>&1); then rmdir -- "$probe"; echo writable; '
    r'else printf "unwritable\t%s\t%s\n" "${out##*: }" "$p"; fi; '
    'df -Pk -- "$p"'
)


def free_space_command(path: str) -> list[str]:
    """The command whose answer :func:`free_of` reads: to join a batch."""
    return ["sh", "-c", _DF, "sh", path]


def free_of(res: CommandResult) -> int | None:
    """The free bytes in :func:`free_space_command`'s answer; None where it has none."""
    lines = res.stdout.strip().splitlines()
    if not res.ok or len(lines) < 2:
        return None
    fields = lines[-1].split()
    try:
        return int(fields[3]) * 1024  # POSIX df -P: Filesystem 1024-blocks Used Available ...
    except (IndexError, ValueError):
        return None


def room_command(path: str) -> list[str]:
    """The command whose answer :func:`unwritable_of` and :func:`free_of` read."""
    return ["sh", "-c", _ROOM, "sh", path]


def unwritable_of(res: CommandResult) -> tuple[str, str] | None:
    """(why, the directory) where :func:`room_command`'s answer says this user cannot
    write there; None where it can, or where the answer says nothing (nothing is refused
    on a guess)."""
    first = res.stdout.split("\n", 1)[0]
    if not first.startswith("unwritable\t"):
        return None
    _, why, where = first.split("\t", 2)
    return why.strip() or "not writable", where


def require_room(executor: Executor, path: str, needed: int, *, what: str) -> None:
    """Refuse when ``path`` cannot take ``what``: :class:`NotWritable` when this user cannot
    write there (a read-only filesystem, no permission), naming the directory and the
    system's reason; else :class:`NoRoom` when its filesystem has less than ``needed`` bytes
    free, naming the path, what is free and what ``what`` needs. One round trip."""
    try:
        res = executor.run(room_command(path), timeout=30)
    except ExecutorError:
        return  # unknown: the writes that follow say what is wrong, if anything
    unwritable = unwritable_of(res)
    if unwritable is not None:
        why, where = unwritable
        raise NotWritable(
            f"cannot write under {where}: {why}, so {what} cannot be made there (freeing "
            "space would not help). Set runs_root to a directory this user can write; "
            "nothing was submitted"
        )
    free = free_of(res)
    if free is not None and free < needed:
        raise NoRoom(
            f"{path} has {free / MIB:.1f} MiB free; {what} needs about {needed / MIB:.0f} MiB "
            f"(its files and a {MARGIN_BYTES // MIB} MiB margin for logs, metrics and "
            "checkpoints). Free some space or set runs_root elsewhere; nothing was submitted"
        )
