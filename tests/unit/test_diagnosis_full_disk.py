"""A job that failed on a runs root filled to the last byte, with nothing in its logs: the
facade reads the root's free space in the same batch as the logs' tails, and the diagnosis
says ``disk-full`` (in the Jobs view, recorded in jobs.jsonl, and from ``Cluster.diagnose``).

The runs root is a real small tmpfs (root only; skipped with the reason otherwise), filled
by the test. The scheduler is the FAKE of tests/unit/test_cluster_facade.py: a real job
whose disk fills may still squeeze its last line into a log's last page
(tests/integration/test_full_disk_local.py), so only a fake ends a job with empty logs on
a full disk by construction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.helpers.small_disk import fill, mount_tmpfs, unmount
from tests.unit.test_cluster_facade import FakeScheduler, records, submit, view_of
from tests.unit.test_diagnosis_facade import log, make_cluster

#: Room for submit's own check (a 64 MiB margin), filled afterwards.
SIZE_KIB = 80 * 1024


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, FakeScheduler, Path]]:
    root = tmp_path / "runs"
    mount_tmpfs(root, SIZE_KIB)
    sched = FakeScheduler()
    c = make_cluster(tmp_path, sched)
    try:
        yield c, sched, root
    finally:
        c.close()
        unmount(root)


def failed_silently(c: Cluster, sched: FakeScheduler) -> str:
    view = submit(c)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    view_of(c, view.run_id)
    log(view, "err").write_text("")
    log(view, "out").write_text("")
    return view.run_id


def test_a_silent_failure_on_a_full_runs_root_is_disk_full(
    cluster: tuple[Cluster, FakeScheduler, Path],
) -> None:
    c, sched, root = cluster
    run_id = failed_silently(c, sched)
    fill(root, leave=0)
    job_id = view_of(c, run_id).job_id
    assert job_id
    sched.set(job_id, JobState.FAILED, exit_code=1)
    done = view_of(c, run_id)
    assert done.diagnosis is not None and done.diagnosis.code == "disk-full", done.diagnosis
    assert [e.file for e in done.diagnosis.evidence] == ["scheduler", "df"]
    assert str(root) in done.diagnosis.cause
    assert c.diagnose(run_id) == done.diagnosis


def test_the_same_failure_with_room_left_is_not_blamed_on_the_disk(
    cluster: tuple[Cluster, FakeScheduler, Path],
) -> None:
    c, sched, _root = cluster
    run_id = failed_silently(c, sched)
    job_id = view_of(c, run_id).job_id
    assert job_id
    sched.set(job_id, JobState.FAILED, exit_code=1)
    done = view_of(c, run_id)
    assert done.diagnosis is None  # nothing recognised: no guess
    assert c.diagnose(run_id) is None
    (end,) = [r for r in records(done) if r.get("event") == "end"]
    assert "diagnosis" not in end
