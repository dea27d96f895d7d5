"""Every test's duration, kept in the repo (tests/durations.json) and refreshed by
``make durations``: the measure the suite's budget and its order across workers start from.

A test's duration is the sum of its set-up, call and tear-down, as pytest reports them; a
module's shared fixture is paid by the test that sets it up first. Under pytest-xdist the
controller receives every worker's reports, so the file is written once, by the controller.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

#: Where the durations of the last recorded run are kept, relative to the repo's root.
DURATIONS_FILE = "tests/durations.json"

#: pytest-xdist's ``--dist loadgroup`` appends ``@group`` to a node id; the file keys by the
#: test's own id, which a parametrized id's brackets close before any group suffix.
_GROUP_SUFFIX = re.compile(r"@[^\]@]*$")


def test_id(nodeid: str) -> str:
    """The node id without the worker group's suffix."""
    return _GROUP_SUFFIX.sub("", nodeid)


def load(path: Path) -> dict[str, float]:
    """The recorded durations, or none when the file is missing or unreadable (a fresh
    checkout of a branch that never recorded them still runs, in collection order)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        metavar="PATH",
        default=None,
        help=f"write every test's duration (seconds, set-up + call + tear-down) to PATH as "
        f"JSON; `make durations` refreshes {DURATIONS_FILE} this way",
    )


class Recorder:
    """Sums each test's phases as their reports arrive, and writes them all at the end."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # In the controller this sees every worker's reports; in a plain run, its own.
        key = test_id(report.nodeid)
        self.seconds[key] = self.seconds.get(key, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        ordered = {k: round(self.seconds[k], 2) for k in sorted(self.seconds)}
        self.target.write_text(json.dumps(ordered, indent=0) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--record-durations")
    # A worker's reports reach the controller, which alone writes the file.
    if target and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(Path(target)), "durations-recorder")
