"""``ddp-tui usage`` of a run on the local scheduler, which keeps no accounting: the run's
record gives the state and elapsed time, its spec the time limit and cores, its telemetry
the memory and CPU; what none of them gives is "not measured" (null), never 0.

The run is the suite's finished trainer run (tests/fixtures/shared_runs.py), copied; the
figures expected are read from the copy's own files, so the test holds whatever the sampler
happened to write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.cli import main
from ddp_tui.reports.efficiency import NOT_MEASURED
from tests.helpers.damage import copy_run

pytestmark = pytest.mark.torch


def _host_peaks(run: Path) -> dict[str, float]:
    """Each host's largest ``rss_mib`` in the run's telemetry files."""
    peaks: dict[str, float] = {}
    for path in (run / "telemetry").glob("node-*.jsonl"):
        for line in path.read_text().splitlines():
            doc = json.loads(line)
            if doc.get("kind") == "host" and doc.get("rss_mib") is not None:
                peaks[doc["host"]] = max(peaks.get(doc["host"], 0.0), float(doc["rss_mib"]))
    return peaks


def test_a_local_run_gives_what_it_has_and_says_not_measured_for_the_rest(
    finished_trainer_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(finished_trainer_run, tmp_path / "runs", "usage")
    argv = ["--runs-root", str(tmp_path / "runs"), "--scheduler", "local", "usage", run.name]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    spec = json.loads((run / "spec.json").read_text())["spec"]
    assert doc["run_id"] == run.name and doc["state"] == "COMPLETED" and doc["ended"]
    assert doc["source"] == "local scheduler"
    assert spec["time_limit"] == "01:00:00" and spec["device"] == "cpu"
    assert doc["time_used_fraction"] == pytest.approx(doc["elapsed_sec"] / 3600)
    peaks = _host_peaks(run)
    if peaks:
        assert doc["max_rss_mib_per_node"] == pytest.approx(max(peaks.values()))
        assert doc["sources"]["max_rss_mib_per_node"]["source"] == "ddp-tui telemetry"
    else:
        assert doc["max_rss_mib_per_node"] is None
    # A CPU run holds no GPUs (0, known), so GPU use is not measured (null).
    assert doc["gpus"] == 0 and doc["gpu_hours_allocated"] == 0
    assert doc["gpu_util_avg"] is None and doc["gpu_mem_peak_mib"] is None
    assert doc["mem_efficiency"] is None  # no --mem asked, and the local scheduler has none
    assert doc["suggestion"]["time_limit"] == "00:05:00"  # seconds of run, 5 min steps

    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{run.name} (job ")
    assert f"memory efficiency     {NOT_MEASURED}" in text
