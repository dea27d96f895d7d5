"""Diagnosing 1,000 ended runs from their logs' tails; and what the stall rule costs a refresh.

Part 1 builds 1,000 ended runs (real run directories: spec.json, jobs.jsonl with an end
record but no diagnosis yet, .out and .err). The logs are drawn from ten kinds of ending
(a missing module, CUDA OOM, an NCCL timeout, a time limit, a rendezvous timeout, a
plain traceback, an unrecognised log...) and the .out files range from 2 KB to 8 MB of
tqdm bars. It times the first refresh of the real facade, which reads each run's tails
and classifies them, and reports the time per run and the log bytes read per run. Side
by side in the same run: the same refresh when the end records already carry their
diagnosis (what every later start costs), and a naive diagnosis that reads each log
whole.

Part 2 counts, per refresh, the scheduler calls and batches (SSH round trips) with 100
running jobs and the stall rule on, against the same store with the rule off.

The Slurm answers are canned (a fake: no test cluster holds these jobs); the run
directories and logs are real files read through the local executor.

    .venv/bin/python benchmarks/bench_diagnosis.py [--runs 1000] [--repeat 5]
    .venv/bin/python benchmarks/bench_diagnosis.py --quick   # 20 runs, 20 jobs, once: seconds

A full run writes benchmarks/results/diagnosis.json; a quick run prints the same lines and
writes nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_refresh import CannedSlurm
from ddp_tui.config import Profile
from ddp_tui.diagnosis import LogTail, RunFacts, classify
from ddp_tui.remote.backends.executor import Batch, BatchResult
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RUN_ID_RE, RunStore
from ddp_tui.spec import ExperimentSpec
from record import Record, add_quick_option

TRACE = 'Traceback (most recent call last):\n  File "/w/code/ddp_tui/trainer/__main__.py", line 5\n'
ENDINGS: list[tuple[str, int | None, str]] = [
    ("FAILED", 1, TRACE + "ModuleNotFoundError: No module named 'torch'\n"),
    (
        "FAILED",
        1,
        TRACE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is free.\n",
    ),
    (
        "FAILED",
        1,
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=91, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.\n",
    ),
    (
        "TIMEOUT",
        0,
        "slurmstepd: error: *** JOB {job} ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE TO "
        "TIME LIMIT ***\n",
    ),
    (
        "FAILED",
        1,
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
    ),
    ("FAILED", 1, TRACE + "ValueError: bad value in my_loss\n"),
    ("FAILED", 1, "something nobody has seen before\n"),
    ("CANCELLED", 0, "slurmstepd: error: *** JOB {job} ON n1 CANCELLED AT 2026-11-21 ***\n"),
    ("OUT_OF_MEMORY", 0, "slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0\n"),
    ("FAILED", 139, "Segmentation fault (core dumped)\n"),
]
OUT_SIZES = [2_000, 60_000, 500_000, 8_000_000]  # bytes of .out: small to tqdm-heavy


def out_text(size: int) -> bytes:
    line = b"epoch 1: 37%|####      | 370/1000 [00:10<00:17, 36.5it/s]\r"
    return (line * (size // len(line) + 1))[:size] + b"\n"


def make_ended_store(root: Path, runs: int) -> None:
    spec = ExperimentSpec(name="diag", nodes=2, gpus_per_node=4, epochs=10).to_dict()
    outs = {size: out_text(size) for size in OUT_SIZES}
    for i in range(1, runs + 1):
        run_id = f"20261121-{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-diag-{i:04x}"
        d = root / run_id
        d.mkdir(parents=True)
        doc = {"spec": spec, "created_at": "2026-11-21", "run_id": run_id}
        (d / "spec.json").write_text(json.dumps(doc))
        state, code, err = ENDINGS[i % len(ENDINGS)]
        end = {"event": "end", "job_id": str(i), "state": state, "exit_code": code}
        jobs = json.dumps({"job_id": str(i), "attempt": 1}) + "\n" + json.dumps(end) + "\n"
        (d / "jobs.jsonl").write_text(jobs)
        (d / f"slurm-{i}.out").write_bytes(outs[OUT_SIZES[i % len(OUT_SIZES)]])
        (d / f"slurm-{i}.err").write_text("W1121 warning: something harmless\n" * 50 + err)


class Counting(CannedSlurm):
    """The canned Slurm, counting the log bytes each batch reads."""

    log_bytes = 0

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        result = super().run_batch(batch, timeout=timeout)
        self.log_bytes += sum(
            len(r.data) for r in result.reads if r.request.path.endswith((".out", ".err"))
        )
        return result


def open_cluster(root: Path, ex: CannedSlurm, profile: Profile) -> Cluster:
    return Cluster(ex, SlurmScheduler(ex), RunStore(ex, str(root)), profile=profile, location="b")


def naive(root: Path) -> int:
    """Read both logs whole and classify: what a tool without tails does (run directories
    only: the names the store's listing takes for runs, ``RUN_ID_RE``)."""
    n = 0
    for d in sorted(p for p in root.iterdir() if RUN_ID_RE.match(p.name)):
        jobs = [json.loads(x) for x in (d / "jobs.jsonl").read_text().splitlines()]
        end, job = jobs[-1], jobs[-1]["job_id"]
        tails = [
            LogTail(f"slurm-{job}.{s}", (d / f"slurm-{job}.{s}").read_text(errors="replace"))
            for s in ("out", "err")
        ]
        facts = RunFacts(state=end["state"], exit_code=end["exit_code"], out=tails[0], err=tails[1])
        n += classify(facts) is not None
    return n


def part1(runs: int, repeat: int, record: Record) -> None:
    first, stored, whole, per_bytes = [], [], [], []
    recognised = 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-diag-") as tmp:
            root = Path(tmp) / "runs"
            make_ended_store(root, runs)
            ex = Counting(0, set(), set())
            cluster = open_cluster(root, ex, Profile())
            t0 = time.perf_counter()
            snap = cluster.refresh()
            first.append(time.perf_counter() - t0)
            per_bytes.append(ex.log_bytes / runs)
            recognised = sum(1 for v in snap.runs if v.diagnosis is not None)
            # Store the diagnoses as the app does when it records an end itself.
            for v in snap.runs:
                jobs = Path(v.run_dir) / "jobs.jsonl"
                lines = jobs.read_text().splitlines()
                end = json.loads(lines[-1])
                if v.diagnosis is not None:
                    end["diagnosis"] = v.diagnosis.to_dict()
                jobs.write_text(lines[0] + "\n" + json.dumps(end) + "\n")
            again = open_cluster(root, Counting(0, set(), set()), Profile())
            t0 = time.perf_counter()
            again.refresh()
            stored.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            naive(root)
            whole.append(time.perf_counter() - t0)
    f, s, w = (statistics.median(x) for x in (first, stored, whole))
    print(f"part 1: {runs} ended runs, median of {repeat}")
    print(f"  first refresh, diagnosing from tails   {f:.3f} s  ({f / runs * 1e3:.2f} ms/run)")
    print(f"  refresh with diagnoses stored           {s:.3f} s  (ratio {f / s:.2f})")
    print(f"  naive: read both logs whole, classify   {w:.3f} s  (ratio {f / w:.2f})")
    print(
        f"  log bytes read per run: {statistics.median(per_bytes) / 1024:.1f} KiB "
        f"(at most 2 x 64 KiB); diagnosed {recognised}/{runs}"
    )
    note = f"{runs} ended runs, median of {repeat}"
    record.figure(
        "first refresh, diagnosing from tails, against the refresh with diagnoses stored",
        f,
        s,
        unit="s",
        note=note,
    )
    record.figure(
        "first refresh, diagnosing from tails, against a naive whole-log diagnosis",
        f,
        w,
        unit="s",
        note=note,
    )
    record.figure("first refresh per run", f / runs * 1e3, None, unit="ms", note=note)
    record.figure(
        "log bytes read per run",
        statistics.median(per_bytes) / 1024,
        None,
        unit="KiB",
        note="at most 2 x 64 KiB",
    )
    record.figure("runs diagnosed", recognised, runs, unit="runs", note="of the ended runs")


def part2(active: int, repeat: int, record: Record) -> None:
    print(f"part 2: {active} running jobs, calls per refresh")
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as tmp:
        root = Path(tmp) / "runs"
        from bench_refresh import make_store

        make_store(root, active)
        seen: dict[str, tuple[int, int, float]] = {}
        for label, minutes in (("stall rule off", 0.0), ("stall rule on ", 10.0)):
            ex = CannedSlurm(active, set(range(1, active + 1)), set())
            cluster = open_cluster(root, ex, replace(Profile(), stall_after_min=minutes))
            cluster.refresh()
            cluster.refresh()
            calls: list[int] = []
            batches: list[int] = []
            times: list[float] = []
            for _ in range(repeat):
                ex.calls = ex.batches = 0
                t0 = time.perf_counter()
                cluster.refresh()
                times.append(time.perf_counter() - t0)
                calls.append(ex.calls)
                batches.append(ex.batches)
            print(
                f"  {label}: scheduler calls {max(calls)}, batches {max(batches)}, "
                f"median {statistics.median(times) * 1e3:.1f} ms"
            )
            seen[label.strip()] = (max(calls), max(batches), statistics.median(times) * 1e3)
    on, off = seen["stall rule on"], seen["stall rule off"]
    note = f"{active} running jobs, {repeat} refreshes"
    record.figure(
        "scheduler calls per refresh, stall rule on against off", on[0], off[0], note=note
    )
    record.figure("batches per refresh, stall rule on against off", on[1], off[1], note=note)
    record.figure("refresh, stall rule on against off", on[2], off[2], unit="ms", note=note)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--active", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    add_quick_option(ap)
    args = ap.parse_args(argv)
    if args.quick:  # every ending and every .out size, each twice or more
        args.runs, args.active, args.repeat = 20, 20, 1
    record = Record("diagnosis", quick=args.quick)
    part1(args.runs, args.repeat, record)
    part2(args.active, args.repeat * 4, record)
    record.save()


if __name__ == "__main__":
    main()
