"""``FakeWaiting``: why a pending job waits (:class:`ddp_tui.remote.api.WaitingAPI`), for the
app's tests, and ``sample_wait``, a FAKE explanation with the figures a real Slurm gave."""

from __future__ import annotations

from collections.abc import Mapping

from ddp_tui.diagnosis.waiting import (
    FairShare,
    LimitFacts,
    PriorityFactors,
    Unavailable,
    WaitExplanation,
)
from ddp_tui.remote.api import WaitingAPI
from ddp_tui.remote.backends.job_ids import is_job_id
from tests.tui.fakes.services import FakeState


def sample_wait(job_id: str = "4243", run_id: str | None = None) -> WaitExplanation:
    """FAKE: a job held by its association's MaxJobs, with the sprio, sshare and assoc_mgr
    figures the test cluster gave under priority/multifactor (whose suite runs
    priority/basic, where sprio answers nothing)."""
    return WaitExplanation.of_reason(
        job_id,
        "PENDING",
        "AssocMaxJobsLimit",
        scheduler="slurm",
        run_id=run_id,
        account="acct2",
        qos="normal",
        partition="debug",
        priority=(
            PriorityFactors(
                partition="debug",
                total=1025,
                age=0,
                fair_share=0,
                job_size=21,
                partition_factor=1000,
                qos=0,
                tres="cpu=4",
            ),
        ),
        fair_share=(FairShare("acct2", "root", "1", 1.0, 0.0, 0.0, 0.0),),
        limits=(
            LimitFacts(
                "association acct2/root", "MaxJobs", "", "1", "2", "scontrol show assoc_mgr"
            ),
        ),
        unavailable=(Unavailable("estimated_start", "FAKE: squeue --start gave none"),),
    )


class FakeWaiting:
    """Why a job waits: a run's from its row (its state and reason, categorised by the real
    rules), or ``explanations`` by run or job id; any other job id gets :func:`sample_wait`."""

    def __init__(
        self, state: FakeState, explanations: Mapping[str, WaitExplanation] | None = None
    ) -> None:
        self.state = state
        self.explanations = dict(explanations or {})

    def why_waiting(self, run_or_job: str) -> WaitExplanation:
        self.state.calls.append(("why_waiting", run_or_job))
        if run_or_job in self.explanations:
            return self.explanations[run_or_job]
        run = next((r for r in self.state.runs if r.run_id == run_or_job), None)
        if run is not None:
            return WaitExplanation.of_reason(
                run.job_id or "",
                run.state.value,
                run.reason,
                scheduler="slurm",
                run_id=run.run_id,
            )
        if not is_job_id(run_or_job):
            raise LookupError(f"no run or job {run_or_job!r}")
        return sample_wait(run_or_job)


def _conforms(fake: FakeWaiting) -> WaitingAPI:
    return fake  # mypy checks here that the fake offers the service's calls
