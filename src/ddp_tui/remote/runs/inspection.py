"""One ended or running run looked into: why its attempt ended (the diagnosis) and its
checklist, each from its files as they are now, read in one batch."""

from __future__ import annotations

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.remote.backends.executor import Batch, ExecutorError
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.model.verification import RunFiles, damage_check, verify_run
from ddp_tui.remote.model.view_building import latest_job_id, spec_of
from ddp_tui.remote.model.views import Check
from ddp_tui.remote.observe.diagnosing import DiagnosisReads, diagnose
from ddp_tui.remote.observe.following import Following
from ddp_tui.remote.observe.observed import ObservedRuns
from ddp_tui.remote.store.runs import (
    CHECKPOINT_FILE,
    CHECKPOINTS_DIR,
    PREFLIGHT_FILE,
    SACCT_FILE,
    RunInfo,
)
from ddp_tui.remote.store.space import free_of, free_space_command


class Inspector:
    """Diagnoses and checklists of single runs."""

    def __init__(self, observed: ObservedRuns, following: Following) -> None:
        self.observed = observed
        self.following = following

    def _status(self, info: RunInfo) -> JobStatus | None:
        """The latest attempt's status: its recorded end, else one poll."""
        status = self.observed.states.end_of(info)  # a recorded end needs no scheduler call
        job_id = latest_job_id(info)
        if status is None and job_id:
            status = self.observed.scheduler.poll([job_id]).get(job_id)
        return status

    def diagnose(self, info: RunInfo) -> Diagnosis | None:
        """Why the run's latest attempt ended as it did, from its logs' tails read now.

        None while it may still run, and where no rule recognises what it left (never a
        guess). One batch: the tails, run.json, the checkpoint's stat and, for an NCCL run,
        its ranks' flight recorder dumps (docs/flight-recorder.md).
        """
        status = self._status(info)
        if status is None or not status.state.is_terminal or info.kind != "train":
            return None
        reads = DiagnosisReads(info.ref, status.job_id, spec=self.observed.table.spec_of(info))
        readers = reads.readers()
        batch = Batch(
            commands=[free_space_command(self.observed.store.root)],
            reads=[r.request() for r in readers],
        )
        result = self.observed.executor.run_batch(batch)
        for reader, res in zip(readers, result.reads, strict=True):
            reader.read_new(res)
        reads.runs_root_free, reads.runs_root = (
            free_of(result.commands[0]),
            self.observed.store.root,
        )
        return diagnose(self.observed.table.spec_of(info), status, reads)

    def verify(self, info: RunInfo) -> list[Check]:
        """The checklist (:func:`~ddp_tui.remote.model.verification.verify_run`) over the
        run's files as they are now; an ended job's accounting is saved first."""
        job_id = latest_job_id(info)
        status = self._status(info)
        if job_id and status is not None and status.state.is_terminal:
            self.following.save_accounting(info.ref, job_id)
        ref, preflight = info.ref, info.kind == "preflight"
        spec = spec_of(info)
        script = not preflight and spec.entry == "script"
        files = RunFiles(
            run_json=self.observed.store.read_run_json(ref),
            preflight=self.observed.store.read_json(ref, PREFLIGHT_FILE) if preflight else None,
            metrics=() if preflight else self.observed.store.read_metrics(ref),
            checkpoint_bytes=None
            if preflight or script
            else self.observed.store.file_size(ref, CHECKPOINT_FILE),
            accounting_saved=self.observed.store.file_size(ref, SACCT_FILE) is not None,
            script_checkpoints=self._listing(ref.file(CHECKPOINTS_DIR)) if script else None,
        )
        checks = verify_run(spec, info.kind, job_id, status, files)
        damage = self.observed.table.view(info).damage
        return [damage_check(damage), *checks] if damage else checks

    def _listing(self, path: str) -> tuple[str, ...]:
        """The names in a directory of a run ((): none, or no such directory)."""
        try:
            return tuple(self.observed.executor.listdir(path))
        except (OSError, ExecutorError):
            return ()
