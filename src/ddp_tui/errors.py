"""The one root of the errors ddp-tui explains to a person.

Every problem the user can meet and act on (a bad spec, a profile that does not parse, a
scheduler that refuses a job, a connection that drops, a run directory that cannot be
written) is a :class:`DdpTuiError`: ``str(error)`` is the message, in the tool's own words and
naming the field, file or command concerned, and ``title`` says what kind of problem it is.
The app puts the title on its notification and the CLI catches the root once, so a new
error class is shown properly everywhere by subclassing it. Any other exception is a bug,
and is reported as one. (After harlequin's ``HarlequinError``; see docs/architecture.md.)
"""

from __future__ import annotations

from typing import ClassVar


class DdpTuiError(Exception):
    """A problem in the user's world, not in ddp-tui's code. See the module docstring."""

    #: What kind of problem: a notification's title ("Profile", "Scheduler", ...).
    title: ClassVar[str] = "ddp-tui"
