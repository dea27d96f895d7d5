"""A run on the local scheduler, which keeps no accounting: once its job has ended, refreshes
write no ``usage.json``, ask the scheduler nothing about what it used and run no command for
it; Jobs' efficiency, ``ls`` and ``ls --json`` say not measured ("—", null), never 0. Real
scheduler, real processes: a run whose python is ``true`` ends at once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import USAGE_FILE, RunStore
from ddp_tui.reports.accounting import JobAccounting
from ddp_tui.reports.efficiency_cells import NO_FIGURE
from tests.integration.story import tiny_spec
from tests.integration.test_cli import cli
from tests.remote.local_env import wait_for


class CountingExecutor(LocalExecutor):
    """The real local executor, keeping every command it runs (a batch's too)."""

    def __init__(self) -> None:
        super().__init__()
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        self.argvs.append(list(argv))
        return super().run(argv, **kwargs)


class CountingLocalScheduler(LocalScheduler):
    """The real local scheduler, counting the asks for what jobs used (a counting wrapper)."""

    usage_asks = 0

    def job_usages(self, job_ids: Sequence[str]) -> dict[str, JobAccounting]:
        CountingLocalScheduler.usage_asks += 1
        return super().job_usages(job_ids)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[Cluster, CountingExecutor]]:
    executor = CountingExecutor()
    scheduler = CountingLocalScheduler(str(tmp_path / "state"), max_running=2)
    c = Cluster(
        executor,
        scheduler,
        RunStore(executor, str(tmp_path / "runs")),
        profile=Profile(scheduler="local", check_python=False),
        location="local scheduler",
    )
    yield c, executor
    c.close()


def test_an_ended_local_run_gets_no_usage_record_and_says_not_measured(
    local: tuple[Cluster, CountingExecutor], tmp_path: Path
) -> None:
    cluster, executor = local
    CountingLocalScheduler.usage_asks = 0
    run = cluster.submit(cluster.plan(tiny_spec(name="quick", epochs=1, python="true")))

    def view() -> Any:
        return next(v for v in cluster.refresh().runs if v.run_id == run.run_id)

    wait_for(lambda: view().state.is_terminal, what="the run's end")
    assert cluster.scheduler.keeps_accounting is False
    executor.argvs.clear()
    for _ in range(3):  # its end recorded, then refreshes as the app makes them
        ended = view()
    assert ended.efficiency is None and ended.efficiency_label == NO_FIGURE
    assert not (tmp_path / "runs" / run.run_id / USAGE_FILE).exists()
    assert CountingLocalScheduler.usage_asks == 0
    # The listing alone (ls of the runs root): no command for what the job used.
    assert {argv[0] for argv in executor.argvs} == {"ls"}, executor.argvs

    config = f'[profiles.local]\nscheduler = "local"\nlocal_state_dir = "{tmp_path / "state"}"\n'
    rows = json.loads(cli(tmp_path, "ls", "--json", config=config).stdout)
    row = next(r for r in rows if r["run_id"] == run.run_id)
    assert row["cpu_efficiency"] is None and row["mem_efficiency"] is None
    header, *lines = cli(tmp_path, "ls", config=config).stdout.splitlines()
    names = header.split("\t")
    assert names[-2:] == ["EFF", "REASON"]
    cells = dict(zip(names, next(ln for ln in lines if ln.startswith(run.run_id)).split("\t"),
                     strict=True))  # fmt: skip
    assert cells["EFF"] == NO_FIGURE and cells["STATE"] == ended.state_label
    assert not (tmp_path / "runs" / run.run_id / USAGE_FILE).exists()
