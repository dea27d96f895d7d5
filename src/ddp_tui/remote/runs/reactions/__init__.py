"""What a refresh does besides reading: the reactions, each a named policy in a module of
its own, applied in one stage after the observation pass, in this order:

1. :mod:`.intents`: adopt the job of a submit whose process died between its intent line and
   its job id, or void an intent the scheduler has no job for;
2. :mod:`.ends`: append the end of each attempt that just ended to its ``jobs.jsonl`` (and
   keep its accounting), so that it is known after the scheduler's accounting is purged;
3. :mod:`.usage`: write ``usage.json``, what each latest attempt that ended used of what it
   held, once (one query of the accounting for every such run; never for the local
   scheduler, which keeps none);
4. the rows are built;
5. :mod:`.stalls`: cancel a stalled job, once, leaving a note (only where the profile asks,
   ``cancel_stalled``);
6. :mod:`.notify`: claim this refresh's notification events, each once across processes.

Which commands run which reactions is declared here, once (:data:`BY_COMMAND`), and told in
docs/architecture.md and in the CLI's help.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ddp_tui.remote.model.events import NotifyEvent
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunInfo


@dataclass(frozen=True)
class Reactions:
    """Which reactions a command's refreshes apply."""

    reconcile_intents: bool = True
    record_ends: bool = True
    record_usage: bool = True
    cancel_stalled: bool = True  # and only with the profile's cancel_stalled
    notify: bool = True  # and only while the notifier is enabled


#: The reactions of each kind of command. The app and ``watch`` watch runs for a person, so
#: they act on what they see. Every other CLI command (``ls``, ``show``, ``wait``...) keeps the
#: journal true (ends recorded before accounting is purged, interrupted submits adopted, what
#: an ended job used recorded) and claims events only where it can deliver them, but never
#: cancels a job it was not asked to.
BY_COMMAND: dict[str, Reactions] = {
    "app": Reactions(),
    "watch": Reactions(),
    "cli": Reactions(cancel_stalled=False),
}


@dataclass
class Seen:
    """What the reactions are handed: the pass's runs and, from step 4 on, their rows. A
    reaction that changes a run's files puts the run as listed now in ``infos``."""

    infos: Sequence[RunInfo]
    polled: bool
    views: tuple[RunView, ...] = ()
    events: tuple[NotifyEvent, ...] = field(default_factory=tuple)


#: A reaction: it acts on what was seen, and returns an error to show (or None).
Reaction = Callable[[Seen], str | None]


@dataclass
class Stage:
    """The reactions of one command, applied in the order above."""

    on: Reactions
    reconcile_intents: Reaction
    record_ends: Reaction
    record_usage: Reaction
    cancel_stalled: Reaction
    notify: Reaction

    def apply(
        self, seen: Seen, build_views: Callable[[], tuple[RunView, ...]]
    ) -> tuple[str | None, str | None]:
        """Apply the reactions to ``seen``; returns the error to show (the latest) and the
        notifications' error (shown only when nothing else went wrong)."""
        error: str | None = None
        if self.on.reconcile_intents:
            error = self.reconcile_intents(seen) or error
        if self.on.record_ends:
            error = self.record_ends(seen) or error
        if self.on.record_usage:
            error = self.record_usage(seen) or error
        seen.views = build_views()
        if self.on.cancel_stalled:
            error = self.cancel_stalled(seen) or error
        notify_error = self.notify(seen) if self.on.notify and seen.polled else None
        return error, notify_error
