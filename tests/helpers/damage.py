"""Damage done to a copy of a finished run's directory, one named case at a time (issue 21).

A test makes one finished run (:func:`finished_run`), copies it per case with a run id of
its own (:func:`copy_run`) and applies a :class:`Case` to the copy. The cases cover every
file of the run-directory contract (docs/architecture.md, "The run directory"): each of
them deleted, truncated, emptied, binary, of the wrong JSON type, a directory in its place,
a symlink to itself; fields of the wrong type; numbers that cannot be real.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster

#: Every file and directory of the contract that a finished trainer run can hold, and those
#: of a user's script or a preflight (garbage written where they would be).
CONTRACT_FILES = (
    "spec.json",
    "job.sbatch",
    "jobs.jsonl",
    "run.json",
    "metrics.csv",
    "progress.jsonl",
    "preflight.json",
    "sacct.txt",
    "usage.json",
    "snapshot.json",
    "ranks.jsonl",
    "stall.json",
    "requeue.request",
    "slurm-1.out",
    "slurm-1.err",
    "heartbeats/rank-0.json",
    "telemetry/node-0.jsonl",
    "observe/1-host-1.jsonl",
    "checkpoints/latest.pt",
    "code/ddp_tui_report.py",
)
BINARY = bytes(range(256)) * 4


@dataclass(frozen=True)
class Case:
    """One damage: what it does to a run directory, and what ``ls`` must then say.

    ``file`` is the file ``ls`` names as damaged (its DAMAGED row), or None where the
    damage is in a file that the listing does not read (the run is listed all the same)."""

    name: str
    apply: Callable[[Path], None]
    file: str | None


def finished_run(base: Path) -> Path:
    """One small trainer run, finished (COMPLETED) on the local scheduler under ``base``;
    returns its run directory. Needs torch (the trainer runs on the CPU)."""
    profile = Profile(scheduler="local", runs_root=str(base / "runs"))
    cluster = Cluster.open(profile, local_state_dir=str(base / "state"))
    try:
        spec = cluster.default_spec().replace(
            name="dmg",
            model="mlp",
            dataset="synthetic",
            synthetic_samples=128,
            synthetic_val_samples=32,
            synthetic_shape="1,8,8",
            num_classes=4,
            epochs=2,
            batch_per_gpu=32,
            workers=0,
            cpus_per_task=1,
            telemetry_sec=1,
        )
        view = cluster.submit(cluster.plan(spec))
        deadline = time.monotonic() + 300
        while True:
            run = next(v for v in cluster.refresh().runs if v.run_id == view.run_id)
            if run.state.is_terminal and run.epochs_done == 2:
                break
            assert time.monotonic() < deadline, run
            time.sleep(0.5)
        assert run.state is JobState.COMPLETED, run
        cluster.verify(run.run_id)  # saves sacct.txt: every file a finished run has
        return Path(run.run_dir)
    finally:
        cluster.close()


def copy_run(src: Path, root: Path, tag: str) -> Path:
    """A copy of the run directory ``src`` under ``root``, with a run id of its own (its
    spec.json says so too), as a damage case starts from."""
    root.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() else "_" for c in tag)[:40] or "x"
    run_id = f"{src.name[:15]}-{safe}-{secrets.token_hex(2)}"
    dst = root / run_id
    shutil.copytree(src, dst, symlinks=True)
    doc = json.loads((dst / "spec.json").read_text())
    doc["run_id"] = run_id
    (dst / "spec.json").write_text(json.dumps(doc, indent=2) + "\n")
    return dst


# -- the damages ---------------------------------------------------------------------------


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def write(name: str, data: bytes) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        path = run / name
        _remove(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return apply


def truncate(name: str) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: len(data) // 2])

    return apply


def delete(name: str) -> Callable[[Path], None]:
    return lambda run: _remove(run / name)


def directory(name: str) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        _remove(run / name)
        (run / name).mkdir(parents=True)

    return apply


def symlink_loop(name: str) -> Callable[[Path], None]:
    """``name`` a symlink to itself: every open or stat of it fails with ELOOP."""

    def apply(run: Path) -> None:
        _remove(run / name)
        os.symlink(name.rsplit("/", 1)[-1], run / name)

    return apply


def edit_json(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        doc = json.loads((run / name).read_text())
        change(doc)
        # Python writes NaN and Infinity as JavaScript does: what a tampering tool may too.
        (run / name).write_text(json.dumps(doc, indent=2) + "\n")

    return apply


def edit_lines(name: str, change: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    def apply(run: Path) -> None:
        lines = (run / name).read_text().splitlines()
        (run / name).write_text("\n".join(change(lines)) + "\n")

    return apply


def _jobs_line(
    field: str, value: Any, event: str | None = None
) -> Callable[[list[str]], list[str]]:
    """Set ``field`` of the first record of ``event`` (None: an attempt line)."""

    def change(lines: list[str]) -> list[str]:
        for i, line in enumerate(lines):
            rec = json.loads(line)
            if rec.get("event") == event:
                rec[field] = value
                lines[i] = json.dumps(rec)
                return lines
        raise AssertionError(f"no {event or 'attempt'} line in {lines}")

    return change


def _metrics_cell(column: str, value: str) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        header = lines[0].split(",")
        cells = lines[-1].split(",")
        cells[header.index(column)] = value
        lines[-1] = ",".join(cells)
        return lines

    return change


def _progress_epoch(lines: list[str]) -> list[str]:
    rec = {"time": 1.0, "epoch": float("inf"), "step": 1, "steps_per_epoch": 4, "loss": 0.5}
    return [*lines, json.dumps(rec)]  # json writes it as Infinity


def _spec(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["spec"].__setitem__(field, value)


def _run_json_wrong_types(doc: dict[str, Any]) -> None:
    doc.update(hosts=5, world_size="two", state=3, epochs=[1], backend={"x": 1})
    doc["observed"] = {"group": "formed", "hosts": 7, "world_size": "x"}


def _emptied(run: Path) -> None:
    for child in list(run.iterdir()):
        _remove(child)


def _replaced_by_file(run: Path) -> None:
    shutil.rmtree(run)
    run.write_text("not a run directory\n")


def _dir_loop(run: Path) -> None:
    shutil.rmtree(run)
    os.symlink(run.name, run)


CASES: tuple[Case, ...] = (
    # spec.json: the run must not disappear
    Case("spec-truncated", truncate("spec.json"), "spec.json"),
    Case("spec-empty", write("spec.json", b""), "spec.json"),
    Case("spec-binary", write("spec.json", BINARY), "spec.json"),
    Case("spec-array", write("spec.json", b"[1, 2, 3]\n"), "spec.json"),
    Case("spec-deleted", delete("spec.json"), "spec.json"),
    Case("spec-directory", directory("spec.json"), "spec.json"),
    Case("spec-symlink-loop", symlink_loop("spec.json"), "spec.json"),
    Case("spec-wrong-types", edit_json("spec.json", _spec("nodes", "two")), "spec.json"),
    Case("spec-spec-not-object", edit_json("spec.json", lambda d: d.update(spec=7)), "spec.json"),
    Case("spec-nodes-1e12", edit_json("spec.json", _spec("nodes", 10**12)), "spec.json"),
    Case("spec-epochs-1e18", edit_json("spec.json", _spec("epochs", 10**18)), "spec.json"),
    Case("spec-lr-nan", edit_json("spec.json", _spec("lr", float("nan"))), "spec.json"),
    # jobs.jsonl
    Case("jobs-attempt-two", edit_lines("jobs.jsonl", _jobs_line("attempt", "two")), "jobs.jsonl"),
    Case("jobs-job-id-list", edit_lines("jobs.jsonl", _jobs_line("job_id", [1])), "jobs.jsonl"),
    Case(
        "jobs-end-wrong-types",
        edit_lines("jobs.jsonl", _jobs_line("elapsed_sec", float("inf"), "end")),
        "jobs.jsonl",
    ),
    Case("jobs-deleted", delete("jobs.jsonl"), "jobs.jsonl"),
    Case("jobs-directory", directory("jobs.jsonl"), "jobs.jsonl"),
    Case("jobs-symlink-loop", symlink_loop("jobs.jsonl"), "jobs.jsonl"),
    Case("jobs-binary", write("jobs.jsonl", BINARY), None),  # no line is a record: skipped
    # run.json
    Case("run-json-wrong-types", edit_json("run.json", _run_json_wrong_types), "run.json"),
    Case("run-json-directory", directory("run.json"), "run.json"),
    Case("run-json-symlink-loop", symlink_loop("run.json"), "run.json"),
    Case("run-json-truncated", truncate("run.json"), "run.json"),
    Case("run-json-binary", write("run.json", BINARY), "run.json"),
    Case("run-json-array", write("run.json", b"[]"), "run.json"),
    # metrics.csv and progress.jsonl
    Case("metrics-directory", directory("metrics.csv"), "metrics.csv"),
    Case("metrics-symlink-loop", symlink_loop("metrics.csv"), "metrics.csv"),
    Case("metrics-binary", write("metrics.csv", BINARY), None),
    Case("metrics-nan-loss", edit_lines("metrics.csv", _metrics_cell("train_loss", "nan")), None),
    Case("metrics-inf-epoch", edit_lines("metrics.csv", _metrics_cell("epoch", "inf")), None),
    Case("progress-infinite-epoch", edit_lines("progress.jsonl", _progress_epoch), None),
    Case("progress-directory", directory("progress.jsonl"), "progress.jsonl"),
    # the files the listing does not read: listed all the same, and no traceback
    Case("logs-binary", write("slurm-1.out", BINARY), None),
    Case("logs-directory", directory("slurm-1.out"), None),
    Case("err-symlink-loop", symlink_loop("slurm-1.err"), None),
    Case("telemetry-binary", write("telemetry/node-0.jsonl", BINARY), None),
    Case(
        "telemetry-wrong-types",
        write(
            "telemetry/node-0.jsonl",
            b'{"t": "x", "kind": "gpu", "node": [], "index": {}, "mem_used_mib": "x"}\n'
            b'{"t": Infinity, "kind": "host", "rss_mib": NaN, "node": 1e300}\n',
        ),
        None,
    ),
    Case("telemetry-directory", directory("telemetry/node-0.jsonl"), None),
    Case("telemetry-symlink-loop", symlink_loop("telemetry/node-0.jsonl"), None),
    Case("heartbeat-binary", write("heartbeats/rank-0.json", BINARY), None),
    Case("checkpoint-directory", directory("checkpoints/latest.pt"), None),
    Case("checkpoint-symlink-loop", symlink_loop("checkpoints/latest.pt"), None),
    Case("sacct-directory", directory("sacct.txt"), None),
    Case("script-deleted", delete("job.sbatch"), None),
    Case("code-deleted", delete("code"), None),
    Case("preflight-garbage", write("preflight.json", b'{"ok": "yes", "checks": 5}'), None),
    Case("snapshot-garbage", write("snapshot.json", BINARY), None),
    Case("ranks-garbage", write("ranks.jsonl", b'{"rank": "x"}\n[1]\n'), None),
    Case("stall-garbage", write("stall.json", b"[]"), None),
    Case("requeue-garbage", write("requeue.request", BINARY), None),
    Case("observe-garbage", write("observe/1-host-1.jsonl", b'{"kind": 5}\n'), None),
    # the run directory itself
    Case("dir-emptied", _emptied, "spec.json"),
    Case("dir-replaced-by-file", _replaced_by_file, "run directory"),
    Case("dir-symlink-loop", _dir_loop, "run directory"),
)
