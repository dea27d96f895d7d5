"""The sampler as a job runs it: ``python -m ddp_tui.telemetry`` beside a real member process,
ending with its parent or on SIGTERM, and appending after an earlier attempt (a requeue)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from ddp_tui.jobfiles import telemetry_file

from .members import exited, members, sampler_env, wait_for

COMMON = ("t", "kind", "host", "node", "ranks", "job", "restart")
HOST = ("rss_mib", "procs", "load1", "mem_total_mib", "cpus")


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def _hosts(path: Path) -> int:
    return sum(1 for x in _lines(path) if x["kind"] == "host")


def _argv(run: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ddp_tui.telemetry", "--run-dir", str(run), *extra]


def test_the_loop_samples_and_ends_with_its_parent(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = run / telemetry_file(0)
    with members(tmp_path, [{"DDP_TUI_RUN_DIR": str(run), "RANK": "0"}], mib=20):
        # The job's launcher stands in as a shell that starts the sampler and waits.
        sampler = _argv(run, "--interval", "0.2", "--job", "77", "--restart", "2")
        shell = subprocess.Popen(
            ["bash", "-c", '"$@" & wait', "launcher", *sampler],
            env=sampler_env(),
        )
        try:
            wait_for(lambda: _hosts(path) >= 3, "three host samples")
            lines = _lines(path)
            start = lines[0]
            assert start["kind"] == "start"
            assert start["interval"] == 0.2 and start["pid"] != shell.pid
            for line in lines:
                assert all(k in line for k in COMMON), line
                assert (line["job"], line["restart"], line["node"]) == ("77", 2, 0)
            hosts = [x for x in lines if x["kind"] == "host"]
            for host in hosts:
                assert all(k in host for k in HOST), host
                assert host["procs"] == 1 and host["rss_mib"] >= 20 and host["ranks"] == "0"
            assert "cpu_pct" not in hosts[0]
            assert all(h["cpu_pct"] >= 0 for h in hosts[1:])
            times = [x["t"] for x in hosts]
            assert times == sorted(times) and len(set(times)) == len(times)
        finally:
            shell.send_signal(signal.SIGKILL)  # the launcher dies; the sampler is orphaned
            shell.wait(timeout=60)
        wait_for(lambda: exited(start["pid"]), "the orphaned sampler to end", timeout=60)


def test_sigterm_ends_the_loop_with_exit_0(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = run / telemetry_file(3)
    sampler = subprocess.Popen(_argv(run, "--interval", "0.2", "--node", "3"), env=sampler_env())
    try:
        wait_for(lambda: _hosts(path) >= 1, "a host sample")
        sampler.send_signal(signal.SIGTERM)
        assert sampler.wait(timeout=60) == 0
    finally:
        if sampler.poll() is None:
            sampler.kill()
            sampler.wait()


def test_a_requeued_attempt_appends_after_the_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = run / telemetry_file(0)
    env = sampler_env()
    for restart in ("0", "1"):
        done = subprocess.run(
            _argv(run, "--once", "--job", "9", "--restart", restart), env=env, timeout=120
        )
        assert done.returncode == 0
        if restart == "0":
            first = path.read_bytes()
    assert path.read_bytes().startswith(first)
    lines = _lines(path)
    assert [(x["kind"], x["restart"]) for x in lines if x["kind"] in ("start", "host")] == [
        ("start", 0),
        ("host", 0),
        ("start", 1),
        ("host", 1),
    ]
