"""The suite's time budget, held by the suite itself.

A test not marked ``slow`` that runs past ``test_budget_sec`` (pyproject.toml, 60 s) is named
with its time at the end of the run, under "over the per-test budget": the suite grew slower,
and the place is named. It fails only with ``--budget-fails`` (``make durations`` passes it):
a timed assertion would turn a busy machine into a red run, and timing is measured, not
asserted. A test that must take longer says why, in its marker:
``@pytest.mark.slow(reason="...")``. A ``slow`` marker without a reason stops the collection.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

_SETUP_SEC = pytest.StashKey[float]()
#: The user property a report carries past the budget (it crosses from an xdist worker).
OVER_BUDGET = "over_budget"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "test_budget_sec",
        "a test not marked slow fails when its set-up and call take longer (0: no budget)",
        default="60",
    )
    parser.addoption(
        "--budget-fails",
        action="store_true",
        help="a test not marked slow that runs past test_budget_sec fails (default: named only)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_OverBudget(), "over-budget")
    config.addinivalue_line(
        "markers",
        "slow(reason): may run past the per-test budget (test_budget_sec); the reason says why",
    )


def slow_reason(item: pytest.Item) -> str | None:
    """The reason a test gives for being slow, or None when it is not marked slow."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return None
    return str(mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")).strip()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unexplained = [item.nodeid for item in items if slow_reason(item) == ""]
    if unexplained:
        raise pytest.UsageError(
            "a test marked slow must say why, as @pytest.mark.slow(reason=...): "
            + ", ".join(unexplained)
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "setup":
        item.stash[_SETUP_SEC] = report.duration
    elif call.when == "call" and report.passed:
        budget = float(item.config.getini("test_budget_sec"))
        setup = item.stash.get(_SETUP_SEC, 0.0)
        spent = setup + report.duration
        if budget > 0 and spent > budget and slow_reason(item) is None:
            why = (
                f"{item.nodeid} took {spent:.1f} s (set-up {setup:.1f} s, call "
                f"{report.duration:.1f} s), past the {budget:g} s budget of a test not marked "
                "slow: make it wait less, or mark it @pytest.mark.slow(reason=...) saying why "
                "it must take this long"
            )
            if item.config.getoption("budget_fails"):
                report.outcome = "failed"
                report.longrepr = why
            else:
                report.user_properties.append((OVER_BUDGET, why))
    return report


class _OverBudget:
    """The over-budget notes, collected where the run is reported (the xdist controller)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.notes += [str(why) for name, why in report.user_properties if name == OVER_BUDGET]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.notes:
            terminalreporter.section("over the per-test budget")
            for why in self.notes:
                terminalreporter.write_line(why)
