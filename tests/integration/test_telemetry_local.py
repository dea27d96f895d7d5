"""Resource telemetry of real runs on the embedded local scheduler.

Each run is real (the trainer, or a user's script, under torchrun, started by the job script's
telemetry shim), and so is its sampler: the tests read ``telemetry/node-0.jsonl`` as it wrote
it, then ask the facade (``Cluster.resources``, ``Cluster.compare``, the Run detail follow) and
the CLI (``ddp-tui resources --json``) what they make of it.

- the trainer, held after its first epoch (tests/helpers/hold.py) until its file has three host
  samples taken while it waits: the start line and host lines carry every field of the contract
  (docs/architecture.md), the job's processes are counted; the summary is exactly
  ``summarize_samples`` over the file, while running and once the run (and its sampler) ended;
  Compare and the CLI show the same peak, the GPU columns empty (a CPU run);
- the Run detail follow of a running run carries the same summary, and its series;
- telemetry off (``telemetry_sec=0``): no directory, and the empty reason says it is off;
- a sampler that cannot write (a file where its directory goes): the job completes, and the
  empty reason says no telemetry was written;
- a user's 2-process script, held after its first epoch: its host samples name ranks ``0-1``.

A job is held where a test reads it by construction; the timeouts only bound a hang. The
summaries are compared with the lines of one read of the file that the sampler did not change
during the call (:func:`resources_and_lines`), so that a sample landing mid-call is no flake.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.jobfiles import TELEMETRY_DIR, telemetry_file
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.resources import ResourceSummary, ResourceView, parse_lines, summarize_samples
from tests.helpers.hold import Hold
from tests.integration.story import tiny_script_spec, tiny_spec, wait_for, wait_state
from tests.integration.test_cli import cli
from tests.integration.test_diagnosis_local import ENDED, open_cluster

pytestmark = pytest.mark.torch

#: Fields every line has, whatever its kind (the contract, docs/architecture.md).
COMMON_FIELDS = ("t", "kind", "host", "node", "ranks", "job", "restart")
START_FIELDS = ("interval", "gpu_source", "pid")
#: A host line's fields; ``cpu_pct`` too, on every sample but a sampler's first.
HOST_FIELDS = ("rss_mib", "procs", "load1", "mem_total_mib", "cpus")
GPU_COLUMNS = ("gpu_mem_peak_mib", "gpu_mem_mode_mib", "gpu_util_avg")


# -- reading what the sampler wrote ---------------------------------------------------------


def node_file(run: RunView, node: int = 0) -> Path:
    return Path(run.run_dir) / telemetry_file(node)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The file's whole lines ([] before the sampler made it)."""
    try:
        return parse_lines(path.read_text())
    except FileNotFoundError:
        return []


def of_kind(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == kind]


def host_samples_since(since: float, n: int) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether lines hold ``n`` host samples taken at or after ``since`` (epoch seconds)."""
    return lambda lines: len([h for h in of_kind(lines, "host") if h["t"] >= since]) >= n


def wait_lines(
    cluster: Cluster,
    run: RunView,
    enough: Callable[[list[dict[str, Any]]], bool],
    what: str,
    *,
    node: int = 0,
    timeout: float = 120.0,
) -> list[dict[str, Any]]:
    """The node's lines once ``enough`` holds of them; the run must not end before."""
    path = node_file(run, node)
    got = wait_for(
        cluster,
        run.run_id,
        lambda v: enough(read_lines(path)) or v.state in ENDED,
        what,
        timeout,
    )
    lines = read_lines(path)
    assert enough(lines), f"the run ended ({got.state.value}) before {what}: {lines[-5:]}"
    return lines


def resources_and_lines(
    cluster: Cluster, run_id: str, paths: list[Path], timeout: float = 60.0
) -> tuple[ResourceSummary, list[dict[str, Any]]]:
    """``Cluster.resources`` and the files' lines as that call read them: the files are read
    before and after the call, and the call is repeated until no sample landed during it."""
    deadline = time.monotonic() + timeout
    while True:
        before = [p.read_bytes() if p.exists() else b"" for p in paths]
        summary = cluster.resources(run_id)
        after = [p.read_bytes() if p.exists() else b"" for p in paths]
        if before == after:
            return summary, [line for b in before for line in parse_lines(b.decode())]
        assert time.monotonic() < deadline, "the telemetry files never kept still for one call"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_samplers_gone(cluster: Cluster, run: RunView, nodes: int = 1) -> None:
    """Until every sampler that started for the run (their start lines name them) has exited:
    then the files are final. On the Slurm test cluster all nodes share one pid namespace."""
    pids = [
        line["pid"]
        for k in range(nodes)
        for line in of_kind(read_lines(node_file(run, k)), "start")
    ]
    assert pids, "no sampler started"
    wait_for(
        cluster, run.run_id, lambda v: not any(alive(p) for p in pids), "the samplers' exit", 90
    )


def assert_contract(lines: list[dict[str, Any]], *, job: str, node: int = 0) -> None:
    """Every line has the common fields, and its kind's; all of one job and node."""
    assert lines, "no lines"
    for line in lines:
        missing = [f for f in COMMON_FIELDS if f not in line]
        assert not missing, (missing, line)
        assert line["job"] == job and line["node"] == node, line
        assert isinstance(line["t"], float) and isinstance(line["restart"], int), line
    for line in of_kind(lines, "start"):
        assert all(f in line for f in START_FIELDS), line
        assert line["gpu_source"] in ("nvml", "nvidia-smi", "none"), line
    for line in of_kind(lines, "host"):
        assert all(f in line for f in HOST_FIELDS), line
        assert line["mem_total_mib"] > 0 and line["cpus"] >= 1, line


def compare_row(cluster: Cluster, run: RunView) -> dict[str, Any]:
    """The run's row of its group's scaling table (Compare), read column by column: a row as
    one Series would turn the float columns' NaN into None beside the Int64 columns."""
    assert run.group
    table = cluster.compare(run.group)
    assert list(table.index) == [run.run_id], table
    assert all(table[c].dtype == "float64" for c in (*GPU_COLUMNS, "host_mem_peak_mib"))
    return {col: table[col].iloc[0] for col in table.columns}


def held_trainer(cluster: Cluster, hold: Hold, name: str) -> tuple[RunView, float]:
    """A one-process trainer run sampled every second, held after its first epoch; with the
    time (this machine's clock, the sampler's too) from which rank 0 is known to wait."""
    spec = hold.after_epochs(tiny_spec(name=name, telemetry_sec=1, epochs=2), 1)
    run = cluster.submit(cluster.plan(spec))
    wait_for(cluster, run.run_id, lambda v: hold.waiting(0) or v.state in ENDED, "the hold", 240)
    assert hold.waiting(0), "the trainer ended before its hold"
    return run, time.time()


# -- the trainer ----------------------------------------------------------------------------


def test_a_trainers_samples_follow_the_contract_and_every_summary_agrees(
    tmp_path: Path, hold: Hold
) -> None:
    cluster = open_cluster(tmp_path, check_python=False)
    run, parked_at = held_trainer(cluster, hold, "sampled")
    assert run.job_id is not None
    lines = wait_lines(
        cluster,
        run,
        host_samples_since(parked_at, 3),
        "three host samples of the held trainer",
    )
    assert_contract(lines, job=run.job_id)
    assert lines[0]["kind"] == "start"
    (start,) = of_kind(lines, "start")  # one sampler start: one attempt, one node
    assert start["interval"] == 1.0 and start["restart"] == 0
    hosts = of_kind(lines, "host")
    assert all(h["host"] == socket.gethostname() and h["restart"] == 0 for h in hosts)
    assert "cpu_pct" not in hosts[0] and all("cpu_pct" in h for h in hosts[1:]), hosts[:2]
    parked = [h for h in hosts if h["t"] >= parked_at]
    # The trainer waits: its processes (torchrun and the rank) are there to be counted.
    assert all(h["rss_mib"] > 0 and h["procs"] >= 2 and h["ranks"] == "0" for h in parked), parked

    # Running: the facade's summary is the one of the file's lines, exactly.
    summary, seen = resources_and_lines(cluster, run.run_id, [node_file(run)])
    assert summary == summarize_samples(seen)
    seen_hosts = of_kind(seen, "host")
    assert len(seen_hosts) >= len(hosts)
    (node,) = summary.hosts
    assert node.memory.count == summary.samples == len(seen_hosts)
    assert node.memory.peak == summary.host_mem_peak_mib == max(h["rss_mib"] for h in seen_hosts)
    assert (node.host, node.node, node.ranks) == (socket.gethostname(), 0, "0")
    assert summary.attempts == (run.job_id,) and summary.devices == ()

    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED, done.state
    wait_samplers_gone(cluster, done)
    final, lines = resources_and_lines(cluster, run.run_id, [node_file(run)])
    assert final == summarize_samples(lines) and not final.empty
    assert final.host_mem_peak_mib == max(h["rss_mib"] for h in of_kind(lines, "host"))
    assert final.samples >= summary.samples

    # Compare: the host peak is the summary's; a CPU run has no GPU numbers.
    row = compare_row(cluster, done)
    assert row["host_mem_peak_mib"] == final.host_mem_peak_mib
    assert all(math.isnan(row[c]) for c in GPU_COLUMNS), {c: row[c] for c in GPU_COLUMNS}

    # The CLI, as a user runs it, prints the same.
    doc = cli_json(tmp_path, run.run_id)
    assert doc["empty_reason"] is None and doc["state"] == "COMPLETED"
    assert doc["host_mem_peak_mib"] == final.host_mem_peak_mib
    assert doc["samples"] == final.samples and doc["attempts"] == [run.job_id]
    assert [h["memory"]["peak"] for h in doc["hosts"]] == [final.host_mem_peak_mib]


def cli_json(tmp_path: Path, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cli(tmp_path, "resources", run_id, "--json").stdout)
    assert doc["run_id"] == run_id, doc
    return doc


def follow_view(cluster: Cluster, run: RunView) -> tuple[ResourceView | None, list[Any]]:
    """The Run detail's resources from one refresh that follows the run, with the file's
    lines as that follow read them (None: no news since the last follow)."""
    path = node_file(run)
    deadline = time.monotonic() + 60.0
    while True:
        before = path.read_bytes()
        detail = cluster.refresh(follow=run.run_id).detail
        assert detail is not None and detail.run_id == run.run_id
        if path.read_bytes() == before:
            return detail.resources, parse_lines(before.decode())
        assert time.monotonic() < deadline, "the telemetry file never kept still for one follow"


def test_the_run_detail_follow_shows_a_running_runs_samples(tmp_path: Path, hold: Hold) -> None:
    cluster = open_cluster(tmp_path, check_python=False)
    run, parked_at = held_trainer(cluster, hold, "followed")
    for wanted in (2, 4):  # the second follow reads on from where the first stopped
        wait_lines(
            cluster,
            run,
            host_samples_since(parked_at, wanted),
            f"{wanted} host samples of the held trainer",
        )
        view, lines = follow_view(cluster, run)
        while view is None:  # no sample since the last follow: the next one comes in a second
            view, lines = follow_view(cluster, run)
        assert view.running and view.empty_reason is None and view.interval_sec == 1
        assert view.summary == summarize_samples(lines)
        hosts = of_kind(lines, "host")
        assert view.summary.hosts[0].memory.count == len(hosts) >= wanted
        (series,) = view.host_memory
        assert series.label == socket.gethostname()
        assert list(series.y) == [h["rss_mib"] for h in hosts]  # fewer than MAX_POINTS: all
        assert view.gpu_memory == () and view.gpu_util == ()
    hold.release()
    assert wait_state(cluster, run.run_id, *ENDED, timeout=240).state is JobState.COMPLETED


# -- telemetry off --------------------------------------------------------------------------


def test_telemetry_off_writes_nothing_and_says_so(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    run = cluster.submit(cluster.plan(tiny_spec(name="unsampled", telemetry_sec=0)))
    assert "ddp_tui.telemetry" not in (Path(run.run_dir) / "job.sbatch").read_text()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED, done.state
    assert not (Path(run.run_dir) / TELEMETRY_DIR).exists()
    assert cluster.resources(run.run_id).empty
    doc = cli_json(tmp_path, run.run_id)
    assert doc["samples"] == 0 and "off" in doc["empty_reason"], doc
    detail = cluster.refresh(follow=run.run_id).detail
    assert detail is not None and detail.resources is not None
    assert detail.resources.summary.empty
    assert detail.resources.empty_reason and "off" in detail.resources.empty_reason
    assert not detail.resources.running and detail.resources.interval_sec == 0
    # Nothing new: no view (the pane keeps its own); a screen newly showing the run starts
    # the follow over and gets the view again.
    assert cluster.follow(run.run_id).resources is None
    cluster.restart_follow(run.run_id)
    assert cluster.follow(run.run_id).resources == detail.resources


def test_a_sampler_that_cannot_write_never_fails_the_job_and_the_tab_says_why(
    tmp_path: Path, hold: Hold
) -> None:
    cluster = open_cluster(tmp_path)
    # Held before the launcher (so before the sampler), while the test puts a plain file
    # where the sampler's directory goes: every write of the sampler then fails (as root,
    # permissions cannot make it fail; a file in the way can).
    run = cluster.submit(cluster.plan(hold.running(tiny_spec(name="unwritable", telemetry_sec=1))))
    wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    blocker = Path(run.run_dir) / TELEMETRY_DIR
    blocker.write_text("in the way\n")
    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED, done.state
    assert blocker.read_text() == "in the way\n"
    summary = cluster.resources(run.run_id)
    assert summary.empty
    detail = cluster.refresh(follow=run.run_id).detail
    assert detail is not None and detail.resources is not None
    reason = detail.resources.empty_reason
    assert reason and "wrote no telemetry" in reason and "could not start" in reason, reason


# -- a user's script ------------------------------------------------------------------------


def test_a_users_two_process_script_is_sampled_with_both_ranks(tmp_path: Path, hold: Hold) -> None:
    cluster = open_cluster(tmp_path)
    # After epoch 1, rank 0 waits on the hold file and rank 1 at a barrier: both are alive.
    spec = tiny_script_spec(
        "checkpoint_ddp.py",
        name="script-sampled",
        epochs=3,
        metrics="key-value",
        script_args=f"--epochs 3 --hold-file {hold.file} --hold-after 1",
        telemetry_sec=1,
    )
    run = cluster.submit(cluster.plan(spec))
    assert run.job_id is not None
    wait_for(cluster, run.run_id, lambda v: v.epochs_done >= 1 or v.state in ENDED, "epoch 1", 240)
    held_at = time.time()  # from here both ranks wait (this machine's clock is the sampler's)
    lines = wait_lines(
        cluster,
        run,
        host_samples_since(held_at, 2),
        "two host samples of the held ranks",
    )
    assert_contract(lines, job=run.job_id)
    held = [h for h in of_kind(lines, "host") if h["t"] >= held_at]
    # torchrun and the two ranks are counted, and the ranks named.
    assert all(h["ranks"] == "0-1" for h in held), held
    assert all(h["rss_mib"] > 0 and h["procs"] >= 3 for h in held), held
    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED, done.state
    summary = cluster.resources(run.run_id)
    assert [h.ranks for h in summary.hosts] == ["0-1"], summary.hosts
