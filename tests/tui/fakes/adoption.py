"""``FakeAdoption``: a job ddp-tui did not submit, brought in as a run
(:class:`ddp_tui.remote.api.AdoptionAPI`, checked by mypy below), for the app's tests of the job
screen's ``b``. FAKE: the run is a row added to the shared state, not a directory; its spec is
the real one (:func:`~ddp_tui.remote.runs.adoption.adopted_spec`). The real adoption is tested on
the Slurm test cluster (tests/integration/test_user_jobs_slurm.py) and the local scheduler
(tests/integration/test_adoption_local.py)."""

from __future__ import annotations

from ddp_tui.remote.api import AdoptionAPI
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.runs.adoption import (
    ADOPTED_KIND,
    AdoptionRefused,
    adopted_name,
    adopted_spec,
)
from ddp_tui.spec import ExperimentSpec
from tests.tui.fakes.data import RUNS_ROOT, fixed_attempt
from tests.tui.fakes.services import FakeState
from tests.tui.fakes.user_jobs import FakeUserJobs


class FakeAdoption:
    """Brings in one of ``jobs``' foreign rows: the row leaves the other jobs and a run of
    kind ``adopted`` with that job as its attempt joins the runs. A job id that is a run's
    attempt, or no row's, is refused as the real service refuses it."""

    def __init__(self, state: FakeState, jobs: FakeUserJobs) -> None:
        self.state = state
        self.jobs = jobs

    def adopt_job(self, job_id: str) -> RunView:
        self.state.calls.append(("adopt_job", job_id))
        for run in self.state.runs:
            if any(a.job_id == job_id for a in run.attempts):
                raise AdoptionRefused(
                    f"job {job_id} is an attempt of run {run.run_id} already: open that run"
                )
        job = next((j for j in self.jobs.foreign if j.job_id == job_id), None)
        if job is None:
            raise AdoptionRefused(f"cannot bring in job {job_id}: Slurm does not know job {job_id}")
        name = adopted_name(job.name, job_id)
        request = JobRequest(
            job_id, job.name, job.state, True, job.work_dir, job.stdout, job.stderr,
            partition=job.partition, nodes=job.nodes, gpus=job.gpus,
            time_limit_sec=job.time_limit_sec,
        )  # fmt: skip
        run_id = f"20231114-223000-{name}-ad01"
        view = RunView(
            run_id=run_id,
            name=name,
            run_dir=f"{RUNS_ROOT}/{run_id}",
            group=None,
            created_at="2023-11-14T22:30:00+00:00",
            spec=ExperimentSpec.from_dict(adopted_spec(request, name)[0]),
            attempts=(fixed_attempt(job_id),),
            state=job.state,
            elapsed_sec=float(job.elapsed_sec),
            kind=ADOPTED_KIND,
        )
        self.state.runs = [view, *self.state.runs]
        self.jobs.foreign = [j for j in self.jobs.foreign if j.job_id != job_id]
        return view


def _conforms(fake: FakeAdoption) -> AdoptionAPI:
    return fake  # mypy checks here that FakeAdoption offers every call of the protocol
