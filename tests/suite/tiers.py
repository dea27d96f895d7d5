"""``--fast``: the inner loop's tier (``make test-fast``).

It keeps what needs no Slurm, no sshd and no torch job: a test that uses a machine-wide
fixture (tests/suite/groups.py), or that is marked ``torch``, ``slurm``, ``ssh`` or ``slow``,
is left out, and the summary says how many. CI runs everything, through ``make test``.
"""

from __future__ import annotations

import pytest

from tests.suite.groups import MACHINE_GROUP, group_of

#: Markers of the tests that start real jobs or need the real cluster's parts.
HEAVY_MARKERS = ("torch", "slurm", "ssh", "slow")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        default=False,
        help="leave out the tests that need Slurm, sshd or a torch job (make test-fast)",
    )


def heavy(item: pytest.Item) -> bool:
    if group_of(item) == MACHINE_GROUP:
        return True
    return any(item.get_closest_marker(name) is not None for name in HEAVY_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    kept = [item for item in items if not heavy(item)]
    left_out = [item for item in items if heavy(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
