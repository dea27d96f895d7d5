"""Reaction 1: the jobs of interrupted submits adopted, their empty intents voided."""

from __future__ import annotations

from ddp_tui.remote.runs.reactions import Seen
from ddp_tui.remote.store.run_jobs import IntentReconciler


class ReconcileIntents:
    """Adopt the jobs of submitters that died between their intent and their job id (the
    next listing shows them); an error only says why it could not be done now."""

    def __init__(self, reconciler: IntentReconciler) -> None:
        self.reconciler = reconciler

    def __call__(self, seen: Seen) -> str | None:
        return self.reconciler.reconcile_listed(seen.infos)
