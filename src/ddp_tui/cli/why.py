"""``ddp-tui why RUN|JOBID``: why a run failed, is pending, or has stalled; a damaged run
directory file by file; why any job of the user waits, ddp-tui's or not. Exit 1 when there is
something to fix (a job that waits forever as it is counts)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import RUN_HELP, resolve_run_or_job

if TYPE_CHECKING:
    from ddp_tui.diagnosis.waiting import WaitExplanation
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.model.views import RunView


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``why``'s parser."""
    why = sub.add_parser(
        name,
        help="why a run failed, is pending, or has stalled; why any job of yours waits "
        "(exit 1: something to fix)",
    )
    why.add_argument("run", help=f"{RUN_HELP}; or any Slurm job id of yours")
    why.add_argument("--json", action="store_true", help="print the diagnosis as JSON")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Why the run is where it is; exit 1 when there is something to fix."""
    from ddp_tui.diagnosis.text import diagnosis_lines
    from ddp_tui.diagnosis.waiting import wait_lines
    from ddp_tui.remote.backends.states import JobState

    found = resolve_run_or_job(cluster, args.run)
    if isinstance(found, str):  # a job of the user's that is no run of ddp-tui's
        return _job(args, cluster.why_waiting(found))
    view = found
    head = f"{view.run_id} (job {view.job_id or '-'}): {view.state.value}"
    if view.exit_code:
        head += f", exit {view.exit_code}"
    if view.damage:
        return _damaged(args, view, head)
    if view.state is JobState.RUNNING and view.stall is None:
        # A stall is judged from the activity files' times, which a refresh reads only for
        # runs its previous poll found running; this process learned that in its first one.
        view = next((v for v in cluster.refresh().runs if v.run_id == view.run_id), view)
    if view.state.is_active:
        doc: dict[str, object] = {"run_id": view.run_id, "state": view.state.value}
        lines = [head]
        if view.state is JobState.PENDING:
            # Asked here because `why` is on demand: never in a periodic refresh.
            wait = cluster.why_waiting(view.run_id)
            if wait.estimated_start:
                doc["estimated_start"] = wait.estimated_start
            doc["wait"] = wait.to_dict()
            _print(args, doc, wait_lines(wait))
            return 1 if wait.needs_action else 0
        if view.stall is not None:
            doc["stall"] = view.stall.summary
            lines.append(f"stalled: {view.stall.summary}")
            saved = cluster.last_stacks(view.run_id)
            if saved is not None and saved.job_id == view.job_id and saved.stuck_summary:
                doc["stuck"] = saved.stuck_summary
                lines.append(f"stuck (stacks of {saved.taken_at}): {saved.stuck_summary}")
            if saved is not None and saved.job_id == view.job_id and saved.cause:
                doc["cause"] = saved.cause
                lines.append(f"cause (stacks of {saved.taken_at}): {saved.cause}")
            lines.append(
                f"where each rank waits: ddp-tui stacks {view.run_id} (key k in Run detail)"
            )
            lines.append("what to do: look at the last lines (ddp-tui logs RUN), cancel it")
        _print(args, doc, lines)
        return 1 if view.stall is not None else 0
    diagnosis = cluster.diagnose(view.run_id)
    if diagnosis is None:
        failed = view.state is not JobState.COMPLETED and view.job_id is not None
        lines = [head, "no diagnosis: no rule recognised what the run left"]
        if failed:
            lines.append(f"see: ddp-tui logs {view.run_id} --err")
        _print(args, {"run_id": view.run_id, "state": view.state.value}, lines)
        return 1 if failed else 0
    doc = {"run_id": view.run_id, "state": view.state.value, **diagnosis.to_dict()}
    _print(args, doc, [head, *diagnosis_lines(diagnosis)])
    return 1 if diagnosis.needs_fix else 0


def _job(args: argparse.Namespace, wait: WaitExplanation) -> int:
    """A job that is no run of ddp-tui's: why it waits, or where it is (exit 1: it waits
    for something that only the person can change)."""
    from ddp_tui.diagnosis.waiting import wait_lines

    lines = wait_lines(wait)
    if not wait.pending:
        lines.append(f"not pending; what it used, once it has ended: ddp-tui usage {wait.job_id}")
    _print(args, wait.to_dict(), lines)
    return 1 if wait.needs_action else 0


def _damaged(args: argparse.Namespace, view: RunView, head: str) -> int:
    """A damaged run directory: what is wrong, file by file (exit 1: something to fix)."""
    doc: dict[str, object] = {
        "run_id": view.run_id,
        "state": view.state_label,
        "job_state": view.state.value,
        "damage": [d.to_dict() for d in view.damage],
    }
    lines = [
        f"{head}; the run directory is DAMAGED",
        *(f"  {d}" for d in view.damage),
        f"what to do: ddp-tui did not write these as they are; restore them in {view.run_dir} "
        "from a copy, or remove that directory. Other runs are not affected.",
    ]
    _print(args, doc, lines)
    return 1


def _print(args: argparse.Namespace, doc: dict[str, object], lines: list[str]) -> None:
    from ddp_tui.reports.text import strict_json

    print(strict_json(doc) if args.json else "\n".join(lines))
