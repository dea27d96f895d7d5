"""The observation layer (ddp_tui.scriptrun.observe): its bookkeeping alone (no torch), its
start-up through ``sitecustomize`` in a real interpreter, and real torchrun/gloo scripts whose
DataLoader workers are forked or spawned, with and without ``torch.compile``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.scriptrun.merge import ObservedRows
from ddp_tui.scriptrun.observe import BOOT_DIR
from ddp_tui.scriptrun.observe.journal import Journal
from ddp_tui.scriptrun.observe.state import Observer

SRC = Path(__file__).resolve().parents[2] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def records(run_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / "observe").glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def observer(tmp_path: Path) -> tuple[Observer, Clock]:
    clock = Clock()
    return Observer(Journal(str(tmp_path), "7", {"RANK": "0"}), clock), clock


def batches(obs: Observer, clock: Clock, it: int, n: int, steps: bool, size: int = 8) -> None:
    for _ in range(n):
        obs.batch(it, size, 0.01)
        clock.now += 0.1
        if steps:
            obs.step()


def test_a_loader_pass_that_feeds_steps_is_an_epoch_and_validation_batches_are_not_samples(
    tmp_path: Path,
) -> None:
    obs, clock = observer(tmp_path)
    for epoch in range(2):
        peek = 10 * epoch + 1  # next(iter(loader)) to look at a batch: never exhausted
        obs.batch(peek, 100, 0.0)
        train = 10 * epoch + 2  # a fresh iterator each epoch, as `for batch in loader` makes
        batches(obs, clock, train, 4, steps=True)
        obs.exhausted(train)
        val = 10 * epoch + 3
        batches(obs, clock, val, 3, steps=False, size=100)  # never stepped on
        obs.exhausted(val)
    epochs = [r for r in records(tmp_path) if r["kind"] == "epoch"]
    assert [(e["epoch"], e["steps"], e["samples"]) for e in epochs] == [(0, 4, 32), (1, 4, 32)]
    assert epochs[0]["data_wait_sec"] == pytest.approx(0.04)
    assert [r["kind"] for r in records(tmp_path)][:2] == ["process", "step"]
    assert any(r["kind"] == "no_group" for r in records(tmp_path))  # no group was ever formed


def test_a_loader_one_batch_ahead_gets_its_last_step_into_the_epoch(tmp_path: Path) -> None:
    obs, clock = observer(tmp_path)
    batches(obs, clock, 1, 3, steps=True)
    obs.batch(1, 8, 0.0)  # fetched ahead: the last batch
    obs.exhausted(1)  # the loader looked one further and found the end
    clock.now += 0.1
    obs.step()  # the last batch's step, after the end
    epochs = [r for r in records(tmp_path) if r["kind"] == "epoch"]
    assert [(e["epoch"], e["steps"]) for e in epochs] == [(0, 3), (0, 4)]  # written again
    rows = ObservedRows()
    made = [row for e in epochs for row in rows.observed(e)]
    assert len(rows.epochs) == 1 and made[-1].values["epoch_time_sec"] == epochs[-1]["seconds"]


def test_framework_epochs_drive_and_a_test_phase_is_never_an_epoch(tmp_path: Path) -> None:
    obs, clock = observer(tmp_path)
    obs.framework = "lightning"
    for epoch in range(2):
        obs.epoch_start(epoch, "lightning", steps_per_epoch=4)
        batches(obs, clock, epoch + 1, 4, steps=True)
        obs.epoch_end({"train_loss": 0.5 - epoch / 10, "val_acc": "0.9", "text": "skip me"})
    obs.phase("test", clock.now, {"test_loss": 0.3})
    kinds = [r["kind"] for r in records(tmp_path)]
    assert kinds.count("epoch") == 2 and kinds.count("phase") == 1
    rows = ObservedRows()
    made = [row for r in records(tmp_path) for row in rows.observed(r)]
    assert [m.epoch for m in made] == [0, 1]
    assert made[1].values["train_loss"] == pytest.approx(0.4) and made[1].values["val_acc"] == 0.9


def test_a_hook_that_fails_turns_itself_off_and_leaves_a_note(tmp_path: Path) -> None:
    obs, _ = observer(tmp_path)
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("boom")

    obs.guard("loader", broken)
    obs.guard("loader", broken)  # off now: not called again
    assert calls == [1]
    notes = [r for r in records(tmp_path) if r["kind"] == "note"]
    assert len(notes) == 1 and notes[0]["hook"] == "loader" and "boom" in notes[0]["error"]


def test_parsed_lines_join_the_observed_epochs_by_order() -> None:
    from ddp_tui.scriptrun.records import EpochRecord

    rows = ObservedRows()
    # The script prints 1-based epochs at each epoch's end; the sampler counts from 0.
    assert rows.parsed_epoch(EpochRecord(1, {"train_loss": 0.7})) == []  # nothing observed yet
    made = rows.observed({"kind": "epoch", "epoch": 0, "source": "sampler", "seconds": 2.0,
                          "samples": 100, "data_wait_sec": 0.5})  # fmt: skip
    assert made[0].values["train_loss"] == 0.7
    assert made[0].values["throughput_samples_per_sec"] == 50.0
    assert made[0].values["compute_time_sec"] == 1.5


def test_the_observed_loss_fills_an_epoch_only_where_the_script_printed_none() -> None:
    from ddp_tui.scriptrun.records import EpochRecord

    rows = ObservedRows()
    epoch = {"kind": "epoch", "source": "sampler", "seconds": 1.0, "loss": 2.5}
    (first,) = rows.observed({**epoch, "epoch": 0})
    assert first.values["train_loss"] == 2.5 and first.source_of("train_loss") == "observed"
    # The script's own figure, printed after the epoch ended, wins over the observed one.
    (again,) = rows.parsed_epoch(EpochRecord(0, {"train_loss": 2.4}, source="stdout"))
    assert again.values["train_loss"] == 2.4 and again.source_of("train_loss") == "stdout"


def test_sitecustomize_runs_the_environments_own_first_and_then_observes(tmp_path: Path) -> None:
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = 'ran'\n")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(BOOT_DIR), str(own), str(SRC)]),
        DDP_TUI_OBSERVE="1",
        DDP_TUI_RUN_DIR=str(tmp_path),
    )
    probe = (
        "import os, sys; print(os.environ.get('OWN_SITE'), "
        "any(type(f).__name__ == '_Finder' for f in sys.meta_path), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["ran", "True", "False"], out.stderr  # no torch imported early
    assert not (tmp_path / "observe").exists()  # a process that observed nothing leaves nothing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.torch
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--context", "fork"], id="fork"),
        pytest.param(["--context", "spawn"], id="spawn"),
        pytest.param(["--context", "fork", "--compile"], id="fork-compile"),
    ],
)
def test_workers_by_fork_or_spawn_and_compile_are_observed_alike(
    tmp_path: Path, args: list[str]
) -> None:
    pytest.importorskip("torch")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-port", str(free_port()), "-m", "ddp_tui.scriptrun", "--run-dir", str(tmp_path),
        "--epochs", "2", "--world-size", "2", "--backend", "gloo", "--",
        str(SCRIPTS / "loader_workers.py"), *args,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    journals = list((tmp_path / "observe").glob("*.jsonl"))
    assert len(journals) == 2  # the ranks; the DataLoader workers wrote nothing
    found = records(tmp_path)
    assert not [r for r in found if r["kind"] == "note"]
    epochs = [r for r in found if r["kind"] == "epoch"]
    # 256 samples in batches of 16, split over 2 ranks: 8 steps and 128 samples per rank.
    assert sorted((e["epoch"], e["steps"], e["samples"]) for e in epochs) == [
        (0, 8, 128), (0, 8, 128), (1, 8, 128), (1, 8, 128),
    ]  # fmt: skip
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2"]
    observed = json.loads((tmp_path / "run.json").read_text())["observed"]
    assert observed["group"] == "formed" and observed["world_size"] == 2


def test_a_requeued_attempts_loader_passes_continue_after_the_earlier_epochs(
    tmp_path: Path,
) -> None:
    """A requeued Slurm job keeps its id: the new attempt ignores the earlier attempt's
    journals, and its passes (no sampler numbers them) are numbered after the earlier rows."""
    from ddp_tui.scriptrun.observed import Observations

    folder = tmp_path / "observe"
    folder.mkdir()
    old = {"kind": "process", "pid": 1, "t": 10.0}
    epoch = {"kind": "epoch", "epoch": 0, "source": "loader", "seconds": 1.0, "samples": 8}
    group = {"kind": "group", "rank": 0, "world_size": 1, "backend": "gloo", "host": "n1"}
    (folder / "7-n1-1.jsonl").write_text(
        "\n".join(json.dumps(r) for r in (old, group, epoch)) + "\n"
    )
    new = {"kind": "process", "pid": 2, "t": 1000.0}
    (folder / "7-n1-2.jsonl").write_text(
        "\n".join(json.dumps(r) for r in (new, group, epoch)) + "\n"
    )
    seen = Observations(tmp_path, "7", child_pid=2, since=1000.0)
    got = seen.poll()
    assert got[0]["pid"] == 2 and list(seen.journals) == ["7-n1-2.jsonl"]
    rows = ObservedRows()
    rows.loader_base = 2  # two epochs written by the earlier attempt, which counted from 0
    made = [row for r in got for row in rows.observed(r)]
    assert [m.epoch for m in made] == [2]  # + the offset of 1: contract epoch 3


def test_a_sampler_whose_set_epoch_is_never_called_does_not_number_every_pass_0(
    tmp_path: Path,
) -> None:
    obs, _ = observer(tmp_path)
    obs.describe = lambda _: (0, 2)  # a DistributedSampler left at epoch 0: 0 every pass
    for key in (1, 2, 3):
        obs.batch(key, 8, 0.0)
        obs.step()
        obs.exhausted(key)
    numbers = [(r["epoch"], r["source"]) for r in records(tmp_path) if r["kind"] == "epoch"]
    assert numbers == [(0, "sampler"), (1, "loader"), (2, "loader")]


def test_the_first_observed_epoch_decides_the_numbering_before_a_later_step_in_the_same_read(
    tmp_path: Path,
) -> None:
    """One read of the journal can hold epoch 0's record and a step of epoch 1 after it (the
    wrapper reads once a second): epoch 0 must still become row 1, whatever numbering a
    progress line decided before."""
    from ddp_tui.scriptrun.observed import Observations
    from ddp_tui.scriptrun.records import StepRecord
    from ddp_tui.scriptrun.runner import Rank0, parse_args

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    opts = parse_args(["--run-dir", str(run_dir), "--epochs", "2", "--", "fit.py"])
    rank0 = Rank0(opts, [sys.executable, "fit.py"], "9", "single")
    rank0._open_outputs()
    # Every progress record is written (and numbered) at once: the once-a-second throttle is
    # what made this depend on when the reads fell.
    rank0.progress.interval = 0.0
    rank0._records([StepRecord(epoch=1, step=3)])  # a 1-based progress line, parsed first
    folder = run_dir / "observe"
    folder.mkdir()
    lines = [
        {"kind": "process", "pid": 42, "t": rank0.wall + 1},
        {"kind": "group", "rank": 0, "world_size": 1, "backend": "gloo", "host": "n1"},
        {"kind": "step", "epoch": 0, "step": 5, "steps_per_epoch": 8},
        {"kind": "epoch", "epoch": 0, "source": "lightning", "start": 1.0, "seconds": 2.0,
         "samples": 64, "data_wait_sec": 0.5, "values": {"train_loss": 0.5}},
        {"kind": "step", "epoch": 1, "step": 1, "steps_per_epoch": 8},
    ]  # fmt: skip
    (folder / "9-n1-42.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    rank0.observations = Observations(run_dir, "9", child_pid=42, since=rank0.wall)
    rank0._observe()
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("1,0.5,"), rows
    assert json.loads((run_dir / "run.json").read_text())["epoch_offset"] == 1
