"""Fixtures shared by the facade-level stories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster


@pytest.fixture
def slurm_facade(slurm_cluster: Any, tmp_path: Path) -> Iterator[Cluster]:
    """The facade on the real Slurm test cluster, with a runs root of the test's own."""
    profile = Profile(scheduler="auto", runs_root=str(tmp_path / "runs"), partition="debug")
    c = Cluster.open(profile)
    assert c.location == "Slurm on this host"
    yield c
    # Leave no job of ours running for the next test.
    for v in c.refresh().runs:
        if v.state.is_active:
            c.cancel(v.run_id)
    c.close()
