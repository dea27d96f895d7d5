"""refresh() with 10,000 jobs in the queue and 1,000 runs in the store; then job history.

Measures the facade's parsing and merging per refresh (target <= 50 ms) and counts the
Slurm calls per refresh (must be <= 2 at any job count), next to a naive refresh measured
in the same run: re-read every run's files and poll each job with its own call.

The history case has 10,000 ended runs (their ends recorded in jobs.jsonl) and 20 active
ones. It reports the ids in each sacct call, at start and after some jobs end (target:
only the active and the just-ended ones), next to the same store without end records;
and the time from starting the real app to its first table, next to a bare Textual app.

The Slurm answers are canned text in the exact --format the client asks for (a fake:
no test cluster can hold 10,000 jobs on 2 cores); the run directories are real files.

    .venv/bin/python benchmarks/bench_refresh.py [--runs 1000] [--queue 10000]
        [--history 10000] [--active 20] [--starts 3]
    .venv/bin/python benchmarks/bench_refresh.py --quick   # 100 runs, 1,000 jobs: seconds

A full run writes benchmarks/results/refresh.json; a quick run prints the same lines, writes
nothing and exits 0 whatever the targets say (an error still fails it).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import Batch, BatchResult, CommandResult, LocalExecutor
from ddp_tui.remote.backends.slurm import SEP, SlurmScheduler
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RUN_ID_RE, RunStore
from ddp_tui.spec import ExperimentSpec
from record import Record, add_quick_option

METRICS_HEADER = (
    "epoch,train_loss,train_acc,val_loss,val_acc,val_mae,val_rmse,lr,epoch_time_sec,"
    "throughput_samples_per_sec,data_load_time_sec,compute_time_sec,gpu_mem_peak_mib,"
    "gpu_util_avg,cpu_util_avg,world_size,mfu"
)


class CannedSlurm(LocalExecutor):
    """A fake Slurm: squeue/sacct answer from canned text; files are real. Counts calls."""

    def __init__(self, queue: int, ours_active: set[int], ours_done: set[int]) -> None:
        self.calls = 0
        self.batches = 0
        self.sacct_ids: list[int] = []  # how many ids each sacct call asked about
        rows = []
        for jid in range(1, queue + 1):
            if jid in ours_done:
                continue
            state = "RUNNING" if jid % 3 else "PENDING"
            rows.append(
                SEP.join(
                    [
                        str(jid),
                        state,
                        "None",
                        "2",
                        "n[1-2]",
                        "1:02:03",
                        "2026-11-21T09:00:00",
                        "2026-11-21T10:00:00",
                        "gpu",
                        f"job {jid}",
                    ]
                )
            )
        self.squeue = "\n".join(rows) + "\n"
        self.done = ours_done

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        self.batches += 1  # one SSH round trip each, in remote mode
        return super().run_batch(batch, timeout=timeout)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        tools = {"squeue", "sacct", "sinfo", "scontrol"} & set(argv)
        if not tools:
            return super().run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)
        self.calls += 1
        if "squeue" in tools:
            return CommandResult(tuple(argv), 0, self.squeue, "")
        if "sacct" in tools:
            ids = next(a for a in argv if a.startswith("--jobs=")).split("=", 1)[1].split(",")
            self.sacct_ids.append(len(ids))
            out = [
                SEP.join(
                    [
                        i,
                        "COMPLETED",
                        "0:0",
                        "3600",
                        "2",
                        "n[1-2]",
                        "2026-11-21T09:00:00",
                        "2026-11-21T10:00:00",
                        "gpu",
                        "None",
                        f"job {i}",
                    ]
                )
                for i in ids
                if int(i.split("_")[0]) in self.done
            ]
            return CommandResult(tuple(argv), 0, "\n".join(out) + "\n", "")
        return CommandResult(tuple(argv), 0, "slurm 22.05.8\n", "")


def make_store(
    root: Path,
    runs: int,
    *,
    first: int = 1,
    ended: bool = False,
    name: str = "bench",
    grouped: bool = True,
) -> None:
    """``runs`` run directories with job ids ``first``...; ``ended``: with end records;
    ``grouped``: in one of 50 comparison groups (else alone: its own row in the table)."""
    spec = ExperimentSpec(name=name, nodes=2, gpus_per_node=4, epochs=10).to_dict()
    rows = "\n".join(
        f"{e},{2.0 / e:.4f},{0.1 * e:.3f},,,,,0.1,12.5,5000,1.0,11.0,2048,,50,8,"
        for e in range(1, 11)
    )
    for i in range(first, first + runs):
        day = 21 + i // 86400
        hms = f"{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}"
        run_id = f"202611{day:02d}-{hms}-{name}-{i % 65536:04x}"
        d = root / run_id
        d.mkdir(parents=True)
        group = f"g{i % 50}" if grouped else None
        doc = {"spec": spec, "group": group, "created_at": "2026-11-21", "run_id": run_id}
        (d / "spec.json").write_text(json.dumps(doc))
        jobs = json.dumps({"job_id": str(i), "attempt": 1}) + "\n"
        if ended:
            end = {"event": "end", "job_id": str(i), "state": "COMPLETED", "exit_code": 0}
            jobs += json.dumps(end) + "\n"
        (d / "jobs.jsonl").write_text(jobs)
        (d / "metrics.csv").write_text(METRICS_HEADER + "\n" + rows + "\n")
        (d / "run.json").write_text(json.dumps({"world_size": 8, "hosts": ["n1", "n2"]}))


def naive_refresh(root: Path, squeue: str) -> tuple[int, int]:
    """What a tool without caching does: read everything, poll each job on its own.

    It reads the run directories only: the names the store's listing takes for runs
    (``RUN_ID_RE``), not the other entries of the runs root (``.notified/``, where the
    refresh claims finished groups' notifications; ``.arrays/``)."""
    states = {line.split(SEP, 2)[0]: line.split(SEP, 2)[1] for line in squeue.splitlines()}
    calls = 0
    n = 0
    for d in sorted(p for p in root.iterdir() if RUN_ID_RE.match(p.name)):
        json.loads((d / "spec.json").read_text())
        job = json.loads((d / "jobs.jsonl").read_text().splitlines()[-1])
        list(csv.DictReader(io.StringIO((d / "metrics.csv").read_text())))
        json.loads((d / "run.json").read_text())
        calls += 1  # one `scontrol show job` / `sacct -j` per job
        states.get(job["job_id"])
        n += 1
    return calls, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--queue", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--history", type=int, default=10000, help="ended runs (0: skip the case)")
    ap.add_argument("--active", type=int, default=20, help="active runs beside the history")
    ap.add_argument("--starts", type=int, default=3, help="app starts per kind")
    add_quick_option(ap)
    args = ap.parse_args()
    if args.quick:
        args.runs, args.queue, args.repeat = 100, 1000, 5
        args.history, args.active, args.starts = 200, 8, 1
    record = Record("refresh", quick=args.quick)
    active = set(range(1, args.runs + 1, 10))  # 10% of our runs still queued or running
    done = set(range(1, args.runs + 1)) - active
    with tempfile.TemporaryDirectory(prefix="bench-refresh-") as tmp:
        root = Path(tmp) / "runs"
        make_store(root, args.runs)
        ex = CannedSlurm(args.queue, active, done)
        cluster = Cluster(
            ex, SlurmScheduler(ex), RunStore(ex, str(root)), profile=Profile(), location="bench"
        )
        t0 = time.perf_counter()
        first = cluster.refresh()
        first_ms = (time.perf_counter() - t0) * 1e3
        first_calls = ex.calls
        cluster.refresh()  # the reads just after jobs end
        ours, calls, batches = [], [], []
        for _ in range(args.repeat):
            ex.calls = ex.batches = 0
            t0 = time.perf_counter()
            snap = cluster.refresh()
            ours.append((time.perf_counter() - t0) * 1e3)
            calls.append(ex.calls)
            batches.append(ex.batches)
        naive = []
        naive_calls = 0
        for _ in range(max(3, args.repeat // 4)):
            t0 = time.perf_counter()
            naive_calls, _ = naive_refresh(root, ex.squeue)
            naive.append((time.perf_counter() - t0) * 1e3)
    med, ref = statistics.median(ours), statistics.median(naive)
    assert len(snap.runs) == args.runs == len(first.runs)
    print(f"runs in store: {args.runs}, jobs in queue: {args.queue}, active runs: {len(active)}")
    print(f"first refresh (cold caches): {first_ms:.1f} ms, {first_calls} Slurm calls")
    print(f"refresh, steady state: median {med:.1f} ms, max {max(ours):.1f} ms (target <= 50 ms)")
    print(f"naive refresh (re-read all, per-job polls), same run: median {ref:.1f} ms")
    print(f"ratio ours/naive: {med / ref:.2f}")
    print(
        f"Slurm calls per refresh: ours {max(calls)} (target <= 2), "
        f"per-job polling {len(active)} active / {naive_calls} total"
    )
    print(f"executor batches (SSH round trips) per refresh: {max(batches)} (target 1)")
    ok = med <= 50 and max(calls) <= 2 and max(batches) == 1
    print(f"RESULT refresh_ms={med:.1f} {'PASS' if ok else 'FAIL'}")
    scale = f"{args.runs} runs, {args.queue} jobs in the queue"
    record.figure(
        "refresh, steady state, against a naive refresh",
        med,
        ref,
        unit="ms",
        note=f"median of {args.repeat}; {scale}; target <= 50 ms",
    )
    record.figure("first refresh (cold caches)", first_ms, None, unit="ms", note=scale)
    record.figure(
        "Slurm calls per refresh, against per-job polls of the active runs",
        max(calls),
        len(active),
        unit="calls",
        note="target <= 2 at any job count",
    )
    record.figure(
        "executor batches (SSH round trips) per refresh", max(batches), None, note="target 1"
    )
    if args.history:
        ok = bench_history(args.history, args.active, args.queue, args.starts, record) and ok
    record.save()
    sys.exit(0 if ok or args.quick else 1)


NEWEST = "newest-run-row"


def _history_cluster(root: Path, queue: int, active: set[int], done: set[int]) -> Any:
    # Our active jobs are in the queue, with ``queue`` other jobs after them.
    ex = CannedSlurm(max(active) + queue, active, done)
    cluster = Cluster(
        ex, SlurmScheduler(ex), RunStore(ex, str(root)), profile=Profile(), location="bench"
    )
    return cluster, ex


def bench_history(ended: int, n_active: int, queue: int, starts: int, record: Record) -> bool:
    """Job history: sacct ids per call, and app start to the first table."""
    active = set(range(ended + 1, ended + n_active + 1))
    done = set(range(1, ended + 1))
    just_ended = set(sorted(active)[: n_active // 4])
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        with_history, without = Path(tmp) / "history", Path(tmp) / "no-history"
        for root, recorded in ((with_history, True), (without, False)):
            make_store(root, ended, ended=recorded, name="hist")
            make_store(root, n_active - 1, first=ended + 1, name="active")
            # The table's first row: alone, since a group's members show when it is opened.
            make_store(root, 1, first=ended + n_active, name=NEWEST, grouped=False)
        results: dict[str, list[list[int]]] = {}
        for label, root in (("recorded ends", with_history), ("no end records", without)):
            cluster, ex = _history_cluster(root, queue, active, done)
            rounds = []
            for _ in range(2):  # start-up: list, then the first poll
                cluster.refresh()
            rounds.append(list(ex.sacct_ids))
            ex.sacct_ids.clear()
            ex.done |= just_ended  # some active jobs end
            ex.squeue = "\n".join(
                r for r in ex.squeue.splitlines() if r and int(r.split(SEP, 1)[0]) not in just_ended
            )
            for _ in range(3):
                ex.sacct_ids.clear()
                cluster.refresh()
                rounds.append(list(ex.sacct_ids))
            results[label] = rounds
        startup = _app_start_to_table(with_history, starts, Path(tmp))
    print()
    print(
        f"history: {ended} ended runs (end recorded), {n_active} active; "
        f"{len(just_ended)} of them end after start-up"
    )
    print("ids in each sacct call: [at start] [the poll that sees jobs end] [next] [next]")
    for label, rounds in results.items():
        print(f"  {label:15s} " + " ".join(str(r) for r in rounds))
    ours = results["recorded ends"]
    # Start-up is two refreshes (list, then poll): each asks about the active runs only.
    ids_ok = all(n == n_active for n in ours[0]) and ours[1] == [n_active]
    ids_ok = ids_ok and ours[2] == ours[3] == [n_active - len(just_ended)]
    real, bare = startup
    print(
        f"app start to first table, {ended + n_active} runs: median {real * 1000:.0f} ms "
        f"(target <= 1000 ms); bare Textual app, same run: {bare * 1000:.0f} ms "
        f"(ratio {real / bare:.2f})"
    )
    ok = ids_ok and real <= 1.0
    print(f"RESULT history_start_ms={real * 1000:.0f} {'PASS' if ok else 'FAIL'}")
    bare_store = results["no end records"]
    for k, when in ((0, "start-up"), (1, "the poll that sees jobs end")):
        record.figure(
            f"ids in sacct calls at {when}, against the store without end records",
            sum(ours[k]),
            sum(bare_store[k]),
            unit="ids",
            note=f"{ended} ended runs, {n_active} active; target: the active ones only",
        )
    record.figure(
        f"app start to first table, {ended + n_active} runs, against a bare Textual app",
        real * 1000,
        bare * 1000,
        unit="ms",
        note=f"median of {starts}; target <= 1000 ms",
    )
    return ok


def _app_start_to_table(root: Path, starts: int, tmp: Path) -> tuple[float, float]:
    """Median seconds from spawning the real app (local scheduler) on ``root`` until the
    newest run's row is on the terminal, and for a bare Textual app to its first text."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_tui import REAL_APP, start_times

    argv = [sys.executable, "-c", REAL_APP, str(root)]
    times = start_times(starts, tmp, lambda _: argv, NEWEST.encode())
    return statistics.median(times["real"]), statistics.median(times["bare"])


if __name__ == "__main__":
    main()
