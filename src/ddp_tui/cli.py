"""`ddp-tui`: the app, and scriptable subcommands on the same facade.

Plain ``ddp-tui`` starts the app. ``ddp-tui submit|ls|logs|cancel|retry|verify|why|
resources|compare|diff|advise|preflight`` do the same things without a screen, for scripts and CI.
Nothing here imports torch, and textual is imported only when the app starts.

Output behaves like a Unix tool's: piped into ``head``, a command stops quietly when the
reader goes away (exit status 141, as if killed by SIGPIPE).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ddp_tui import __version__

if TYPE_CHECKING:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.remote.submit.plan import SubmitPlan
    from ddp_tui.spec import ExperimentSpec, FieldSpec, SweepFile

#: Run directories the app reads per refresh: its first table shows the newest runs at
#: once, and older ones join it refresh by refresh (the CLI reads them all at once).
APP_LISTING_BATCH = 200

#: The shell's status for a process killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141

_SPEC_DESCRIPTION = (
    "Each experiment option sets the spec field of its name. The defaults shown are the "
    "spec's own; the profile (partition, account, time limit, python, ...) and the local "
    "scheduler (device cpu, backend gloo) put theirs first, and --spec-file starts from a "
    "saved spec. List options take shell words in one argument, e.g. "
    "--extra-sbatch '--exclusive --comment=x'. --script PATH implies --entry script; "
    "torchrun's form, [options] -- train.py [args...], gives the script and its arguments."
)
#: Why a local refusal of a Slurm-shaped spec is not the end of the road.
_PREVIEW_HINT = (
    "to preview this job's Slurm script on this machine, add --scheduler slurm --dry-run "
    "(rendering needs no Slurm; submitting does)"
)


def _metavar(f: FieldSpec) -> str:
    # A closed list shows as argparse shows choices; the values still reach the spec's
    # validator as text, so that a wrong one is reported by field name like any other error.
    if f.choices and not f.others:
        return "{" + ",".join(f.choices) + "}"
    return f.placeholder


def _option_help(f: FieldSpec) -> str:
    text = f.help
    if f.others:  # an open list: the choices are not in the metavar
        text += f"; {f.allowed}"
    default = f.default_text
    if default and f.unit:
        default += f" {f.unit}"
    text += f" (default: {default or f.empty or 'none'})"
    return text.replace("%", "%%")  # argparse %-formats help


def _spec_options(parser: argparse.ArgumentParser) -> None:
    from ddp_tui.cli_script_command import add_command_argument
    from ddp_tui.spec import FIELD_SECTIONS, FIELDS

    # One group per section, in the order Compose shows them.
    groups = {section: parser.add_argument_group(section) for section in FIELD_SECTIONS}
    for f in FIELDS.values():
        groups[f.section].add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f"spec_{f.name}",
            metavar=_metavar(f),
            default=None,
            help=_option_help(f),
        )
    parser.add_argument(
        "--spec-file", help="a JSON spec (e.g. a run's spec.json) to start from", default=None
    )
    add_command_argument(parser)


def _scheduler_option(parser: argparse.ArgumentParser, default: object) -> None:
    from ddp_tui.config import SCHEDULERS

    parser.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default=default,
        help="where jobs run: slurm; local (this machine, one node); auto: slurm where it "
        "answers, else local. Overrides the profile's scheduler. With submit --dry-run, "
        "slurm renders the Slurm script even where Slurm is not installed",
    )


def _python_check_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recheck-python",
        action="store_true",
        help="check again that the job's python has torch (a check that passed is "
        "remembered per profile, host, python and env_setup)",
    )
    parser.add_argument(
        "--skip-python-check",
        action="store_true",
        help="do not check that the job's python has torch, when you know better (the "
        "profile's check_python = false does the same for every submit)",
    )


def build_parser() -> argparse.ArgumentParser:
    from ddp_tui.cli_advise import add_advise_parser
    from ddp_tui.cli_diff import add_diff_parser
    from ddp_tui.cli_shell import add_shell_parser
    from ddp_tui.cli_stacks import add_stacks_parser
    from ddp_tui.cli_watch import add_watch_parser

    p = argparse.ArgumentParser(
        prog="ddp-tui", description="Run PyTorch DDP experiments on Slurm clusters."
    )
    p.add_argument("--version", action="version", version=f"ddp-tui {__version__}")
    p.add_argument("--profile", help="cluster profile from the config file")
    p.add_argument("--host", help="run against a login node over SSH (alias from ~/.ssh/config)")
    p.add_argument("--runs-root", help="where run directories live (default: the profile's)")
    _scheduler_option(p, None)
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser(
        "submit", help="submit a run, or a sweep of sizes", description=_SPEC_DESCRIPTION
    )
    # Also after the subcommand, where a previewing user puts it; SUPPRESS keeps a value
    # given before the subcommand.
    _scheduler_option(s, argparse.SUPPRESS)
    _spec_options(s)
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
    _python_check_options(s)
    pf = sub.add_parser(
        "preflight",
        help="submit a collective test of the spec's shape",
        description=_SPEC_DESCRIPTION,
    )
    _scheduler_option(pf, argparse.SUPPRESS)
    _spec_options(pf)
    _python_check_options(pf)
    ls = sub.add_parser("ls", help="list runs, newest first")
    ls.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    for name, helptext in (
        ("cancel", "cancel a run's job (with --group: every live job of its group)"),
        ("retry", "resubmit a run; it resumes from its checkpoint (--group: every failed run)"),
        ("verify", "check a run: completed, nodes, world size, epochs, checkpoint"),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("run", help="run id, a unique prefix of one, or a job id")
        if name != "verify":
            c.add_argument(
                "--group",
                action="store_true",
                help="act on the whole group (a sweep) of the run, or of the group key given",
            )
    why = sub.add_parser(
        "why",
        help="why a run failed, is pending, or has stalled (exit 1: something to fix)",
    )
    why.add_argument("run", help="run id, a unique prefix of one, or a job id")
    why.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    res = sub.add_parser(
        "resources", help="a run's GPU and host memory and utilisation: peak, average, mode"
    )
    res.add_argument("run", help="run id, a unique prefix of one, or a job id")
    res_fmt = res.add_mutually_exclusive_group()
    res_fmt.add_argument("--json", action="store_true", help="print the summary as JSON")
    res_fmt.add_argument("--csv", action="store_true", help="print the table as CSV")
    lg = sub.add_parser("logs", help="print a run's .out (or .err)")
    lg.add_argument("run", help="run id, a unique prefix of one, or a job id")
    lg.add_argument("--err", action="store_true", help="print the .err file instead")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")
    cp = sub.add_parser(
        "compare",
        help="a group's runs: the fields that differ, their outcomes, the best marked; and "
        "the scaling table where their sizes differ",
    )
    cp.add_argument("group", help="group key, or a run in the group")
    cp.add_argument(
        "--sort",
        metavar="COLUMN",
        help="order the outcome table by a column: a differing field, final_val, best_val, "
        "epochs_done, wall_sec, gpu_hours (cpu_hours), throughput, state or run_id; the "
        "metric's best first, others ascending (docs/compare.md)",
    )
    cp.add_argument(
        "--export",
        action="store_true",
        help="write Markdown and CSV next to the runs, with the scaling advice",
    )
    add_advise_parser(sub)
    add_diff_parser(sub)
    add_stacks_parser(sub)
    add_watch_parser(sub)
    add_shell_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ddp-tui`` with ``argv`` (default: the command line); returns the exit status."""
    try:
        try:
            return _main(argv)
        finally:
            # Here, not at the interpreter's exit: a reader that went away (| head) then
            # raises into the handler below instead of printing "Exception ignored".
            sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point fd 1 at /dev/null, so that the interpreter's final flush of what is still
    buffered cannot fail a second time (the recipe in Python's signal docs)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (captured output): nothing is flushed to a pipe at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    from ddp_tui.cli_script_command import SPEC_COMMANDS, attach_word_values, script_form

    words = attach_word_values(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(words)
    if args.command is None:
        return _run_app(args)
    if args.command in SPEC_COMMANDS:
        # Refused before anything connects: the command line alone is wrong.
        refusals = script_form(args, words)
        for e in refusals:
            print(f"ddp-tui: {e.field}: {e.message}", file=sys.stderr)
        if refusals:
            return 2
    from ddp_tui.cli_watch import finish_notifications, prepare_notifications
    from ddp_tui.errors import DdpTuiError
    from ddp_tui.remote.backends.executor import ExecutorError
    from ddp_tui.remote.backends.scheduler import SchedulerError
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import SpecError

    try:
        cluster = _open(args)
    except DdpTuiError as exc:  # a profile, a host or a scheduler that cannot be used
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2
    prepare_notifications(cluster, args.command)
    try:
        if args.scheduler == "slurm" and _submits(args):
            try:
                cluster.partitions()
            except (SchedulerError, ExecutorError) as exc:
                # Asked for by name, Slurm is not probed first: say so now, before a run
                # directory exists and a lost sbatch answer is waited for.
                print(
                    "ddp-tui: --scheduler slurm: Slurm does not answer here, and submitting "
                    f"needs it (submit --dry-run previews the script without it): {exc}",
                    file=sys.stderr,
                )
                return 2
        return _COMMANDS[args.command](cluster, args)
    except ValidationFailed as exc:
        for e in exc.errors:
            print(f"ddp-tui: {e.field}: {e.message}", file=sys.stderr)
        return 2
    except (SpecError, LookupError) as exc:
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2
    except DdpTuiError as exc:  # the scheduler, the connection, a run directory
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 1
    finally:
        finish_notifications(cluster)  # the events this command claimed, delivered
        cluster.close()


def _submits(args: argparse.Namespace) -> bool:
    """Whether the command hands a job to the scheduler."""
    if args.command == "submit":
        return not args.dry_run
    return args.command in ("preflight", "retry")


def _profile(args: argparse.Namespace) -> Profile:
    """The chosen profile, with ``--scheduler`` in place of its own setting."""
    from ddp_tui.config import get_profile
    from ddp_tui.remote.backends.scheduler import SchedulerError

    profile = get_profile(args.profile)
    if getattr(args, "skip_python_check", False):
        profile = dataclasses.replace(profile, check_python=False)
    if args.scheduler is None:
        return profile
    host = args.host or profile.host
    if args.scheduler == "local" and host:
        raise SchedulerError(f"--scheduler local runs jobs on this machine only, not on {host}")
    return dataclasses.replace(profile, scheduler=args.scheduler)


def _open(args: argparse.Namespace) -> Cluster:
    from ddp_tui.remote.cluster import Cluster

    return Cluster.open(_profile(args), host=args.host, runs_root=args.runs_root)


def _run_app(args: argparse.Namespace) -> int:
    from ddp_tui.errors import DdpTuiError
    from ddp_tui.tui.app import run_app

    try:
        profile = _profile(args)
    except DdpTuiError as exc:
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2

    def factory(prompter: object) -> Cluster:
        # Imported here, on the app's I/O worker: the facade (job templates, ssh, the
        # diagnosis rules) loads while the first screen is already painted.
        from ddp_tui.remote.cluster import Cluster

        return Cluster.open(
            profile,
            host=args.host,
            runs_root=args.runs_root,
            prompter=prompter,
            listing_batch=APP_LISTING_BATCH,
        )

    return run_app(factory, profile=profile)


def _spec_from_args(
    cluster: Cluster, args: argparse.Namespace, under: Mapping[str, str] | None = None
) -> ExperimentSpec:
    """The spec of the command line's options over the profile's defaults (or --spec);
    ``under``: fields the options override (a sweep file's ``[base]``)."""
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import ExperimentSpec, check_form

    base = cluster.default_spec()
    if args.spec_file:
        with open(args.spec_file, encoding="utf-8") as fh:
            doc = json.load(fh)
        base = ExperimentSpec.from_dict(doc.get("spec", doc))
    form = dict(under or {})
    form.update(
        (k.removeprefix("spec_"), v)
        for k, v in vars(args).items()
        if k.startswith("spec_") and v is not None
    )
    spec, errors = check_form(form, base)
    if spec is None:
        raise ValidationFailed(errors)
    return spec


def _cmd_submit(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import FieldError, SpecError

    try:
        sweep_file = _sweep_file(args)
    except SpecError as exc:
        raise ValidationFailed(exc.errors) from None
    spec = _spec_from_args(cluster, args, sweep_file.base if sweep_file else None)
    _recheck_python(cluster, args, spec)
    try:
        if args.sweep or sweep_file is not None:
            return _submit_sweep(cluster, args, spec, sweep_file)
        return _submit(cluster, args, spec)
    except ValidationFailed as exc:
        if cluster.scheduler.name == "local" and spec.needs_slurm:
            # The facade refuses the shape; only the CLI can say which option gets the
            # script anyway.
            raise ValidationFailed([*exc.errors, FieldError("scheduler", _PREVIEW_HINT)]) from None
        raise


def _submit(cluster: Cluster, args: argparse.Namespace, spec: ExperimentSpec) -> int:
    from ddp_tui.remote.submit.plan import ValidationFailed

    if args.dry_run:
        # No warnings here: a dry run is how a script is previewed where Slurm is not
        # installed, and there the skipped partition checks are the point, not news.
        plan = cluster.plan(spec)
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        print(plan.script, end="")  # exactly the job.sbatch a submit of this plan writes
        return 0
    plan = cluster.plan(spec)
    _warn([plan])
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
    plan = cluster.plan_sweep(spec, sweep, max_concurrent=args.max_concurrent)
    if args.dry_run:
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        print(f"ddp-tui: sweep of {plan.summary()}", file=sys.stderr)
        print("\n".join(plan.scripts()), end="")
        return 0
    _warn([*plan.plans])
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


def _warn(plans: Sequence[SubmitPlan]) -> None:
    """Say on stderr what the plans could not check, each warning once."""
    for warning in dict.fromkeys(w for plan in plans for w in plan.warnings):
        print(f"ddp-tui: warning: {warning}", file=sys.stderr)


def _recheck_python(cluster: Cluster, args: argparse.Namespace, spec: ExperimentSpec) -> None:
    """With --recheck-python, forget the remembered check, so that the plan checks again."""
    from ddp_tui.remote.submit.prequeue import PythonCheckCache, PythonKey

    if args.recheck_python:
        PythonCheckCache().forget(PythonKey.of(cluster.profile.name, cluster.location, spec))


def _cmd_preflight(cluster: Cluster, args: argparse.Namespace) -> int:
    spec = _spec_from_args(cluster, args)
    _recheck_python(cluster, args, spec)
    plan = cluster.plan(spec, kind="preflight")
    _warn([plan])
    view = cluster.submit(plan)
    print(f"{view.run_id}\t{view.job_id}")
    return 0


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def _cmd_ls(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.text import strict_json
    from ddp_tui.usage import hours_text, resource_hours

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


def resolve_run(cluster: Cluster, key: str) -> RunView:
    """A run by id, unique id prefix, or job id of any attempt."""
    runs = cluster.refresh().runs
    exact = [v for v in runs if v.run_id == key or any(a.job_id == key for a in v.attempts)]
    if exact:
        return exact[0]
    prefix = [v for v in runs if v.run_id.startswith(key)]
    if len(prefix) == 1:
        return prefix[0]
    if not prefix:
        raise LookupError(f"no run matches {key!r} (give a run id, a prefix of one, or a job id)")
    raise LookupError(f"{key!r} matches {len(prefix)} runs; give more of the run id")


def _cmd_cancel(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.group:
        group = resolve_group(cluster, args.run)
        jobs = cluster.cancel_group(group)
        done = f"job {', '.join(jobs)}" if jobs else "nothing was alive"
        print(f"cancelled group {group} ({done})")
        return 0
    view = resolve_run(cluster, args.run)
    jobs = cluster.cancel(view.run_id)
    print(f"cancelled {view.run_id} (job {', '.join(jobs)})")
    return 0


def _cmd_retry(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.group:
        result = cluster.retry_group(resolve_group(cluster, args.run))
        for run_id in result.retried:
            print(f"{run_id}\tretried")
        for run_id, why in result.skipped:
            print(f"{run_id}\tleft as it is: {why}")
        return 0
    seen = resolve_run(cluster, args.run)
    view = cluster.retry(seen.run_id, seen=len(seen.attempts))
    print(f"{view.run_id}\t{view.job_id}\tattempt {len(view.attempts)}")
    return 0


def _cmd_verify(cluster: Cluster, args: argparse.Namespace) -> int:
    checks = cluster.verify(resolve_run(cluster, args.run).run_id)
    for c in checks:
        mark = {True: "ok  ", False: "FAIL", None: "... "}[c.ok]
        print(f"[{mark}] {c.name}: {c.detail}")
    return 0 if all(c.ok for c in checks) else 1


def _cmd_why(cluster: Cluster, args: argparse.Namespace) -> int:
    """Why the run is where it is; exit 1 when there is something to fix."""
    from ddp_tui.diagnosis.text import diagnosis_lines
    from ddp_tui.remote.backends.states import JobState

    view = resolve_run(cluster, args.run)
    head = f"{view.run_id} (job {view.job_id or '-'}): {view.state.value}"
    if view.exit_code:
        head += f", exit {view.exit_code}"
    if view.damage:
        return _why_damaged(args, view, head)
    if view.state is JobState.RUNNING and view.stall is None:
        # A stall is judged from the activity files' times, which a refresh reads only for
        # runs its previous poll found running; this process learned that in its first one.
        view = next((v for v in cluster.refresh().runs if v.run_id == view.run_id), view)
    if view.state.is_active:
        doc: dict[str, object] = {"run_id": view.run_id, "state": view.state.value}
        lines = [head]
        if view.state is JobState.PENDING:
            lines.append(f"pending: {view.reason_label or view.reason or 'no reason given'}")
            # Asked here because `why` is on demand: never in a periodic refresh.
            start = cluster.estimated_start(view.run_id)
            if start:
                doc["estimated_start"] = start
                lines.append(f"estimated start: {start}")
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
        _print_why(args, doc, lines)
        return 1 if view.stall is not None else 0
    diagnosis = cluster.diagnose(view.run_id)
    if diagnosis is None:
        failed = view.state is not JobState.COMPLETED and view.job_id is not None
        lines = [head, "no diagnosis: no rule recognised what the run left"]
        if failed:
            lines.append(f"see: ddp-tui logs {view.run_id} --err")
        _print_why(args, {"run_id": view.run_id, "state": view.state.value}, lines)
        return 1 if failed else 0
    doc = {"run_id": view.run_id, "state": view.state.value, **diagnosis.to_dict()}
    _print_why(args, doc, [head, *diagnosis_lines(diagnosis)])
    return 1 if diagnosis.needs_fix else 0


def _why_damaged(args: argparse.Namespace, view: RunView, head: str) -> int:
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
    _print_why(args, doc, lines)
    return 1


def _print_why(args: argparse.Namespace, doc: dict[str, object], lines: list[str]) -> None:
    from ddp_tui.text import strict_json

    print(strict_json(doc) if args.json else "\n".join(lines))


def _cmd_resources(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_resources import resources_text

    view = resolve_run(cluster, args.run)
    fmt = "json" if args.json else "csv" if args.csv else "table"
    text = resources_text(
        cluster.resources(view.run_id),
        run_id=view.run_id,
        job_id=view.job_id,
        state=view.state.value,
        telemetry_sec=view.spec.telemetry_sec,
        fmt=fmt,
    )
    print(text, end="")
    return 0


def _cmd_logs(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.text import collapse_carriage_returns

    view = resolve_run(cluster, args.run)

    def show() -> None:
        detail = cluster.follow(view.run_id)
        for line in detail.err_lines if args.err else detail.out_lines:
            print(collapse_carriage_returns(line))
        sys.stdout.flush()

    show()
    while args.follow:
        state = next((v.state for v in cluster.refresh().runs if v.run_id == view.run_id), None)
        show()
        if state is not None and state.is_terminal:
            break
        time.sleep(1.0)
    return 0


def resolve_group(cluster: Cluster, key: str) -> str:
    """A comparison group by its key, or the group of a run (id, prefix or job id)."""
    if key in cluster.groups():
        return key
    return resolve_run(cluster, key).group or key


def _cmd_compare(cluster: Cluster, args: argparse.Namespace) -> int:
    """The outcome table (fields that differ, outcomes, the best marked), then the scaling
    table where the runs' sizes differ (or nothing does)."""
    from ddp_tui.outcomes import outcomes_markdown, sort_outcomes
    from ddp_tui.results import to_markdown

    group = resolve_group(cluster, args.group)
    outcomes = cluster.outcomes(group)  # LookupError for a group with no runs
    if args.sort:
        try:
            outcomes = sort_outcomes(outcomes, args.sort)
        except ValueError as exc:
            print(f"ddp-tui: --sort: {exc}", file=sys.stderr)
            return 2
    print(f"# Outcomes: {group}\n")
    print(outcomes_markdown(outcomes))
    if outcomes.shows_scaling:
        print("# Scaling\n")
        print(to_markdown(cluster.compare(group)))
    if args.export:
        for path in cluster.export_comparison(group):
            print(f"wrote {path}")
    return 0


def _cmd_stacks(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_stacks import stacks_output

    run_id = resolve_run(cluster, args.run).run_id
    taken = cluster.stacks(run_id, timeout=args.timeout, py_spy=args.py_spy)
    sys.stdout.write(stacks_output(taken, as_json=args.json))
    return 0


def _cmd_diff(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_diff import diff_text

    a, b = resolve_run(cluster, args.run_a), resolve_run(cluster, args.run_b)
    if a.run_id == b.run_id:
        print(f"ddp-tui: diff needs two different runs: both name {a.run_id}", file=sys.stderr)
        return 2
    print(diff_text(cluster.diff(a.run_id, b.run_id), as_json=args.json), end="")
    return 0


def _cmd_shell(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_shell import run_shell

    return run_shell(cluster, resolve_run(cluster, args.run).run_id, node=args.node)


def _cmd_advise(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_advise import advice_text

    group = resolve_group(cluster, args.group)
    advice = cluster.advise(group, threshold=args.threshold, deadline_sec=args.deadline)
    print(advice_text(advice, as_json=args.json), end="")
    return 0


def _cmd_watch(cluster: Cluster, args: argparse.Namespace) -> int:
    from ddp_tui.cli_watch import watch

    return watch(
        cluster, args.target, resolve=lambda key: resolve_run(cluster, key), interval=args.interval
    )


_COMMANDS = {
    "submit": _cmd_submit,
    "preflight": _cmd_preflight,
    "ls": _cmd_ls,
    "logs": _cmd_logs,
    "cancel": _cmd_cancel,
    "retry": _cmd_retry,
    "verify": _cmd_verify,
    "why": _cmd_why,
    "resources": _cmd_resources,
    "compare": _cmd_compare,
    "diff": _cmd_diff,
    "stacks": _cmd_stacks,
    "advise": _cmd_advise,
    "watch": _cmd_watch,
    "shell": _cmd_shell,
}


if __name__ == "__main__":
    sys.exit(main())
