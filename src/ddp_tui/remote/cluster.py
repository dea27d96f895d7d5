"""The composition root: one cluster's executor, scheduler, run store and caches, built once,
and the feature services made of them.

- :attr:`Cluster.runs` (:mod:`ddp_tui.remote.runs.service`): snapshots, follows,
  checklists, diagnoses, cancel;
- :attr:`Cluster.submits` (:mod:`ddp_tui.remote.submit.service`): defaults, plans, submits,
  sweeps, retries;
- :attr:`Cluster.live` (:mod:`ddp_tui.remote.live.service`): shells and stacks;
- :attr:`Cluster.groups_service` (:mod:`ddp_tui.remote.groups.service`): compare, outcomes,
  diff, advice, a group cancelled or retried;
- :attr:`Cluster.user_jobs_service` (:mod:`ddp_tui.remote.runs.user_jobs`): every job of the
  user beside the runs, cancel and logs by job id;
- :attr:`Cluster.usage_service` (:mod:`ddp_tui.remote.runs.job_usage`): what a run or any
  job used, and what to ask for next time;
- :attr:`Cluster.waiting_service` (:mod:`ddp_tui.remote.runs.waiting`): why a run's job or any
  job of the user waits, asked on demand;
- :attr:`Cluster.adoption_service` (:mod:`ddp_tui.remote.runs.adoption`): a job ddp-tui did
  not submit, brought in as a run.

The methods below only delegate, one line each, so that the app and the CLI keep one object
to hold (:class:`~ddp_tui.remote.api.ClusterAPI`). A new capability is a module of its own and
a method of the service it belongs to; here it gains one line, never its logic (see
docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ddp_tui.remote.backends.executor import Executor
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.backends.scheduler_facts import SchedulerFacts
from ddp_tui.remote.connect import connect
from ddp_tui.remote.groups.service import GroupsService
from ddp_tui.remote.live.service import LiveService
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.followers import TelemetryCache
from ddp_tui.remote.observe.following import Following
from ddp_tui.remote.observe.observed import ObservedRuns
from ddp_tui.remote.observe.run_table import DIAGNOSES_PER_REFRESH, RunTable
from ddp_tui.remote.runs.adoption import AdoptionService
from ddp_tui.remote.runs.job_usage import UsageService
from ddp_tui.remote.runs.reactions import BY_COMMAND, Reactions, Stage
from ddp_tui.remote.runs.reactions.ends import RecordEnds
from ddp_tui.remote.runs.reactions.intents import ReconcileIntents
from ddp_tui.remote.runs.reactions.notify import Notifier, NotifyEvents
from ddp_tui.remote.runs.reactions.stalls import CancelStalled
from ddp_tui.remote.runs.reactions.usage import RecordUsage
from ddp_tui.remote.runs.service import RunsService
from ddp_tui.remote.runs.user_jobs import UserJobsService
from ddp_tui.remote.runs.waiting import WaitingService
from ddp_tui.remote.store.history import LOST_GRACE_SEC
from ddp_tui.remote.store.run_jobs import IntentReconciler
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.remote.submit.planning import Planner
from ddp_tui.remote.submit.service import SubmitService

if TYPE_CHECKING:
    from ddp_tui.config import Profile


class Cluster:
    """One cluster's services over an Executor, a Scheduler and a RunStore.

    Not thread-safe: the app drives it from one worker at a time.
    """

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        store: RunStore,
        *,
        profile: Profile,
        location: str,
        lost_grace_sec: float = LOST_GRACE_SEC,
        listing_batch: int | None = None,
        reactions: Reactions = BY_COMMAND["app"],
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.store = store
        self.profile = profile
        self.location = location
        self.facts = SchedulerFacts(scheduler)
        states = AttemptStates(scheduler, store, lost_grace_sec=lost_grace_sec)
        table = RunTable(states, stall_after_sec=profile.stall_after_min * 60)
        if listing_batch:
            table.diagnoses_per_refresh = DIAGNOSES_PER_REFRESH
        observed = ObservedRuns(executor, scheduler, store, states, table)
        following = Following(observed)
        telemetry = TelemetryCache(executor)
        #: Claims each run end, stall and finished group once across processes.
        self.notifier = Notifier(executor, store.root)
        stage = Stage(
            reactions,
            reconcile_intents=ReconcileIntents(IntentReconciler(scheduler, store)),
            record_ends=RecordEnds(states, table),
            record_usage=RecordUsage(scheduler, store, states, table),
            cancel_stalled=CancelStalled(executor, scheduler, enabled=profile.cancel_stalled),
            notify=NotifyEvents(self.notifier, states, store),
        )
        self.runs = RunsService(
            observed,
            location=location,
            following=following,
            telemetry=telemetry,
            notifier=self.notifier,
            stage=stage,
            scheduler_version=self.facts.version,
            listing_batch=listing_batch,
        )
        planner = Planner(
            executor, scheduler, store, self.facts, profile=profile, location=location
        )
        self.submits = SubmitService(
            planner,
            views_of=self.runs.views_of,
            info=self.runs.info,
        )
        self.live = LiveService(executor, scheduler, states, self.runs.info)
        self.groups_service = GroupsService(
            scheduler,
            store,
            self.facts,
            telemetry=telemetry,
            threshold=profile.advisor_threshold,
            views=self.runs.views,
            refreshed=lambda: self.runs.refresh().runs,
            info=self.runs.info,
            view=self.runs.view,
            retry=self.submits.retry,
        )
        #: Every job of the user, ddp-tui's runs beside the rest (:mod:`.runs.user_jobs`).
        self.user_jobs_service = UserJobsService(
            executor,
            scheduler,
            runs_root=store.root,
            refresh=self.runs.refresh,
            version=self.facts.version,
        )
        #: What a run or any job used, and what to ask for next time (:mod:`.runs.job_usage`).
        self.usage_service = UsageService(
            scheduler, views=self.runs.views, resources=self.runs.resources
        )
        #: Why a run's job or any job of the user waits, on demand (:mod:`.runs.waiting`).
        self.waiting_service = WaitingService(scheduler, self.runs.info)
        #: A job ddp-tui did not submit, brought in as a run (:mod:`.runs.adoption`).
        self.adoption_service = AdoptionService(
            executor, scheduler, store, views_of=self.runs.views_of
        )
        self._bind()

    def _bind(self) -> None:
        """The app's and the CLI's calls, each one of a service's own methods."""
        runs, submits, live, groups = self.runs, self.submits, self.live, self.groups_service
        # compose and submit
        self.default_spec = submits.default_spec
        self.partitions = submits.partitions
        self.validate = submits.validate
        self.plan = submits.plan
        self.plan_sweep = submits.plan_sweep
        self.submit = submits.submit
        self.submit_sweep = submits.submit_sweep
        self.retry = submits.retry
        self.detect_environment = submits.detect_environment
        self.recheck_environment = submits.recheck_environment
        # every run, and one run
        self.refresh = runs.refresh
        self.take_events = runs.take_events
        self.follow = runs.follow
        self.restart_follow = runs.restart_follow
        self.diagnose = runs.diagnose
        self.verify = runs.verify
        self.estimated_start = runs.estimated_start
        self.resources = runs.resources
        self.cancel = runs.cancel
        # hands on a live job
        self.shell_command = live.shell_command
        self.open_shell = live.open_shell
        self.stacks = live.stacks
        self.last_stacks = live.last_stacks
        # groups
        self.groups = groups.groups
        self.compare = groups.compare
        self.outcomes = groups.outcomes
        self.diff = groups.diff
        self.export_comparison = groups.export_comparison
        self.advise = groups.advise
        self.cancel_group = groups.cancel_group
        self.retry_group = groups.retry_group
        # every job of the user, ddp-tui's or not
        user_jobs = self.user_jobs_service
        self.user_jobs = user_jobs.user_jobs
        self.cancel_job = user_jobs.cancel_job
        self.job_script = user_jobs.job_script
        self.job_state = user_jobs.job_state
        self.job_log = user_jobs.job_log
        self.adopt_job = self.adoption_service.adopt_job
        # what a run or any job used
        self.usage = self.usage_service.usage
        # why a pending job waits
        self.why_waiting = self.waiting_service.why_waiting

    @classmethod
    def open(
        cls,
        profile: Profile | None = None,
        *,
        host: str | None = None,
        runs_root: str | None = None,
        local_state_dir: str | None = None,
        prompter: Any = None,
        state_callback: Callable[[str], None] | None = None,
        listing_batch: int | None = None,
        reactions: Reactions = BY_COMMAND["app"],
    ) -> Cluster:
        """Connect as the profile says (see :func:`ddp_tui.remote.connect.connect`)."""
        from ddp_tui.config import get_profile

        profile = profile or get_profile(None)
        c = connect(
            profile,
            host=host,
            runs_root=runs_root,
            local_state_dir=local_state_dir,
            prompter=prompter,
            state_callback=state_callback,
        )
        return cls(
            c.executor,
            c.scheduler,
            c.store,
            profile=profile,
            location=c.location,
            listing_batch=listing_batch,
            reactions=reactions,
        )

    @property
    def scheduler_name(self) -> str:
        return self.scheduler.name

    def scheduler_version(self) -> str:
        return self.facts.version()

    @property
    def recover_submit_sec(self) -> float:
        """How long a submit whose answer was lost looks for its job before giving up."""
        return self.submits.recover_submit_sec

    @recover_submit_sec.setter
    def recover_submit_sec(self, seconds: float) -> None:
        self.submits.recover_submit_sec = seconds

    def close(self) -> None:
        self.executor.close()
