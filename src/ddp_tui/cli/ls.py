"""``ddp-tui ls``: every run, newest first, as a table or (``--json``) a JSON list; with
``--all`` the user's other jobs after them, marked as not ddp-tui's."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.remote.backends.user_jobs import Since
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.runs.user_jobs import AllJobs


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``ls``'s parser."""
    ls = sub.add_parser(
        name,
        help="list runs, newest first",
        description=(
            "List runs, newest first. Like every command it keeps each run's jobs.jsonl true "
            "as it reads: the end of a job it sees end is recorded (kept after the "
            "scheduler's accounting is purged), what an ended job used is recorded once "
            "(usage.json: the EFF column, one sacct for every run that ended), and a job "
            "queued by a submit that was "
            "interrupted is adopted. It never cancels a job (only the app and watch act on "
            "a stall, and only with the profile's cancel_stalled)."
        ),
    )
    ls.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    ls.add_argument(
        "--all",
        action="store_true",
        help=(
            "also list the user's other jobs, the ones ddp-tui did not submit (sbatch by hand, "
            "other tools): queued and running ones (one squeue), and those ended since --since "
            '(one sacct); marked as not ddp-tui\'s (JSON: "ours": false)'
        ),
    )
    ls.add_argument(
        "--since",
        type=_since,
        default=None,
        metavar="WHEN",
        help="with --all: list ended jobs back to WHEN: 30m, 12h, 7d (the default), 2w, "
        "or a date (2026-11-20, 2026-11-20T08:00)",
    )


def _since(text: str) -> Since:
    """``--since``'s value; argparse names the option in the error."""
    from ddp_tui.remote.backends.user_jobs import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the runs; a refresh's warning goes to stderr."""
    from ddp_tui.reports.text import strict_json
    from ddp_tui.reports.usage import hours_text, resource_hours

    if args.since is not None and not args.all:
        print("ddp-tui: --since lists ended jobs of --all; add --all", file=sys.stderr)
        return 2
    every = cluster.user_jobs(args.since) if args.all else None
    snap = every.snapshot if every is not None else cluster.refresh()
    # GPU-hours (CPU-hours on the CPU): the allocation times every attempt's elapsed time.
    hours = {v.run_id: resource_hours(v.spec, v.used_sec) for v in snap.runs}
    if snap.error:
        print(f"ddp-tui: warning: {snap.error}", file=sys.stderr)
    if args.json:
        rows = [
            {
                "run_id": v.run_id,
                "job_id": v.job_id,
                # DAMAGED for a damaged run directory; job_state is always the job's own.
                "state": v.state_label.removesuffix(" *"),
                "job_state": v.state.value,
                "damage": [d.to_dict() for d in v.damage],
                "nodes": v.spec.nodes,
                "gpus_per_node": v.spec.gpus_per_node,
                "epochs_done": v.epochs_done,
                "epochs_total": v.epochs_total,
                "steps_done": v.steps_done,  # a script with no epochs: progress by steps
                "steps_total": v.steps_total,
                "eta_sec": v.eta_sec,
                "train_loss": v.last_train_loss,
                v.val_metric_name: v.last_val_metric,
                "throughput": v.throughput,
                "gpu_hours": hours[v.run_id][0] if hours[v.run_id][1] == "GPU" else None,
                "cpu_hours": hours[v.run_id][0] if hours[v.run_id][1] == "CPU" else None,
                # What the latest ended attempt used (its usage.json); null: not measured.
                "cpu_efficiency": v.efficiency.cpu if v.efficiency else None,
                "mem_efficiency": v.efficiency.mem if v.efficiency else None,
                "group": v.group,
                "kind": v.kind,
                "note": v.note or None,
                "reason": v.reason_label or None,
                "diagnosis": v.diagnosis.to_dict() if v.diagnosis else None,
                "preflight": dataclasses.asdict(v.preflight) if v.preflight else None,
            }
            for v in snap.runs
        ]
        if every is not None:
            rows = [{"ours": True, **row} for row in rows]
            rows += [{"ours": False, **job.to_dict()} for job in every.foreign]
        print(strict_json(rows))
        return 0
    # Tab-separated, the reason (free text) last: EFF goes before it, so the columns before
    # keep their places for whoever reads them by position.
    print("RUN\tJOB\tSTATE\tSIZE\tEPOCH\tLOSS\tVAL\tSAMPLES/S\tGPU-H\tEFF\tREASON")
    for v in snap.runs:
        val = v.preflight.bandwidth_label if v.preflight else _fmt(v.last_val_metric)
        print(
            f"{v.run_id}\t{v.job_id or '-'}\t{v.state_label}\t{v.spec.nodes}x{v.spec.gpus_per_node}"
            f"\t{v.epoch_label}\t{_fmt(v.last_train_loss)}\t{val}\t{_fmt(v.throughput, '.1f')}"
            f"\t{hours_text(*hours[v.run_id])}\t{v.efficiency_label}\t{v.reason_label or '-'}"
        )
    for v in snap.runs:
        if v.note:  # the "*" of the STATE column, spelled out
            print(f"* {v.run_id}: {v.note}")
        for damage in v.damage:  # DAMAGED, spelled out
            print(f"! {v.run_id}: {damage}")
    if every is not None:
        _print_foreign(every)
    return 0


def _print_foreign(every: AllJobs) -> None:
    """The jobs that are not ddp-tui's, under a title that says so."""
    from ddp_tui.reports.efficiency_cells import efficiency_text
    from ddp_tui.tui.formatting import duration

    if every.error:
        print(f"ddp-tui: warning: the other jobs: {every.error}", file=sys.stderr)
    print(
        f"\nNOT DDP-TUI'S: {len(every.foreign)} other jobs (queued, and ended since {every.since})"
    )
    print("JOB\tTASK\tNAME\tSTATE\tPARTITION\tNODES\tGPUS\tELAPSED\tLIMIT\tEFF\tREASON")
    for j in every.foreign:
        task = "-" if j.array_task_id is None else str(j.array_task_id)
        gpus = "?" if j.gpus is None else str(j.gpus)
        limit = "-" if j.time_limit_sec is None else duration(j.time_limit_sec)
        eff = efficiency_text(j.cpu_efficiency, j.mem_efficiency)
        print(
            f"{j.job_id}\t{task}\t{j.name}\t{j.state.value}\t{j.partition or '-'}\t{j.nodes}"
            f"\t{gpus}\t{duration(j.elapsed_sec)}\t{limit}\t{eff}\t{j.reason or '-'}"
        )
