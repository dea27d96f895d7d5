"""The trainer registers every rank for stack dumps (docs/stacks.md): a real 2-rank torchrun
run, parked by the test hold at epoch 2's first step, shows both ranks' stacks inside the
trainer's training step when the dump signal is sent as ``ddp-tui stacks`` sends it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.live.stacks import dump_stacks, read_registrations
from ddp_tui.remote.store.runs import RunRef
from tests.helpers.hold import Hold
from tests.trainer.helpers import TINY, torchrun_argv, trainer_env
from tests.trainer.test_trainer_ddp import _wait_until_parked

pytestmark = pytest.mark.torch


def test_every_trainer_rank_registers_and_dumps_its_stack(tmp_path: Path, hold: Hold) -> None:
    run_dir = tmp_path / "run"
    held = [hold.model("simple_cnn") if a == "simple_cnn" else a for a in TINY]
    argv = torchrun_argv("ddp_tui.trainer", ["--run-dir", str(run_dir), *held])
    env = trainer_env(**hold.process_env(run_dir, epochs=1))
    env["PYTHONPATH"] = f"{hold.directory}{os.pathsep}{env['PYTHONPATH']}"
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            _wait_until_parked(hold, proc)
            executor = LocalExecutor()
            regs = read_registrations(executor, RunRef("run", str(run_dir)), "nojob")
            assert sorted(r.rank for r in regs) == [0, 1], [r.header for r in regs]
            stacks, notes = dump_stacks(
                executor, lambda host, argv: argv, regs, deadline=time.monotonic() + 8
            )
        finally:
            hold.release()
            out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert notes == []
    for p in stacks:
        assert p.status == "ok", (p.summary, p.text)
        functions = [f.function for f in p.main.frames] if p.main else []
        # parked inside the training step, below the trainer's own loop
        assert "fit" in functions and any("train" in f for f in functions), p.text
