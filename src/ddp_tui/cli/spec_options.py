"""The options that make a spec, shared by ``submit`` and ``preflight``: one per spec field,
generated from its description (``FIELDS``), ``--spec-file``, a script's command line, and
the python check's two; and the spec, checks and warnings they lead to."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.submit.plan import SubmitPlan
    from ddp_tui.spec import ExperimentSpec, FieldSpec

#: The description of a parser that takes the spec's options.
SPEC_DESCRIPTION: Final = (
    "Each experiment option sets the spec field of its name. The defaults shown are the "
    "spec's own; the profile (partition, account, time limit, python, ...) and the local "
    "scheduler (device cpu, backend gloo) put theirs first, and --spec-file starts from a "
    "saved spec. List options take shell words in one argument, e.g. "
    "--extra-sbatch '--exclusive --comment=x'. --script PATH implies --entry script; "
    "torchrun's form, [options] -- train.py [args...], gives the script and its arguments."
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


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """An option per spec field, ``--spec-file`` and the trailing ``-- SCRIPT [ARGS]``."""
    from ddp_tui.cli.script_command import add_command_argument
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


def add_python_check_options(parser: argparse.ArgumentParser) -> None:
    """``--recheck-python``, ``--skip-python-check`` and ``--recheck-environment``."""
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
    parser.add_argument(
        "--recheck-environment",
        action="store_true",
        help="detect again what the partition offers (container runtimes, module) and check "
        "the environment again (both are remembered: a day, and once passed)",
    )


def spec_from_args(
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


def recheck_python(cluster: Cluster, args: argparse.Namespace, spec: ExperimentSpec) -> None:
    """With --recheck-python, forget the remembered check, so that the plan checks again;
    with --recheck-environment, what was detected and the environment check too."""
    from ddp_tui.remote.submit.prequeue import PythonCheckCache, PythonKey

    if args.recheck_python:
        PythonCheckCache().forget(PythonKey.of(cluster.profile.name, cluster.location, spec))
    if args.recheck_python or getattr(args, "recheck_environment", False):
        cluster.recheck_environment(spec)


def warn(plans: Sequence[SubmitPlan]) -> None:
    """Say on stderr what the plans could not check, each warning once."""
    for warning in dict.fromkeys(w for plan in plans for w in plan.warnings):
        print(f"ddp-tui: warning: {warning}", file=sys.stderr)
