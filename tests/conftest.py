"""Suite-wide set-up: the real-cluster fixtures, and isolation from the user's own config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.hold import Hold

pytest_plugins = [
    # The real Slurm test cluster and the real OpenSSH servers (session fixtures).
    "tests.fixtures.slurm_cluster",
    "tests.fixtures.sshd",
    # Finished runs made once per suite run, for the tests that only read them.
    "tests.fixtures.shared_runs",
    # The podman image container jobs run in (imported once per suite run).
    "tests.fixtures.podman_image",
    # The suite's own timing: durations file, per-test budget, groups across two workers.
    "tests.suite.durations",
    "tests.suite.budget",
    "tests.suite.groups",
    "tests.suite.tiers",
    "pytester",  # the suite's own plugins are tested on small suites (tests/suite/)
]


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No test reads the developer's ~/.config/ddp-tui or writes their local job state."""
    home = tmp_path_factory.mktemp("xdg")
    config = home / "config.toml"
    config.write_text("")  # no profiles: the built-in one (a missing file would be an error)
    monkeypatch.setenv("DDP_TUI_CONFIG", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    yield


@pytest.fixture
def hold(tmp_path: Path) -> Iterator[Hold]:
    """A hold file that keeps a job where the test needs it; released at the end in any case
    (see tests/helpers/hold.py)."""
    with Hold.create(tmp_path / "hold") as h:
        yield h
