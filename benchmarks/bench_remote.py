"""Remote mode: round trips per refresh, refresh latency over SSH vs local, follow speed.

Needs root: it starts the private OpenSSH servers of ``tests/fixtures/sshd.py`` on
127.0.0.1 (a test user ``ddptest``, removed afterwards) and talks to them over loopback
with :class:`SSHExecutor`, next to :class:`LocalExecutor` reading the very same files.

A "refresh" is what the app does every few seconds: an ``squeue``-like and a
``sacct``-like command (here ``cat`` of captured outputs, so both sides pay only the
executor's overhead, not Slurm's) plus N file reads (a run's log tail each).

    sudo .venv/bin/python benchmarks/bench_remote.py [--iterations 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.sshd import SshEnv, skip_reason, sshd_environment

from ddp_tui.remote.executor import Batch, Executor, FileRead, LocalExecutor
from ddp_tui.remote.ssh import SSHExecutor
from ddp_tui.remote.ssh_batch import BatchHelper

SQUEUE = "".join(
    f"{1000 + i}|debug|ddp-run-{i}|ddptest|{'RUNNING' if i % 3 else 'PENDING'}|"
    f"0:{i:02d}|1:00:00|2|n[1-2]\n"
    for i in range(50)
)
SACCT = "".join(f"{900 + i}|COMPLETED|0:0|2026-11-21T09:{i:02d}:00|00:05:00\n" for i in range(20))


class AcceptAll:
    """The benchmark's prompter: trusts the private test server's key."""

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        return True

    def ask_secret(self, title: str, prompt: str) -> str | None:
        return None

    def keyboard_interactive(
        self, title: str, instructions: str, prompts: list[tuple[str, bool]]
    ) -> list[str] | None:
        return None


class ExecCounter:
    """Counts real SSH ``exec`` requests (wraps paramiko's Channel.exec_command)."""

    def __init__(self) -> None:
        self.count = 0
        self._original = paramiko.Channel.exec_command
        counter = self

        def counting(chan: paramiko.Channel, command: str | bytes) -> None:
            counter.count += 1
            counter._original(chan, command)

        setattr(paramiko.Channel, "exec_command", counting)  # noqa: B010

    def restore(self) -> None:
        setattr(paramiko.Channel, "exec_command", self._original)  # noqa: B010


def chown_tree(root: Path, user: str) -> None:
    shutil.chown(root, user, user)
    for path in root.rglob("*"):
        shutil.chown(path, user, user)


def make_runs(root: Path, count: int) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "squeue.txt").write_text(SQUEUE)
    (root / "sacct.txt").write_text(SACCT)
    logs = []
    for i in range(count):
        run = root / f"run{i:03d}"
        run.mkdir(exist_ok=True)
        log = run / "slurm-1.out"
        log.write_text("".join(f"epoch 1 step {s} loss 0.{s:04d}\n" for s in range(120)))
        logs.append(log)
    return logs


def refresh_batch(root: Path, logs: list[Path]) -> Batch:
    return Batch(
        commands=[["cat", str(root / "squeue.txt")], ["cat", str(root / "sacct.txt")]],
        reads=[FileRead(str(log)) for log in logs],
    )


def timed(fn: Callable[[], object], iterations: int) -> list[float]:
    fn()  # warm-up (starts the persistent helper on the SSH side)
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def bench_refresh(
    env: SshEnv, ssh: dict[str, SSHExecutor], iterations: int
) -> list[dict[str, Any]]:
    local = LocalExecutor()
    root = env.home / "bench"
    logs = make_runs(root, 100)
    chown_tree(root, env.user)
    rows = []
    counter = ExecCounter()
    try:
        for n in (1, 10, 100):
            batch = refresh_batch(root, logs[:n])
            expected = local.run_batch(batch)
            row: dict[str, Any] = {"reads": n}
            for name, ex in ssh.items():
                assert ex.run_batch(batch) == expected, f"{name}: results differ from local"
                before_exec, before_trips = counter.count, ex.round_trips
                ex.run_batch(batch)
                row[f"{name}_execs_per_refresh"] = counter.count - before_exec
                row[f"{name}_round_trips_per_refresh"] = ex.round_trips - before_trips
            # Interleave the executors so machine noise hits them alike.
            samples: dict[str, list[float]] = {"local": []}
            executors: dict[str, Executor] = {"local": local, **ssh}
            for name in ssh:
                samples[name] = []
            for _ in range(iterations):
                for name, ex2 in executors.items():
                    samples[name] += timed(functools.partial(ex2.run_batch, batch), 1)
            for name, values in samples.items():
                row[f"{name}_ms"] = round(statistics.median(values), 2)
            for name in ssh:
                row[f"{name}_ratio"] = round(row[f"{name}_ms"] / row["local_ms"], 2)
            rows.append(row)
    finally:
        counter.restore()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def bench_follow(env: SshEnv, ex: SSHExecutor, total_mb: int, poll_bytes: int) -> dict[str, Any]:
    """A writer appends 64 KiB chunks of log lines as fast as it can; the reader follows
    it over SFTP with ``read_range(path, offset, poll_bytes)`` until it has everything."""
    path = env.home / "follow.log"
    path.write_bytes(b"")
    shutil.chown(path, env.user, env.user)
    total = total_mb * 1024 * 1024
    chunk = (b"x" * 127 + b"\n") * 512  # 64 KiB of log lines

    def writer() -> None:
        with open(path, "ab") as fh:
            written = 0
            while written < total:
                fh.write(chunk)
                fh.flush()
                written += len(chunk)

    thread = threading.Thread(target=writer)
    offset = polls = 0
    start = time.perf_counter()
    thread.start()
    while offset < total:
        data = ex.read_range(str(path), offset, poll_bytes)
        offset += len(data)
        polls += 1
    elapsed = time.perf_counter() - start
    thread.join()
    path.unlink()
    return {
        "megabytes": total_mb,
        "poll_bytes": poll_bytes,
        "seconds": round(elapsed, 3),
        "mb_per_s": round(total_mb / elapsed, 1),
        "polls": polls,
        "ms_per_poll": round(elapsed * 1000 / polls, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--follow-mb", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    reason = skip_reason()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with sshd_environment() as env:
        workdir = env.workdir()
        config = workdir / "config"
        config.write_text(env.host_block("bench", env.target))

        def make(helper: BatchHelper) -> SSHExecutor:
            return SSHExecutor(
                "bench",
                prompter=AcceptAll(),
                ssh_config_path=str(config),
                known_hosts_path=str(workdir / "known_hosts"),
                batch_helper=helper,
            )

        ssh = {
            "ssh_persistent": make("auto"),
            "ssh_oneshot_python": make("python"),
            "ssh_oneshot_sh": make("sh"),
        }
        try:
            start = time.perf_counter()
            ssh["ssh_persistent"].connect()
            connect_ms = round((time.perf_counter() - start) * 1000, 1)
            refresh = bench_refresh(env, ssh, args.iterations)
            follow = [
                bench_follow(env, ssh["ssh_persistent"], args.follow_mb, poll)
                for poll in (1024 * 1024, 64 * 1024)
            ]
        finally:
            for ex in ssh.values():
                ex.close()
    results = {
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "connect_ms": connect_ms,
        "refresh": refresh,
        "follow_sftp": follow,
    }
    print(
        f"connect + authenticate: {connect_ms} ms  (cpus {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f})"
    )
    print(
        "refresh = squeue-like + sacct-like command + N log reads; median ms over "
        f"{args.iterations} interleaved runs"
    )
    header = f"{'N':>4} {'local':>8} " + " ".join(f"{k:>24}" for k in ssh)
    print(header)
    for row in refresh:
        cells = " ".join(
            f"{row[f'{k}_ms']:>8} ms {row[f'{k}_ratio']:>5}x "
            f"{row[f'{k}_round_trips_per_refresh']}rt/{row[f'{k}_execs_per_refresh']}ex"
            for k in ssh
        )
        print(f"{row['reads']:>4} {row['local_ms']:>5} ms {cells}")
    for f in follow:
        print(
            f"follow over SFTP, {f['poll_bytes'] // 1024} KiB per poll: {f['megabytes']} MB in "
            f"{f['seconds']} s = {f['mb_per_s']} MB/s ({f['polls']} polls, "
            f"{f['ms_per_poll']} ms each)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
