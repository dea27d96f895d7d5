"""``ddp-tui submit``: a run, or a sweep of runs (docs/sweeps.md); ``--dry-run`` prints the job
script(s) and submits nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ddp_tui.cli.connection import add_scheduler_option
from ddp_tui.cli.spec_options import (
    SPEC_DESCRIPTION,
    add_python_check_options,
    add_spec_options,
    recheck_python,
    spec_from_args,
    warn,
)

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.submit.plan import SubmitPlan
    from ddp_tui.spec import ExperimentSpec, SweepFile

#: Why a local refusal of a Slurm-shaped spec is not the end of the road.
PREVIEW_HINT: Final = (
    "to preview this job's Slurm script on this machine, add --scheduler slurm --dry-run "
    "(rendering needs no Slurm; submitting does)"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``submit``'s parser: the spec's options, the sweep's and ``--dry-run``."""
    s = sub.add_parser(name, help="submit a run, or a sweep of sizes", description=SPEC_DESCRIPTION)
    # Also after the subcommand, where a previewing user puts it; SUPPRESS keeps a value
    # given before the subcommand.
    add_scheduler_option(s, argparse.SUPPRESS)
    add_spec_options(s)
    s.add_argument("--dry-run", action="store_true", help="print the job script, submit nothing")
    s.add_argument(
        "--sweep",
        metavar="FIELD=V1,V2",
        action="append",
        help="sweep a spec field over values, e.g. lr=0.1,0.01; repeat it for a grid; bare "
        "sizes such as 1,2,4,8 sweep the size (--sweep-over). One group; members that share "
        "their resources go to Slurm as one job array (docs/sweeps.md)",
    )
    s.add_argument(
        "--sweep-mode",
        choices=("grid", "zip"),
        default="grid",
        help="grid: every combination of the swept values (default); zip: the i-th value of "
        "each list together (lists of one length)",
    )
    s.add_argument(
        "--sweep-file",
        metavar="TOML",
        help="a sweep in a TOML file ([sweep] field = [values], optional [base], mode and "
        "max_concurrent); --sweep options add to it",
    )
    s.add_argument(
        "--max-concurrent",
        type=int,
        metavar="K",
        help="run at most K members of the sweep at once (the job array's %%K)",
    )
    s.add_argument(
        "--sweep-over",
        choices=("gpus", "nodes"),
        default="gpus",
        help="what bare sweep sizes set: GPUs per node or nodes (default: gpus)",
    )
    add_python_check_options(s)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Submit the run or the sweep; print each run id and job id."""
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import FieldError, SpecError

    try:
        sweep_file = _sweep_file(args)
    except SpecError as exc:
        raise ValidationFailed(exc.errors) from None
    spec = spec_from_args(cluster, args, sweep_file.base if sweep_file else None)
    recheck_python(cluster, args, spec)
    try:
        if args.sweep or sweep_file is not None:
            return _submit_sweep(cluster, args, spec, sweep_file)
        return _submit(cluster, args, spec)
    except ValidationFailed as exc:
        if cluster.scheduler.name == "local" and spec.needs_slurm:
            # The facade refuses the shape; only the CLI can say which option gets the
            # script anyway.
            raise ValidationFailed([*exc.errors, FieldError("scheduler", PREVIEW_HINT)]) from None
        raise


def _submit(cluster: Cluster, args: argparse.Namespace, spec: ExperimentSpec) -> int:
    from ddp_tui.remote.submit.plan import ValidationFailed

    if args.dry_run:
        # No warnings here: a dry run is how a script is previewed where Slurm is not
        # installed, and there the skipped partition checks are the point, not news.
        plan = cluster.plan(spec, dry_run=True)  # (no environment check job either)
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        print(plan.script, end="")  # exactly the job.sbatch a submit of this plan writes
        return 0
    plan = cluster.plan(spec)
    warn([plan])
    view = cluster.submit(plan)
    _report_snapshot(cluster, plan)
    print(f"{view.run_id}\t{view.job_id}")
    return 0


def _submit_sweep(
    cluster: Cluster,
    args: argparse.Namespace,
    spec: ExperimentSpec,
    sweep_file: SweepFile | None,
) -> int:
    """Plan the sweep (all members, or none, are submitted); print each member's run id, job
    id, size and values. A dry run prints the scripts the submit would hand to the
    scheduler: each job array's, then each separate member's."""
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import SpecError, Sweep, sweep_from_options

    size_field = "gpus_per_node" if args.sweep_over == "gpus" else "nodes"
    try:
        options = (
            sweep_from_options(args.sweep, mode=args.sweep_mode, size_field=size_field)
            if args.sweep
            else None
        )
        if sweep_file is None:
            assert options is not None  # the caller plans a sweep only with one or the other
            sweep = options
        else:
            loaded = sweep_file.sweep
            # The options' axes come after the file's; --sweep-mode zip wins over the file.
            sweep = Sweep(
                (*loaded.axes, *(options.axes if options else ())),
                "zip" if args.sweep_mode == "zip" else loaded.mode,
                loaded.max_concurrent,
            )
    except SpecError as exc:
        raise ValidationFailed(exc.errors) from None
    # A dry run sends nothing: not even an environment check job.
    plan = cluster.plan_sweep(spec, sweep, max_concurrent=args.max_concurrent, dry_run=args.dry_run)
    if args.dry_run:
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        print(f"ddp-tui: sweep of {plan.summary()}", file=sys.stderr)
        print("\n".join(plan.scripts()), end="")
        return 0
    warn([*plan.plans])
    if not plan.ok:
        raise ValidationFailed(plan.errors)
    print(f"ddp-tui: submitting {plan.summary()}", file=sys.stderr)
    views = cluster.submit_sweep(plan)
    for view, member in zip(views, plan.members, strict=True):
        size = f"{view.spec.nodes}x{view.spec.gpus_per_node}"
        print(f"{view.run_id}\t{view.job_id}\t{size}\t{member.label}")
    return 0


def _sweep_file(args: argparse.Namespace) -> SweepFile | None:
    """``--sweep-file``'s sweep and base fields (None without one); :class:`SpecError`
    naming the file and what is wrong in it."""
    from ddp_tui.spec import FieldError, SpecError, load_sweep_file

    if not args.sweep_file:
        return None
    try:
        text = Path(args.sweep_file).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [FieldError("sweep_file", f"cannot read {args.sweep_file}: {exc.strerror or exc}")]
        ) from None
    return load_sweep_file(text, source=args.sweep_file)


def _report_snapshot(cluster: Cluster, plan: SubmitPlan) -> None:
    """Say on stderr what a script's snapshot held and how long its upload took."""
    upload = cluster.store.last_upload
    if plan.snapshot is None or upload is None:
        return
    snap = plan.snapshot
    if snap.commit:
        state = " with uncommitted changes" if snap.dirty else ""
        where = f"{snap.source} at commit {snap.commit[:12]}{state}"
    else:
        where = snap.source
    print(f"ddp-tui: snapshot of {where}: {snap.summary(upload.seconds)}", file=sys.stderr)
