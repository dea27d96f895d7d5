"""The suite's own timing plugins, run on small suites of their own (pytester): the per-test
budget names a slow test (and fails it when asked), a ``slow`` marker must say why, durations
are recorded, and under two real xdist workers every test of the machine-wide group runs on
one worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: The inner suites run without the outer session's snapshot report (it keeps its folder in an
#: environment variable an inner session would replace) and without a cache to leave behind.
INNER = (
    "-p", "no:textual-snapshot", "-p", "no:cacheprovider",
    "-o", "asyncio_default_fixture_loop_scope=function",
)  # fmt: skip

SLEEPER = """
import time
import pytest

def test_sleeps():
    time.sleep(0.4)

@pytest.mark.slow(reason="it sleeps on purpose")
def test_sleeps_and_says_why():
    time.sleep(0.4)

def test_quick():
    pass
"""


def test_a_test_past_the_budget_is_named_at_the_end_and_still_passes(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sleeper=SLEEPER)
    result = pytester.runpytest(*INNER, "-p", "tests.suite.budget", "-o", "test_budget_sec=0.2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*over the per-test budget*",
            "*test_sleeper.py::test_sleeps took *past the 0.2 s budget of a test not marked slow*",
        ]
    )
    assert "test_sleeps_and_says_why took" not in result.stdout.str()


def test_with_budget_fails_a_test_past_the_budget_fails_naming_itself(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sleeper=SLEEPER)
    budget = ("-p", "tests.suite.budget", "-o", "test_budget_sec=0.2", "--budget-fails")
    result = pytester.runpytest(*INNER, *budget)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_sleeper.py::test_sleeps took *past the 0.2 s budget of a test not marked slow*"]
    )
    assert "test_sleeps_and_says_why took" not in result.stdout.str()


def test_no_budget_when_it_is_zero(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sleeper=SLEEPER)
    result = pytester.runpytest(*INNER, "-p", "tests.suite.budget", "-o", "test_budget_sec=0")
    result.assert_outcomes(passed=3)
    assert "over the per-test budget" not in result.stdout.str()


def test_a_slow_marker_without_a_reason_stops_the_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_unexplained="""
import pytest

@pytest.mark.slow
def test_mute():
    pass
"""
    )
    result = pytester.runpytest(*INNER, "-p", "tests.suite.budget")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*must say why*test_unexplained.py::test_mute*"])


def test_durations_are_recorded_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sleeper=SLEEPER)
    out = pytester.path / "durations.json"
    record = ("-p", "tests.suite.durations", "--record-durations", str(out))
    result = pytester.runpytest(*INNER, *record)
    result.assert_outcomes(passed=3)
    seconds = json.loads(out.read_text())
    assert set(seconds) == {
        "test_sleeper.py::test_sleeps",
        "test_sleeper.py::test_sleeps_and_says_why",
        "test_sleeper.py::test_quick",
    }
    assert seconds["test_sleeper.py::test_sleeps"] >= 0.4 > seconds["test_sleeper.py::test_quick"]


def test_two_workers_keep_the_machine_wide_tests_on_one(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real xdist workers: every test using a machine-wide fixture (the names of the Slurm
    cluster's and sshd's; here fakes that only say which worker they are on) runs on the same
    worker, and each file's local tests run together."""
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # tests.suite, in workers
    pytester.makeconftest(
        f"""
import os
from pathlib import Path
import pytest

def note(kind, name):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    (Path({str(seen)!r}) / f"{{kind}}-{{name}}").write_text(worker)

@pytest.fixture(scope="session")
def slurm_cluster():  # a fake: no cluster, only the fixture's name
    return "fake cluster"

@pytest.fixture(scope="session")
def sshd_env():  # a fake: no sshd, only the fixture's name
    return "fake sshd"
"""
    )
    for k in range(4):
        pytester.makepyfile(
            **{
                f"test_mixed{k}": f"""
import time
from conftest import note

def test_on_slurm(slurm_cluster):
    note("machine", "slurm{k}")

def test_on_sshd(sshd_env):
    note("machine", "sshd{k}")

def test_local_a():
    time.sleep(0.3)
    note("local", "a{k}")

def test_local_b():
    time.sleep(0.3)
    note("local", "b{k}")
"""
            }
        )
    result = pytester.runpytest_subprocess(
        *INNER,
        "-p",
        "tests.suite.groups",
        "-n",
        "2",
        "--dist",
        "loadgroup",
        "--no-loadscope-reorder",
    )
    result.assert_outcomes(passed=16)
    workers = {p.name: p.read_text() for p in seen.iterdir()}
    machine = {w for name, w in workers.items() if name.startswith("machine-")}
    local = {w for name, w in workers.items() if name.startswith("local-")}
    assert len([n for n in workers if n.startswith("machine-")]) == 8
    assert len(machine) == 1, workers  # one worker owns the machine-wide fixtures
    assert local <= {"gw0", "gw1"}, workers
    for k in range(4):  # a file's tests stay together: its module fixtures are made once
        assert workers[f"local-a{k}"] == workers[f"local-b{k}"], workers


def test_the_fast_tier_leaves_out_jobs_slurm_and_sshd(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def slurm_cluster():  # a fake: only the fixture's name
    return "fake cluster"
"""
    )
    pytester.makepyfile(
        test_tiers="""
import pytest

def test_pure():
    pass

@pytest.mark.torch
def test_trains():
    pass

@pytest.mark.slow(reason="long on purpose")
def test_long():
    pass

def test_on_slurm(slurm_cluster):
    pass
"""
    )
    args = (*INNER, "-p", "tests.suite.budget", "-p", "tests.suite.tiers", "-v")
    result = pytester.runpytest(*args, "--fast")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["*test_tiers.py::test_pure PASSED*"])
    pytester.runpytest(*args).assert_outcomes(passed=4)  # the whole suite keeps them all
