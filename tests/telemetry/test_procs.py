"""Which processes are the job's, and what they hold: real child processes, found in the real
``/proc`` by their environment."""

from __future__ import annotations

import json
from pathlib import Path

from ddp_tui.jobfiles import telemetry_file
from ddp_tui.telemetry.cli import sample_once
from ddp_tui.telemetry.procs import ProcScanner

from .members import members


def _host(lines: list[dict[str, object]]) -> dict[str, object]:
    (host,) = [line for line in lines if line["kind"] == "host"]
    return host


def test_a_job_tree_counts_every_process_and_its_memory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {"DDP_TUI_RUN_DIR": str(run)}
    # A child that forks a grandchild (a data-loader worker), 50 MiB touched in each.
    with members(tmp_path, [env], mib=50, fork=True):
        lines = sample_once(["--run-dir", str(run), "--node", "1", "--ranks-per-node", "2"], {})
    host = _host(lines)
    assert host["procs"] == 2
    assert isinstance(host["rss_mib"], float) and host["rss_mib"] >= 100
    assert "cpu_pct" not in host  # only from the second sample on
    assert host["ranks"] == "2-3"  # no RANK in their environs: the layout's
    assert (host["node"], host["job"], host["restart"]) == (1, "", 0)
    # What it returned is what it appended.
    written = (run / telemetry_file(1)).read_text().splitlines()
    assert [json.loads(w) for w in written] == lines
    assert [x["kind"] for x in lines if x["kind"] in ("start", "host")] == ["start", "host"]


def test_the_sampler_and_other_runs_are_left_out_and_ranks_come_from_rank(
    tmp_path: Path,
) -> None:
    run, other = str(tmp_path / "run"), str(tmp_path / "other")
    envs = [
        {"DDP_TUI_RUN_DIR": run, "RANK": "4"},
        {"DDP_TUI_RUN_DIR": run + "/", "RANK": "5"},  # the same directory, spelled otherwise
        {"DDP_TUI_RUN_DIR": run, "RANK": "6", "DDP_TUI_SAMPLER": "1"},  # a sampler
        {"DDP_TUI_RUN_DIR": other, "RANK": "7"},  # another run's
        {"RANK": "8"},  # not a job's at all
    ]
    with members(tmp_path, envs):
        sample = ProcScanner(run).sample()
    assert sample.procs == 2
    assert sorted(sample.ranks) == [4, 5]
    with members(tmp_path, envs):
        lines = sample_once(["--run-dir", run, "--ranks-per-node", "8"], {})
    assert _host(lines)["ranks"] == "4-5"  # RANK values win over the layout


def test_a_node_name_leaves_out_the_other_nodes_processes(tmp_path: Path) -> None:
    """The Slurm test cluster runs several nodes in one pid namespace: a sampler with
    SLURMD_NODENAME counts only its node's processes."""
    run = str(tmp_path / "run")
    envs = [
        {"DDP_TUI_RUN_DIR": run, "SLURMD_NODENAME": "n1", "RANK": "0"},
        {"DDP_TUI_RUN_DIR": run, "SLURMD_NODENAME": "n1", "RANK": "1"},
        {"DDP_TUI_RUN_DIR": run, "SLURMD_NODENAME": "n2", "RANK": "2"},
        {"DDP_TUI_RUN_DIR": run, "RANK": "3"},  # no node name: not n1's
    ]
    with members(tmp_path, envs):
        lines = sample_once(["--run-dir", run], {"SLURMD_NODENAME": "n1"})
        everywhere = ProcScanner(run).sample()
    host = _host(lines)
    assert (host["procs"], host["ranks"], host["host"]) == (2, "0-1", "n1")
    assert everywhere.procs == 4  # without a node name, every node's


def test_the_marker_names_the_runs_processes(tmp_path: Path) -> None:
    """``--marker``: the DDP_TUI_RUN_DIR value the job exported, when the sampler is given
    the run directory under another name."""
    with members(tmp_path, [{"DDP_TUI_RUN_DIR": "/scratch/run-1"}]):
        lines = sample_once(["--run-dir", str(tmp_path / "run"), "--marker", "/scratch/run-1"])
    assert _host(lines)["procs"] == 1
