"""``ddp-tui advise GROUP``: scaling advice for a group (docs/advisor.md); its own options
(``--threshold``, ``--deadline``) and its output.

The option parsers raise argparse's error type, so a bad value is reported as
``argument --threshold: ...`` with what is allowed (exit 2).
"""

from __future__ import annotations

import argparse
import math
import re
from typing import TYPE_CHECKING, Final

from ddp_tui.cli.lookup import GROUP_HELP, resolve_group
from ddp_tui.reports.text import strict_json
from ddp_tui.spec.timefmt import parse_time_limit_seconds

if TYPE_CHECKING:
    from ddp_tui.advisor import Advice
    from ddp_tui.remote.cluster import Cluster

THRESHOLD_HELP: Final = "a fraction above 0 and at most 1, or a percentage: 0.8 or 80%"
DEADLINE_HELP: Final = (
    "a duration: a number with a unit (30s, 90m, 2h, 1.5d), or a Slurm time (1:30:00, 1-12)"
)
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WITH_UNIT: Final = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>[smhd])", re.ASCII)


def parse_threshold(text: str) -> float:
    """``0.8`` or ``80%``: the efficiency the advice keeps to."""
    s = text.strip()
    percent = s.endswith("%")
    try:
        value = float(s[:-1] if percent else s) / (100 if percent else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{THRESHOLD_HELP}, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"{THRESHOLD_HELP}, got {text!r}")
    return value


def parse_deadline(text: str) -> float:
    """Seconds in ``90m``, ``2h``, ``1d``, ``45s`` or a Slurm time such as ``1:30:00``."""
    s = text.strip().lower()
    m = _WITH_UNIT.fullmatch(s)
    if m is not None:
        seconds = float(m["n"]) * _UNITS[m["u"]]
        if seconds > 0:
            return seconds
        raise argparse.ArgumentTypeError(f"must be more than 0; {DEADLINE_HELP}, got {text!r}")
    try:
        return float(parse_time_limit_seconds(s))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{DEADLINE_HELP}, got {text!r}") from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``advise``'s parser."""
    ad = sub.add_parser(
        name,
        help="scaling advice for a group: why efficiency drops, what each size would cost, "
        "which size to run",
    )
    ad.add_argument("group", help=GROUP_HELP)
    ad.add_argument("--json", action="store_true", help="print the advice as JSON")
    ad.add_argument(
        "--threshold",
        type=parse_threshold,
        default=None,
        help="the efficiency to keep to: " + THRESHOLD_HELP.replace("%", "%%") + " (default: "
        "the profile's advisor_threshold, else 0.8)",
    )
    ad.add_argument(
        "--deadline",
        type=parse_deadline,
        default=None,
        help="the whole training must end within this: " + DEADLINE_HELP + " (default: none)",
    )


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the advice for the group."""
    group = resolve_group(cluster, args.group)
    advice = cluster.advise(group, threshold=args.threshold, deadline_sec=args.deadline)
    print(advice_text(advice, as_json=args.json), end="")
    return 0


def advice_text(advice: Advice, *, as_json: bool) -> str:
    """What ``advise`` prints: the report as Markdown, or its JSON document."""
    from ddp_tui.advisor.report import advice_json, advice_markdown

    if as_json:  # strict: a NaN from a damaged file prints as null, as every --json does
        return strict_json(advice_json(advice)) + "\n"
    text = advice_markdown(advice)
    return text if text.endswith("\n") else text + "\n"
