"""Pure functions that turn what a run directory and the scheduler say into views.

The facade reads ``spec.json``, ``jobs.jsonl``, the table files and the poll; these
decide what the jobs table and the detail pane show (:mod:`ddp_tui.remote.model.views`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.preflight_report import summarize
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.verification import outcome_note
from ddp_tui.remote.model.views import Attempt, Efficiency, Progress, RunView
from ddp_tui.remote.store.run_damage import Damage, check_progress, check_run_json
from ddp_tui.remote.store.runs import RunInfo
from ddp_tui.spec import ExperimentSpec, SpecError


def latest_job_id(info: RunInfo) -> str | None:
    """The job id of the run's latest attempt (None: never submitted)."""
    job = info.latest_job
    jid = job.get("job_id") if job else None
    return str(jid) if jid else None


def efficiency_of(info: RunInfo) -> Efficiency | None:
    """What the latest attempt used, from the run's usage record where it is that
    attempt's (checked by :func:`ddp_tui.remote.store.run_damage.check_usage_json`)."""
    usage, job_id = info.usage, latest_job_id(info)
    if usage is None or job_id is None or str(usage.get("job_id")) != job_id:
        return None
    return Efficiency(
        job_id=job_id,
        cpu=num(usage.get("cpu_efficiency")),
        mem=num(usage.get("mem_efficiency")),
        source=str(usage.get("source", "")),
    )


def attempt_of(doc: Mapping[str, Any], end: Mapping[str, Any] | None = None) -> Attempt:
    """An attempt line (checked by :func:`ddp_tui.remote.store.run_damage.clean_job_line`), with
    its end line's elapsed time where the end is recorded."""
    n = doc.get("attempt")
    return Attempt(
        job_id=str(doc.get("job_id", "")),
        scheduler=str(doc.get("scheduler", "")),
        submitted_at=str(doc.get("submitted_at", "")),
        retry_of=str(doc["retry_of"]) if doc.get("retry_of") else None,
        attempt=n if isinstance(n, int) and not isinstance(n, bool) else 0,
        elapsed_sec=num(end.get("elapsed_sec")) if end else None,
    )


def spec_of(info: RunInfo) -> ExperimentSpec:
    """The run's spec; a spec.json written by another version shows what can be shown."""
    try:
        return ExperimentSpec.from_dict(info.spec)
    except SpecError:
        return ExperimentSpec(name=str(info.spec.get("name", info.run_id)))


def num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def progress_of(doc: Mapping[str, Any] | None) -> Progress | None:
    """The trainer's latest ``progress.jsonl`` line as a :class:`Progress` (None: none)."""
    if not doc:
        return None
    clean = check_progress(doc)[0]  # an epoch of Infinity is no epoch
    if "epoch" not in clean or "step" not in clean:
        return None
    return Progress(
        epoch=clean["epoch"],
        step=clean["step"],
        steps_per_epoch=clean.get("steps_per_epoch") or 0,
        loss=num(clean.get("loss")),
        samples_per_sec=num(clean.get("samples_per_sec")),
        max_steps=clean.get("max_steps"),
    )


def steps_of(
    spec: ExperimentSpec, run_json: Mapping[str, Any] | None, progress: Progress | None
) -> tuple[int | None, int | None]:
    """A script's steps done and its step budget (the spec's, else what its wrapper read from
    its arguments), for progress by steps; (None, None) where neither is known."""
    done = run_json.get("steps_completed") if run_json else None
    if progress is not None and progress.epoch is None:
        done = max(progress.step, done or 0)
    total = spec.max_steps or (run_json.get("max_steps") if run_json else None)
    if total is None and progress is not None:
        total = progress.max_steps
    return done, total


def build_view(
    info: RunInfo,
    spec: ExperimentSpec,
    status: JobStatus | None,
    *,
    metrics: Sequence[Mapping[str, float | None]] = (),
    progress: Mapping[str, Any] | None = None,
    run_json: Mapping[str, Any] | None = None,
    preflight: Mapping[str, Any] | None = None,
    damage: tuple[Damage, ...] = (),
) -> RunView:
    """The run's row: its files (as read so far) and its latest attempt's status.
    ``damage`` adds to what the listing found wrong (``info.damage``): the table files'."""
    attempts = tuple(attempt_of(j, info.ends.get(str(j.get("job_id", "")))) for j in info.jobs)
    job_id = attempts[-1].job_id if attempts else None
    state = status.state if status else JobState.UNKNOWN
    exit_code = status.exit_code if status else None
    last = metrics[-1] if metrics else {}
    metric = "val_rmse" if spec.task == "regression" else "val_acc"
    rj = check_run_json(run_json)[0] if run_json is not None else None
    now = progress_of(progress) if state.is_active else None
    steps_done, steps_total = steps_of(spec, rj, progress_of(progress))
    return RunView(
        run_id=info.run_id,
        name=spec.name,
        run_dir=info.ref.path,
        group=info.group,
        sweep=info.sweep,
        created_at=info.created_at,
        spec=spec,
        attempts=attempts,
        state=state,
        reason=status.reason if status else ("" if job_id else "not submitted"),
        elapsed_sec=status.elapsed_sec if status else 0.0,
        epochs_done=sum(1 for r in metrics if r.get("epoch") is not None),
        epochs_total=spec.epochs or 0,
        steps_done=steps_done,
        steps_total=steps_total,
        last_train_loss=num(last.get("train_loss")),
        last_val_metric=num(last.get(metric)),
        val_metric_name=metric,
        throughput=num(last.get("throughput_samples_per_sec")),
        progress=now,
        hosts=tuple(rj.get("hosts", ())) if rj else (),  # checked: a list of texts
        world_size=rj.get("world_size") if rj else None,
        backend=rj.get("backend") if rj else None,
        rendezvous=rj.get("rendezvous") if rj else None,
        exit_code=exit_code,
        note=outcome_note(state, exit_code, rj, job_id),
        kind=info.kind,
        preflight=summarize(preflight) if info.kind == "preflight" else None,
        damage=(*info.damage, *damage),
        efficiency=efficiency_of(info),
    )
