"""``ddp-tui resources RUN``, run in-process on the local scheduler's profile against run
directories made by hand: an ended attempt recorded in jobs.jsonl (so nothing is polled) and
telemetry lines written as the sampler writes them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.cli import main
from ddp_tui.jobfiles import telemetry_file
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.history import attempt_record, end_record
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.resources import RESOURCE_TABLE_HEADER
from ddp_tui.spec import ExperimentSpec
from tests.helpers.telemetry_lines import gpu, host


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunStore:
    """The runs root, with the CLI's config and state under ``tmp_path`` (the embedded local
    scheduler, whatever this machine has installed)."""
    config = tmp_path / "config.toml"
    config.write_text('[profiles.local]\nscheduler = "local"\n')
    monkeypatch.setenv("DDP_TUI_CONFIG", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True)
    (code / "__init__.py").write_text("")
    return RunStore(LocalExecutor(), str(tmp_path / "runs"), code_source=code)


def ended_run(store: RunStore, name: str, job_id: str, state: JobState, **spec: Any) -> RunRef:
    ref = store.create_run(ExperimentSpec(name=name, **spec).to_dict(), name, "#!/bin/bash\n")
    store.append_job(ref, attempt_record(job_id, "local", None, 1))
    store.append_job(ref, end_record(JobStatus(job_id, state, exit_code=0)))
    return ref


def write_telemetry(ref: RunRef, node: int, lines: list[dict[str, Any]]) -> None:
    path = Path(ref.path) / telemetry_file(node)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def cli(store: RunStore, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["--runs-root", store.root, "resources", *args]) == 0
    return capsys.readouterr().out


def test_resources_prints_the_table_of_every_node(
    runs: RunStore, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = ended_run(runs, "two", "101", JobState.COMPLETED, nodes=2)
    write_telemetry(ref, 0, [host(0, 512, cpu_pct=190.0), host(5, 1024), gpu(0, 2048)])
    note = {"t": 1.7e9, "kind": "note", "host": "n2", "node": 1, "message": "cannot read /proc"}
    write_telemetry(ref, 1, [host(0, 256, node=1, on="n2"), note])

    out = cli(runs, capsys, ref.run_id[:-2])  # a unique prefix of the run id
    head, header, n1, gpu0, n2, *rest = out.splitlines()
    assert head.startswith(f"{ref.run_id} (job 101): COMPLETED, 4 samples over 0.1 min")
    assert header.split() == " ".join(RESOURCE_TABLE_HEADER).split()
    assert n1.split() == ["host", "RSS", "n1", "0-1", "1024", "768", "1024", "64000", "190"]
    assert gpu0.split()[:3] == ["gpu0", "NVIDIA", "A100"]
    assert gpu0.split()[3:] == ["n1", "0", "2048", "2048", "2048", "81920", "90.0", "200"]
    assert n2.split()[:3] == ["host", "RSS", "n2"]
    # Columns line up: every row's numbers end where the header's column ends.
    end = header.index("peak MiB") + len("peak MiB")
    assert n1[end - 4 : end] == "1024" and gpu0[end - 4 : end] == "2048"
    assert rest == ["note: n2: cannot read /proc"]


def test_resources_json_and_csv(runs: RunStore, capsys: pytest.CaptureFixture[str]) -> None:
    ref = ended_run(runs, "one", "102", JobState.COMPLETED)
    write_telemetry(ref, 0, [host(0, 300), gpu(0, 1000, util=50.0)])

    doc = json.loads(cli(runs, capsys, ref.run_id, "--json"))
    assert doc["run_id"] == ref.run_id and doc["state"] == "COMPLETED"
    assert doc["empty_reason"] is None
    assert doc["host_mem_peak_mib"] == 300.0 and doc["gpu_util_avg"] == 50.0
    assert doc["devices"][0]["memory"] == {
        "count": 1,
        "peak": 1000.0,
        "mean": 1000.0,
        "mode": 1000.0,
    }

    table = list(csv.reader(io.StringIO(cli(runs, capsys, ref.run_id, "--csv"))))
    assert table[0] == list(RESOURCE_TABLE_HEADER)
    assert [row[:2] for row in table[1:]] == [["host RSS", "n1"], ["gpu0 NVIDIA A100", "n1"]]


def test_a_run_without_telemetry_says_why(
    runs: RunStore, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ended_run(runs, "old", "103", JobState.FAILED)
    out = cli(runs, capsys, "103")  # by job id
    assert out.splitlines() == [
        f"{old.run_id} (job 103): FAILED",
        "this run wrote no telemetry: it was submitted before telemetry existed, "
        "or its sampler could not start",
    ]
    off = ended_run(runs, "off", "104", JobState.COMPLETED, telemetry_sec=0)
    assert "telemetry is off" in cli(runs, capsys, off.run_id)
    doc = json.loads(cli(runs, capsys, off.run_id, "--json"))
    assert doc["samples"] == 0 and "off" in doc["empty_reason"]


def test_an_unknown_run_is_an_error(runs: RunStore, capsys: pytest.CaptureFixture[str]) -> None:
    ended_run(runs, "one", "105", JobState.COMPLETED)
    assert main(["--runs-root", runs.root, "resources", "nope"]) == 2
    assert "no run matches 'nope'" in capsys.readouterr().err
