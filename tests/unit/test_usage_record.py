"""The usage record (``usage.json``): written once per ended attempt by the refresh's reaction,
read with the run by the listing, never asked for again; accounting that lags is asked again
at the next refresh and given up on after a bound, with a record that says so.

Real run directories, a real :class:`RunStore`, the real attempt states and table. The
scheduler is a FAKE: accounting that lags the controller (a job ended, sacct not final yet)
cannot be held on the real cluster on demand. Its answers are real sacct text of the test
cluster, parsed (tests/remote/data/usage_two_jobs.txt: job 1 COMPLETED with its steps, job 2
still RUNNING). The real query over many jobs is tested on the Slurm test cluster
(tests/integration/test_user_jobs_slurm.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.scheduler import JobStatus, PartitionInfo, Scheduler
from ddp_tui.remote.backends.slurm.usage_query import parse_usages
from ddp_tui.remote.model.view_building import efficiency_of
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.run_table import RunTable
from ddp_tui.remote.runs.reactions import Seen
from ddp_tui.remote.runs.reactions.usage import UNAVAILABLE, WAIT_SEC, RecordUsage
from ddp_tui.remote.store.runs import USAGE_FILE, RunInfo, RunStore
from ddp_tui.reports.accounting import JobAccounting
from ddp_tui.reports.efficiency import spec_asked, usage_report
from ddp_tui.spec import ExperimentSpec

DATA = Path(__file__).resolve().parents[1] / "remote" / "data"
ACCOUNTED = parse_usages((DATA / "usage_two_jobs.txt").read_text(), ["1", "2"])
FINAL, LAGGING = ACCOUNTED["1"], ACCOUNTED["2"]  # COMPLETED with steps; still RUNNING
T0 = 1_800_000_000.0  # when the ends were recorded


@dataclass
class FakeAccounting(Scheduler):
    """FAKE: a scheduler whose accounting answers what each test sets, counting the asks."""

    answers: dict[str, JobAccounting] = field(default_factory=dict)
    asked: list[list[str]] = field(default_factory=list)
    keeps_accounting: bool = True
    name: str = "slurm"

    def job_usages(self, job_ids: Sequence[str]) -> dict[str, JobAccounting]:
        self.asked.append(list(job_ids))
        return {j: self.answers[j] for j in job_ids if j in self.answers}

    def submit(self, script_path: str, run_dir: str) -> str:
        raise NotImplementedError

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        return {}

    def cancel(self, job_id: str) -> None:
        raise NotImplementedError

    def requeue(self, job_id: str) -> None:
        raise NotImplementedError

    def version(self) -> str:
        return "fake"

    def partitions(self) -> list[PartitionInfo]:
        return []


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def _run(root: Path, name: str, job_id: str, *, ended: bool = True) -> str:
    """A run directory as ddp-tui leaves it: its spec, its attempt and (``ended``) its end."""
    run_id = f"20260101-000000-{name}-00{len(name):02x}"
    run = root / run_id
    run.mkdir(parents=True)
    spec = ExperimentSpec(name=name, mem="500M", time_limit="00:05:00").to_dict()
    (run / "spec.json").write_text(json.dumps({"spec": spec, "kind": "train"}))
    lines = [{"job_id": job_id, "scheduler": "slurm", "submitted_at": _iso(T0 - 60), "attempt": 1}]
    if ended:
        lines.append(
            {"event": "end", "job_id": job_id, "state": "COMPLETED", "exit_code": 0,
             "elapsed_sec": 9.0, "recorded_at": _iso(T0)}
        )  # fmt: skip
    (run / "jobs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_id


class Refreshes:
    """The store, states and table of one process, and the reaction at a set clock."""

    def __init__(self, root: Path, scheduler: FakeAccounting) -> None:
        self.store = RunStore(LocalExecutor(), str(root))
        self.states = AttemptStates(scheduler, self.store)
        self.table = RunTable(self.states)
        self.now = T0
        self.react = RecordUsage(
            scheduler, self.store, self.states, self.table, clock=lambda: self.now
        )

    def refresh(self, at: float, *, polled: bool = True) -> dict[str, RunInfo]:
        """A listing (one batch), then the reaction at ``at``; the runs as it left them.
        ``polled``: the pass asked the scheduler (not the listing at start-up)."""
        self.now = at
        seen = Seen(self.store.list_runs(), polled=polled)
        assert self.react(seen) is None
        return {info.ref.run_id.split("-")[2]: info for info in seen.infos}


def _record(root: Path, name: str) -> dict[str, object] | None:
    (path,) = root.glob(f"*-{name}-*")
    file = path / USAGE_FILE
    return json.loads(file.read_text()) if file.exists() else None


def test_written_once_with_the_reports_figures_then_never_asked_again(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _run(root, "done", "71")
    _run(root, "live", "72", ended=False)  # still running: nothing to ask
    fake = FakeAccounting(answers={"71": FINAL})
    app = Refreshes(root, fake)
    app.refresh(T0 + 1, polled=False)  # the listing at start-up asks no scheduler
    assert fake.asked == [] and _record(root, "done") is None
    runs = app.refresh(T0 + 5)
    assert fake.asked == [["71"]]
    record = _record(root, "done")
    assert record is not None and _record(root, "live") is None
    report = usage_report(FINAL, ended=True, asked=spec_asked(app.table.spec_of(runs["done"])))
    assert record["job_id"] == "71" and record["source"] == "sacct"
    assert record["cpu_efficiency"] == report.cpu_efficiency.value
    assert record["mem_efficiency"] == report.mem_efficiency.value
    assert record["max_rss_mib_per_node"] == report.max_rss_mib_per_node.value
    assert record["time_used_fraction"] == report.time_used_fraction.value
    # The row of this very refresh has it (the run as the reaction left it).
    eff = efficiency_of(runs["done"])
    assert eff is not None and (eff.cpu, eff.mem) == (
        record["cpu_efficiency"],
        record["mem_efficiency"],
    )
    assert app.table.view(runs["done"]).efficiency == eff
    for at in (T0 + 10, T0 + 2 * WAIT_SEC):
        app.refresh(at)
    assert fake.asked == [["71"]]  # never again, in this process
    other = Refreshes(root, fake)  # nor in another, which reads the record with the run
    assert efficiency_of(other.refresh(T0 + 20)["done"]) == eff
    assert fake.asked == [["71"]]


def test_lagging_accounting_is_asked_again_then_given_up_on(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _run(root, "lag", "81")  # accounting: not final yet (RUNNING there)
    _run(root, "gone", "82")  # accounting: no record at all
    fake = FakeAccounting(answers={"81": LAGGING})
    app = Refreshes(root, fake)
    app.refresh(T0 + 30)
    app.refresh(T0 + 60)
    assert fake.asked == [["81", "82"], ["81", "82"]]  # one query for both, newest first
    assert _record(root, "lag") is None and _record(root, "gone") is None
    fake.answers["81"] = FINAL  # accounting caught up
    runs = app.refresh(T0 + 90)
    assert fake.asked[-1] == ["81", "82"]
    lag = _record(root, "lag")
    assert lag is not None and lag["source"] == "sacct" and lag["cpu_efficiency"] is not None
    app.refresh(T0 + WAIT_SEC - 1)
    assert fake.asked[-1] == ["82"] and _record(root, "gone") is None
    runs = app.refresh(T0 + WAIT_SEC)  # the bound: an unavailable record, never asked again
    gone = _record(root, "gone")
    assert gone is not None and gone["source"] == UNAVAILABLE and gone["job_id"] == "82"
    assert gone["cpu_efficiency"] is None and gone["mem_efficiency"] is None
    assert "10 min after its end" in str(gone["note"])
    eff = efficiency_of(runs["gone"])
    assert eff is not None and (eff.cpu, eff.mem, eff.source) == (None, None, UNAVAILABLE)
    assert app.table.view(runs["gone"]).efficiency_label == "—"
    asks = len(fake.asked)
    app.refresh(T0 + 5 * WAIT_SEC)
    assert len(fake.asked) == asks


def test_a_record_another_process_wrote_is_read_and_not_asked_for(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_id = _run(root, "race", "91")
    fake = FakeAccounting()  # lagging: nothing yet
    app = Refreshes(root, fake)
    app.refresh(T0 + 1)
    assert fake.asked == [["91"]]
    # Another process (the CLI beside the app) got it first.
    written = {"job_id": "91", "cpu_efficiency": 0.5, "mem_efficiency": 0.25, "source": "sacct"}
    (root / run_id / USAGE_FILE).write_text(json.dumps(written))
    runs = app.refresh(T0 + 2)  # the listing read it again, in its batch
    assert fake.asked == [["91"]]
    eff = efficiency_of(runs["race"])
    assert eff is not None and (eff.cpu, eff.mem) == (0.5, 0.25)


def test_a_new_attempt_gets_its_own_record(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_id = _run(root, "retry", "101")
    fake = FakeAccounting(answers={"101": FINAL, "102": FINAL})
    app = Refreshes(root, fake)
    app.refresh(T0 + 1)
    with (root / run_id / "jobs.jsonl").open("a") as f:  # retried; the retry ended too
        f.write(json.dumps({"job_id": "102", "scheduler": "slurm", "attempt": 2}) + "\n")
        f.write(json.dumps({"event": "end", "job_id": "102", "state": "COMPLETED",
                            "recorded_at": _iso(T0 + 100)}) + "\n")  # fmt: skip
    runs = app.refresh(T0 + 101)
    assert fake.asked == [["101"], ["102"]]
    record = _record(root, "retry")
    assert record is not None and record["job_id"] == "102"
    assert efficiency_of(runs["retry"]) is not None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "is not JSON"),
        (json.dumps({"job_id": "111", "cpu_efficiency": "high"}).encode(), "cpu_efficiency"),
        (json.dumps({"cpu_efficiency": 0.5, "source": "sacct"}).encode(), "has no job_id"),
    ],
)
def test_a_damaged_record_is_named_and_left_as_found(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    root = tmp_path / "runs"
    run_id = _run(root, "bad", "111")
    (root / run_id / USAGE_FILE).write_bytes(content)
    fake = FakeAccounting(answers={"111": FINAL})
    app = Refreshes(root, fake)
    runs = app.refresh(T0 + 1)
    damage = [d for d in runs["bad"].damage if d.file == USAGE_FILE]
    assert damage and problem in damage[0].problem, runs["bad"].damage
    assert app.table.view(runs["bad"]).state_label == "DAMAGED"
    assert fake.asked == [] and (root / run_id / USAGE_FILE).read_bytes() == content
    (root / run_id / USAGE_FILE).unlink()  # put right (removed): asked, and written
    app.refresh(T0 + 2)
    assert fake.asked == [["111"]] and _record(root, "bad") is not None


def test_a_scheduler_without_accounting_is_never_asked_and_no_record_is_written(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    _run(root, "local", "121")
    fake = FakeAccounting(keeps_accounting=False)
    app = Refreshes(root, fake)
    runs: Mapping[str, RunInfo] = {}
    for at in (T0 + 1, T0 + 10 * WAIT_SEC):
        runs = app.refresh(at)
    assert fake.asked == [] and _record(root, "local") is None
    assert efficiency_of(runs["local"]) is None
