"""Fixtures shared by the facade-level stories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore


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


@pytest.fixture
def local_jobs_facade(tmp_path: Path) -> Iterator[Cluster]:
    """The facade on a local scheduler of the test's own, where jobs are also sent by hand;
    every job still alive after the test, ddp-tui's or not, is cancelled."""
    executor = LocalExecutor()
    scheduler = LocalScheduler(str(tmp_path / "state"), max_running=4, cancel_grace_sec=5.0)
    c = Cluster(
        executor,
        scheduler,
        RunStore(executor, str(tmp_path / "runs")),
        profile=Profile(scheduler="local", check_python=False),
        location="local scheduler",
    )
    yield c
    for job in scheduler.list_jobs():
        if not job.state.is_terminal:
            scheduler.cancel(job.job_id)
    c.close()
