"""``ddp-tui ls``: every run, newest first, as a table or (``--json``) a JSON list."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``ls``'s parser."""
    ls = sub.add_parser(
        name,
        help="list runs, newest first",
        description=(
            "List runs, newest first. Like every command it keeps each run's jobs.jsonl true "
            "as it reads: the end of a job it sees end is recorded (kept after the "
            "scheduler's accounting is purged), and a job queued by a submit that was "
            "interrupted is adopted. It never cancels a job (only the app and watch act on "
            "a stall, and only with the profile's cancel_stalled)."
        ),
    )
    ls.add_argument("--json", action="store_true", help="print a JSON list instead of a table")


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the runs; a refresh's warning goes to stderr."""
    from ddp_tui.reports.text import strict_json
    from ddp_tui.reports.usage import hours_text, resource_hours

    snap = cluster.refresh()
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
                "group": v.group,
                "kind": v.kind,
                "note": v.note or None,
                "reason": v.reason_label or None,
                "diagnosis": v.diagnosis.to_dict() if v.diagnosis else None,
                "preflight": dataclasses.asdict(v.preflight) if v.preflight else None,
            }
            for v in snap.runs
        ]
        print(strict_json(rows))
        return 0
    print("RUN\tJOB\tSTATE\tSIZE\tEPOCH\tLOSS\tVAL\tSAMPLES/S\tGPU-H\tREASON")
    for v in snap.runs:
        val = v.preflight.bandwidth_label if v.preflight else _fmt(v.last_val_metric)
        print(
            f"{v.run_id}\t{v.job_id or '-'}\t{v.state_label}\t{v.spec.nodes}x{v.spec.gpus_per_node}"
            f"\t{v.epoch_label}\t{_fmt(v.last_train_loss)}\t{val}\t{_fmt(v.throughput, '.1f')}"
            f"\t{hours_text(*hours[v.run_id])}\t{v.reason_label or '-'}"
        )
    for v in snap.runs:
        if v.note:  # the "*" of the STATE column, spelled out
            print(f"* {v.run_id}: {v.note}")
        for damage in v.damage:  # DAMAGED, spelled out
            print(f"! {v.run_id}: {damage}")
    return 0
