"""What a job sent by hand used, on the real Slurm test cluster with real ``sacct``.

One job for the whole module: plain ``sbatch`` of 2 nodes, one ``srun`` task per node, each
task burning 0.5 s of CPU, then touching every page of 200 MiB and holding it. Slurm samples a
task's memory every ``JobAcctGatherFrequency`` seconds (30 on the test cluster), so a task
that held its memory for less than that could have no sample at all. Instead of holding it
for 30 s and hoping, each task holds it until released, and the test, once both tasks say
their memory is touched, runs ``sstat`` on the step: slurmstepd answers sstat by sampling
its tasks there and then (measured: the same job without it records no memory at all, see
``tests/remote/data/usage_unsampled.txt``). So the sample holds the 200 MiB by construction.
The job then ends, and :meth:`SlurmCluster.wait_sacct` waits for its whole record.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.cluster import Cluster

pytestmark = [pytest.mark.slurm]

HOLD_MIB = 200
#: Each task: 0.5 s of CPU (TotalCPU then has something to count), HOLD_MIB touched, held
#: until released and for 2 s at least: sacct's Elapsed counts whole seconds, and a job that
#: starts and ends within one (measured: 0.7 s here) has an Elapsed of 0, so no CPU
#: efficiency at all.
TASK = """
import os, pathlib, time
started = time.monotonic()
t0 = time.process_time()
while time.process_time() - t0 < 0.5:
    pass
held = bytearray({mib} * 1024 * 1024)
for i in range(0, len(held), 4096):
    held[i] = 1
marks = pathlib.Path(os.environ["MARKS"])
(marks / ("touched-" + os.environ["SLURM_PROCID"])).write_text("")
while not (marks / "release").exists() or time.monotonic() - started < 2.0:
    time.sleep(0.05)
"""
EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"


@dataclass(frozen=True)
class HeldJob:
    job_id: str
    nodes: tuple[str, ...]
    sstat: str  # what sstat said while the memory was held (for a failure's message)
    work: Path


def _until(what: str, ready: Any, timeout: float = 60.0) -> None:
    """Wait for ``ready()``; the timeout only bounds a hang."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def held_job(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldJob]:
    work = tmp_path_factory.mktemp("usage")
    (work / "hold.py").write_text(TASK.format(mib=HOLD_MIB))
    script = work / "job.sh"
    script.write_text(f"#!/bin/bash\nexport MARKS={work}\nsrun {sys.executable} {work}/hold.py\n")
    res = slurm_cluster.run(
        [
            "sbatch", "--parsable", f"--chdir={work}", "--nodes=2", "--ntasks-per-node=1",
            "--time=5", "--job-name=hold-200m", str(script),
        ]
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    try:
        _until("both tasks to touch their memory", lambda: len(list(work.glob("touched-*"))) == 2)
        stat = slurm_cluster.run(
            ["sstat", "--noheader", "--parsable2", "--jobs", f"{job_id}.0", "--format=MaxRSS"]
        )
        assert stat.returncode == 0, stat.stderr
        (work / "release").write_text("")
        slurm_cluster.wait_sacct(job_id, ["COMPLETED"])
    finally:
        (work / "release").write_text("")
        if slurm_cluster.job_state(job_id) in ("PENDING", "RUNNING"):
            slurm_cluster.run(["scancel", job_id])
    nodes = slurm_cluster.run(["sacct", "-X", "-n", "-P", "-o", "NodeList", "-j", job_id])
    found = tuple(expand_hostlist(nodes.stdout.strip()))
    assert len(found) == 2, nodes.stdout
    yield HeldJob(job_id, found, stat.stdout, work)


@pytest.fixture(scope="module")
def facade(slurm_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    runs = tmp_path_factory.mktemp("usage-runs")
    c = Cluster.open(Profile(scheduler="slurm", runs_root=str(runs), partition="debug"))
    yield c
    c.close()


def _seconds(text: str) -> float:
    """sacct's ``MM:SS.mmm`` / ``HH:MM:SS``, read here independently of the parser tested."""
    total = 0.0
    for part in text.strip().split(":"):
        total = total * 60 + float(part)
    return total


def test_memory_per_node_counts_both_nodes(held_job: HeldJob, facade: Cluster) -> None:
    report = facade.usage(held_job.job_id)
    assert report.state == "COMPLETED" and report.ended
    assert report.nodes == held_job.nodes
    assert {n.node for n in report.per_node} == set(held_job.nodes), held_job.sstat
    for node in report.per_node:
        assert node.bound == "exact", node
        # 200 MiB held, plus the interpreter: within 10 %
        assert abs(node.peak_mib - HOLD_MIB) <= 0.1 * HOLD_MIB, (node, held_job.sstat)
    assert report.max_rss_mib_per_node.value == max(n.peak_mib for n in report.per_node)
    assert report.max_rss_mib_per_node.source == "sacct"


def test_cpu_efficiency_is_saccts_own(
    held_job: HeldJob, facade: Cluster, slurm_cluster: Any
) -> None:
    # The allocation's line, steps asked too: with -X (allocations only) sacct prints
    # TotalCPU 00:00:00 here, since it sums a job's CPU time from its steps' records.
    res = slurm_cluster.run(
        ["sacct", "-n", "-P", "-o", "JobID,TotalCPU,ElapsedRaw,AllocCPUS", "-j", held_job.job_id]
    )
    line = next(ln for ln in res.stdout.splitlines() if ln.split("|")[0] == held_job.job_id)
    _, total, elapsed, cpus = line.split("|")
    held = float(elapsed) * int(cpus)
    own = _seconds(total) / held
    report = facade.usage(held_job.job_id)
    assert _seconds(total) >= 1.0  # each task's 0.5 s of CPU, on both nodes
    # The report sums the steps' TotalCPU; sacct's allocation line is that sum, to the ms.
    assert report.cpu_efficiency.value == pytest.approx(own, abs=0.003 / held)


def test_the_listings_row_has_saccts_own_efficiency_without_a_sacct_of_its_own(
    held_job: HeldJob, facade: Cluster, slurm_cluster: Any
) -> None:
    # Every job of the user, as Jobs (`a`) and `ls --all` list them: one squeue and one sacct
    # whatever the count, its steps in it; the ended job's row says what it used.
    res = slurm_cluster.run(
        ["sacct", "-n", "-P", "-o", "JobID,TotalCPU,ElapsedRaw,AllocCPUS", "-j", held_job.job_id]
    )
    line = next(ln for ln in res.stdout.splitlines() if ln.split("|")[0] == held_job.job_id)
    _, total, elapsed, cpus = line.split("|")
    every = facade.user_jobs()
    (row,) = [j for j in every.foreign if j.job_id == held_job.job_id]
    assert every.scheduler_calls == 2 and row.state.value == "COMPLETED"
    assert row.cpu_efficiency == pytest.approx(
        _seconds(total) / (float(elapsed) * int(cpus)), abs=0.01
    )
    report = facade.usage(held_job.job_id)
    assert row.mem_efficiency is not None and row.mem_efficiency > 0, held_job.sstat
    assert row.mem_efficiency == report.mem_efficiency.value  # one reader of the same record
    assert row.cpu_efficiency == report.cpu_efficiency.value


def test_cli_json_has_each_figure_and_says_null_for_what_was_not_measured(
    held_job: HeldJob, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text("")
    env = {**os.environ, "DDP_TUI_CONFIG": str(tmp_path / "config.toml")}
    argv = [EXE, "--scheduler", "slurm", "--runs-root", str(tmp_path / "runs")]
    res = subprocess.run(
        [*argv, "usage", held_job.job_id, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["job_id"] == held_job.job_id and doc["run_id"] is None
    assert doc["cpu_efficiency"] > 0 and doc["time_used_fraction"] > 0
    assert abs(doc["max_rss_mib_per_node"] - HOLD_MIB) <= 0.1 * HOLD_MIB
    assert 0 < doc["mem_efficiency"] < 1  # of the 4000 MiB per node it was given
    # No gres/gpu asked, no GPU accounting on this cluster: null, never 0.
    assert doc["gpu_util_avg"] is None and doc["gpu_hours_allocated"] is None
    assert doc["suggestion"]["mem"] == "256M"
    assert doc["suggestion"]["time_limit"] == "00:05:00"
    assert doc["suggestion"]["cpus_per_task"] == 1
    text = subprocess.run(
        [*argv, "usage", held_job.job_id], capture_output=True, text=True, env=env, timeout=120
    )
    assert text.returncode == 0, text.stderr
    assert re.search(r"GPU utilisation\s+not measured", text.stdout)
    assert "--mem=256M" in text.stdout
