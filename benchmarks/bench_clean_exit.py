"""Do finished 2-rank gloo runs end with exit 0? The trainer against a plain tutorial DDP loop.

torch's gloo teardown (``destroy_process_group()``, interpreter exit) can abort a rank that has
finished all its work: ``terminate called without an active exception``, SIGABRT, and torchrun
reports the run FAILED. The trainer ends its processes with ``os._exit`` after its final barrier
(``ddp_tui/trainer/exit.py``); the plain loop is the PyTorch DDP tutorial's ending,
``destroy_process_group()`` and return.

Each repeat runs both under real torchrun (``--standalone --nproc-per-node 2``, CPU, gloo), one
after the other: the trainer on a tiny workload (``simple_cnn``, synthetic 1x12x12, 480 samples,
batch 8, 2 epochs) in a fresh run directory, and the plain loop (a script this benchmark writes:
a small conv net, a few steps). A run that ends non-zero is classified from torchrun's exit code
and its failure report: SIGABRT with "terminate called without an active exception", another
signal, another exit code, or the per-run timeout. Target: 0 non-zero trainer runs.

    python benchmarks/bench_clean_exit.py                 # 100 repeats of both
    python benchmarks/bench_clean_exit.py --runs 20 --trainer-only
    python benchmarks/bench_clean_exit.py --quick         # 1 repeat of both

A quick run exits 0 when a run fails by a signal or its timeout (the teardown abort this
counts), non-zero when one fails with an exit code or leaves its work unfinished (a broken run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from record import Record, add_quick_option

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
TERMINATE = "terminate called without an active exception"
ABORT_KIND = f'SIGABRT "{TERMINATE}"'
# Launcher variables a run must not inherit (the benchmark may itself run inside a job).
LAUNCH_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "GROUP_RANK",
)  # fmt: skip

TRAINER_ARGS = (
    "--model", "simple_cnn",
    "--synthetic-samples", "480",
    "--synthetic-val-samples", "96",
    "--synthetic-shape", "1,12,12",
    "--num-classes", "10",
    "--batch-size", "8",
    "--epochs", "2",
    "--workers", "0",
    "--seed", "0",
    "--timeout-sec", "60",
)  # fmt: skip

# The PyTorch DDP tutorial's shape: set up, train a few steps, destroy_process_group(), return.
PLAIN_SCRIPT = """\
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 12 * 12, 10)
    )
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(10):
        x = torch.randn(8, 1, 12, 12, generator=gen)
        y = torch.randint(0, 10, (8,), generator=gen)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


@dataclass
class Outcome:
    """One torchrun run: its exit code, the classification, and how long it took."""

    side: str
    code: int | None  # None: timed out
    kind: str  # "ok" or why it failed
    detail: str
    seconds: float


def _env(src: Path = SRC) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    for name in LAUNCH_VARS:
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH")) if p)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _torchrun(target: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", "2", *target,
    ]  # fmt: skip


# One entry of torchrun's failure report: "rank : 1 (local_rank: 1)" then "exitcode : -6 (...)".
REPORT_ENTRY = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:[^)]*\)\s*exitcode\s*:\s*(-?\d+)")


def worker_exit_codes(output: str) -> dict[int, int]:
    """rank -> exit code in torchrun's failure report (negative: killed by that signal)."""
    return {int(rank): int(code) for rank, code in REPORT_ENTRY.findall(output)}


def root_cause_code(output: str) -> int | None:
    """The exit code of the report's "Root Cause (first observed failure)" rank."""
    _, found, rest = output.partition("Root Cause")
    match = REPORT_ENTRY.search(rest) if found else None
    return int(match.group(2)) if match else None


def classify(code: int, output: str) -> tuple[str, str]:
    """Why a run ended non-zero: (kind, detail), from torchrun's report and exit code.

    The first failing rank decides: once one worker fails, torchrun stops the others (SIGTERM).
    """
    ranks = worker_exit_codes(output)
    detail = f"torchrun exit {code}; " + (
        ", ".join(f"rank {r}: {_describe(c)}" for r, c in sorted(ranks.items()))
        or "no worker report"
    )
    cause = root_cause_code(output)
    if cause is None:
        cause = next(iter(ranks.values()), code)  # a negative torchrun code: its own signal
    if cause < 0:
        if -cause == signal.SIGABRT and TERMINATE in output:
            return ABORT_KIND, detail
        return f"signal {_signal_name(-cause)}", detail
    return f"exit code {cause}", detail


def _describe(code: int) -> str:
    return _signal_name(-code) if code < 0 else f"exit {code}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


def run_once(
    side: str, argv: list[str], cwd: Path, timeout: float, src: Path = SRC
) -> tuple[Outcome, str]:
    """Run torchrun to the end (or the timeout, then kill its whole process group)."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        argv,
        env=_env(src),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            seconds = time.perf_counter() - t0
            return Outcome(side, None, "timeout", f"killed after {timeout:g}s", seconds), output
    seconds = time.perf_counter() - t0
    code = proc.returncode
    if code == 0:
        return Outcome(side, 0, "ok", "", seconds), output
    kind, detail = classify(code, output)
    return Outcome(side, code, kind, detail, seconds), output


def run_trainer(workdir: Path, index: int, timeout: float, src: Path) -> tuple[Outcome, str]:
    run_dir = workdir / f"trainer-{index}"
    argv = _torchrun(["-m", "ddp_tui.trainer", "--run-dir", str(run_dir), *TRAINER_ARGS])
    outcome, output = run_once("trainer", argv, workdir, timeout, src)
    if outcome.code == 0:
        # Exit 0 is only half the story: the run must also have finished its work.
        problems = trainer_problems(run_dir, output)
        if problems:
            outcome.kind, outcome.detail = "exit 0, incomplete", problems
    return outcome, output


def trainer_problems(run_dir: Path, output: str) -> str:
    """What a trainer run that exited 0 failed to leave behind ('' when complete)."""
    problems = []
    if "identical on all ranks" not in output:
        problems.append("no 'identical on all ranks' line")
    try:
        info = json.loads((run_dir / "run.json").read_text())
        if info.get("state") != "completed":
            problems.append(f"run.json state {info.get('state')!r}")
    except (OSError, ValueError) as exc:
        problems.append(f"run.json unreadable: {exc}")
    try:
        rows = (run_dir / "metrics.csv").read_text().splitlines()
        if len(rows) != 1 + 2:
            problems.append(f"metrics.csv has {len(rows) - 1} rows, not 2")
    except OSError as exc:
        problems.append(f"metrics.csv unreadable: {exc}")
    if not (run_dir / "checkpoints" / "latest.pt").is_file():
        problems.append("no checkpoint")
    return "; ".join(problems)


def run_plain(workdir: Path, script: Path, timeout: float) -> tuple[Outcome, str]:
    return run_once("plain", _torchrun([str(script)]), workdir, timeout)


def summary(outcomes: list[Outcome], sides: list[str]) -> list[str]:
    """The table: runs, non-zero exits by cause, and time per run, one line per side."""
    kinds = [ABORT_KIND, "other signal", "other exit code", "timeout"]
    lines = [
        f"{'':10}{'runs':>6}{'non-zero':>10}{'SIGABRT terminate':>19}{'other signal':>14}"
        f"{'other exit':>12}{'timeout':>9}{'incomplete':>12}{'median s':>10}"
    ]
    for side in sides:
        mine = [o for o in outcomes if o.side == side]
        counts: Counter[str] = Counter()
        for o in mine:
            if o.kind in ("ok", "exit 0, incomplete"):
                continue
            if o.kind in (ABORT_KIND, "timeout"):
                counts[o.kind] += 1
            elif o.kind.startswith("signal"):
                counts["other signal"] += 1
            else:
                counts["other exit code"] += 1
        nonzero = sum(counts.values())
        incomplete = sum(o.kind == "exit 0, incomplete" for o in mine)
        times = sorted(o.seconds for o in mine)
        median = times[len(times) // 2] if times else 0.0
        lines.append(
            f"{side:10}{len(mine):>6}{nonzero:>10}"
            + "".join(f"{counts[k]:>{w}}" for k, w in zip(kinds, (19, 14, 12, 9), strict=True))
            + f"{incomplete:>12}{median:>10.1f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--runs", type=int, default=None, help="repeats, each side once per repeat (default 100)"
    )
    only = p.add_mutually_exclusive_group()
    only.add_argument("--trainer-only", action="store_true", help="skip the plain loop")
    only.add_argument("--plain-only", action="store_true", help="skip the trainer")
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds per torchrun run (default 180)"
    )
    p.add_argument("--show-failures", type=int, default=2, help="output tails to print")
    p.add_argument(
        "--src",
        type=Path,
        default=SRC,
        help="the src directory whose trainer runs (e.g. an older commit's, for a before/after)",
    )
    add_quick_option(p)
    cfg = p.parse_args(argv)
    # --quick: one repeat of each side; a timeout that keeps both runs, hung, inside a minute.
    if cfg.runs is None:
        cfg.runs = 1 if cfg.quick else 100
    if cfg.timeout is None:
        cfg.timeout = 25.0 if cfg.quick else 180.0
    if cfg.runs < 1:
        p.error(f"argument --runs: must be at least 1, got {cfg.runs}")
    sides = ["trainer"] * (not cfg.plain_only) + ["plain"] * (not cfg.trainer_only)

    record = Record("clean_exit", quick=cfg.quick)
    outcomes: list[Outcome] = []
    shown = 0
    print(
        f"{cfg.runs} repeats of {' + '.join(sides)}: 2 gloo ranks under torchrun, "
        f"timeout {cfg.timeout:g}s per run; trainer from {cfg.src}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-clean-exit-") as tmp:
        workdir = Path(tmp)
        script = workdir / "plain_ddp.py"
        script.write_text(PLAIN_SCRIPT)
        for i in range(1, cfg.runs + 1):
            for side in sides:
                if side == "trainer":
                    outcome, output = run_trainer(workdir, i, cfg.timeout, cfg.src.resolve())
                else:
                    outcome, output = run_plain(workdir, script, cfg.timeout)
                outcomes.append(outcome)
                status = "ok" if outcome.kind == "ok" else f"FAILED {outcome.kind}"
                extra = f"  ({outcome.detail})" if outcome.detail else ""
                print(
                    f"{i:4d} {side:8} {status}  {outcome.seconds:.1f}s{extra}",
                    flush=True,
                )
                if outcome.kind != "ok" and shown < cfg.show_failures:
                    shown += 1
                    lines = output.strip().splitlines()
                    tail = "\n".join([ln for ln in lines[:-14] if TERMINATE in ln] + lines[-14:])
                    print("       | " + tail.replace("\n", "\n       | "), flush=True)

    print()
    for line in summary(outcomes, sides):
        print(line)
    bad = {s: sum(o.side == s and o.kind != "ok" for o in outcomes) for s in sides}
    for side in sides:
        print(f"{side}: {bad[side]} of {cfg.runs} runs failed ({100 * bad[side] / cfg.runs:.1f}%)")
    if len(sides) == 2:
        ratio = f"{bad['trainer'] / bad['plain']:.3f}" if bad["plain"] else "n/a (plain: 0)"
        print(f"failure ratio trainer/plain: {ratio}  (target: trainer 0)")
    for side in sides:
        reference = bad["plain"] if side == "trainer" and "plain" in bad else None
        record.figure(
            f"{side} runs that failed",
            bad[side],
            reference,
            unit="runs",
            note=f"of {cfg.runs}"
            + ("; reference: the plain loop's; target 0" if side == "trainer" else ""),
        )
        times = sorted(o.seconds for o in outcomes if o.side == side)
        record.figure(f"{side} run, median time", times[len(times) // 2], unit="s")
    record.save()
    if cfg.quick:
        # A quick run proves the benchmark runs: a failure by a signal or the timeout is what it
        # counts (the teardown abort), one with an exit code or unfinished work is a broken run.
        broken = [o for o in outcomes if o.kind.startswith("exit")]
        return 1 if broken else 0
    return 0 if cfg.plain_only or bad.get("trainer", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
