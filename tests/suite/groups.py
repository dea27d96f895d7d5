"""How the suite shares its workers (pytest-xdist, ``--dist loadgroup``; three on two cores).

- Every test that uses a machine-wide fixture (the real Slurm cluster, the real sshd: each
  holds a machine-wide lock for its session) is in one group, ``machine``, so one worker owns
  them both and runs those tests one at a time, as a single session always did: the
  cluster-wide tests (controller restarts, requeues, reservations) never overlap another Slurm
  test. The other workers run the local work meanwhile.
- Every other test is grouped by its file, so a module's shared fixture (a trained run) is
  made once, by one worker.
- Under xdist, groups go longest first (by tests/durations.json), the ``machine`` group before
  all: the longest-processing-time-first order that keeps one worker from being left with a
  long file at the end.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.suite.durations import DURATIONS_FILE, load

#: Session fixtures that take a machine-wide lock (tests/fixtures/).
MACHINE_WIDE = frozenset({"slurm_cluster", "sshd_env"})
MACHINE_GROUP = "machine"


def group_of(item: pytest.Item) -> str:
    if MACHINE_WIDE.intersection(getattr(item, "fixturenames", ())):
        return MACHINE_GROUP
    return item.nodeid.split("::", 1)[0]


def _parallel(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput") or config.getoption("dist", "no") != "no"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {id(item): group_of(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    if not _parallel(config):
        return  # one process: the collection's own order
    known = load(config.rootpath / DURATIONS_FILE)
    unknown = sorted(known.values())[len(known) // 2] if known else 1.0  # the median test
    cost: dict[str, float] = defaultdict(float)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        group = groups[id(item)]
        cost[group] += known.get(item.nodeid, unknown)
        first.setdefault(group, index)
    # Every worker sorts the same collection by the same file, so they agree on the order.
    items.sort(
        key=lambda it: (
            groups[id(it)] != MACHINE_GROUP,
            -cost[groups[id(it)]],
            first[groups[id(it)]],
        )
    )
