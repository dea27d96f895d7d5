"""The NCCL flight recorder on a real device: ``scripts/flight_recorder_gpu_check.py`` makes a
real dump (NCCL at world size 1 on the GPU; gloo, which shares the recorder, without one) and
reads it with ddp-tui's own loader; on the GPU, the local job's log must also say that its job
script turned the recorder on (docs/flight-recorder.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from .context import REPO, Context, OutOfTime
from .report import Step

SCRIPT = REPO / "scripts" / "flight_recorder_gpu_check.py"
ON_LINE = "[ddp-tui] NCCL flight recorder: on"


def run(ctx: Context, step: Step, local_run: str | None) -> None:
    out = ctx.work / "flight-recorder"
    backend = "nccl" if ctx.cuda else "gloo"  # --cpu on a GPU machine means gloo too
    try:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--out", str(out), "--backend", backend],
            env=ctx.env(),
            capture_output=True,
            text=True,
            timeout=ctx.limit(180),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OutOfTime("the flight recorder check ran past its time") from None
    lines = proc.stdout.strip().splitlines()
    step.evidence["flight_recorder_gpu_check.py"] = (proc.stdout + proc.stderr)[-4000:]
    try:
        result = json.loads(lines[-1]) if lines else {}
    except ValueError:
        result = {}
    step.details["dump"] = {k: v for k, v in result.items() if k != "labels"}
    if proc.returncode == 2:
        step.skip(result.get("skipped", "this torch cannot dump its recorder here"))
        return
    if proc.returncode != 0:
        step.fail(f"the check exited {proc.returncode}: {result.get('problems')}")
        return
    step.summary = (
        f"a real {backend} dump ({result.get('bytes')} bytes, {result.get('entries')} entries, "
        f"torch {result.get('torch')}) loaded and analysed: no hang"
    )
    if ctx.cuda and local_run:
        log = (ctx.runs_root / local_run).glob("slurm-*.out")
        said = [
            ln for f in log for ln in f.read_text(errors="replace").splitlines() if ON_LINE in ln
        ]
        step.evidence["the local NCCL job's recorder line"] = "\n".join(said) or "(none)"
        if not said:
            step.fail(f"the local NCCL job {local_run} did not say its recorder was on")
