"""Remote mode: round trips per refresh, refresh latency over SSH vs local, follow speed.

Needs root: it starts the private OpenSSH servers of ``tests/fixtures/sshd.py`` on
127.0.0.1 (a test user ``ddptest``, removed afterwards) and talks to them over loopback
with :class:`SSHExecutor`, next to :class:`LocalExecutor` reading the very same files.

A "refresh" is what the app does every few seconds: an ``squeue``-like and a
``sacct``-like command (here ``cat`` of captured outputs, so both sides pay only the
executor's overhead, not Slurm's) plus N file reads (a run's log tail each).

The facade part times what the app really calls, ``Cluster.refresh(follow=<one run>)``,
on one store of N run directories written in the real formats (spec.json, jobs.jsonl,
metrics.csv, progress.jsonl, run.json, a log), as runs mid-training leave them, so
every run's files are polled each time (the worst case: finished runs stop being read).
Both clusters share the store: one over ``LocalExecutor``, one over ``SSHExecutor``.
Scheduler ``local`` is the embedded LocalScheduler (its poll is in-process on both
sides, so the ratio is the executor's alone); ``--slurm`` adds SlurmScheduler on the
real test cluster (``tests/fixtures/slurm_cluster.py``, brought up unless already up;
the SSH side reaches it through an sshd whose sessions get ``SLURM_CONF``): then each
refresh also runs a real ``squeue`` and ``sacct -j <N ids>`` on both sides.

    sudo .venv/bin/python benchmarks/bench_remote.py [--iterations 30] [--json out.json]
        [--facade-runs 50,200] [--slurm]
    sudo .venv/bin/python benchmarks/bench_remote.py --quick   # seconds: 2 iterations, 2 MB
        # followed, 5 runs; with Slurm too when the test cluster can run here

A full run writes benchmarks/results/remote.json; a quick run prints the same lines and
writes nothing. When a process this one runs under holds the test sshd or the Slurm test
cluster (a pytest session's ``sshd_env`` / ``slurm_cluster``, whose test runs this
benchmark), they are borrowed as they are instead of waited for: that process lets go of
them only after this one ends (``sshd_test_environment``, ``slurm_test_cluster``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures import slurm_cluster as test_cluster
from tests.fixtures.sshd import (
    HOME,
    LOCK_PATH,
    SSHD,
    TARGET_ROLES,
    USER,
    SshdServer,
    SshEnv,
    skip_reason,
    sshd_environment,
)
from tests.integration.story import tiny_spec

from ddp_tui import __version__
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import Batch, BatchResult, Executor, FileRead, LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.backends.ssh import SSHExecutor
from ddp_tui.remote.backends.ssh.api import NoPrompter
from ddp_tui.remote.backends.ssh.batch import BatchHelper
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore, new_run_id
from record import Record, add_quick_option

SQUEUE = "".join(
    f"{1000 + i}|debug|ddp-run-{i}|ddptest|{'RUNNING' if i % 3 else 'PENDING'}|"
    f"0:{i:02d}|1:00:00|2|n[1-2]\n"
    for i in range(50)
)
SACCT = "".join(f"{900 + i}|COMPLETED|0:0|2026-11-21T09:{i:02d}:00|00:05:00\n" for i in range(20))


class AcceptAll(NoPrompter):
    """The benchmark's prompter: trusts the private test server's key, knows no secrets."""

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        return True


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


METRICS_HEADER = (
    "epoch,train_loss,train_acc,val_loss,val_acc,val_mae,val_rmse,lr,epoch_time_sec,"
    "throughput_samples_per_sec,data_load_time_sec,compute_time_sec,gpu_mem_peak_mib,"
    "gpu_util_avg,cpu_util_avg,world_size,mfu\n"
)


def make_run_store(root: Path, count: int) -> list[str]:
    """``count`` run directories of runs in their third epoch, in the real file formats
    (job ids 900000+: unknown to any scheduler, so no run is ever final)."""
    root.mkdir(parents=True)
    spec = tiny_spec(name="bench", nodes=2, partition="debug").to_dict()
    ids = []
    for i in range(count):
        run_id = new_run_id(f"bench{i}")
        run = root / run_id
        run.mkdir()
        job = 900000 + i
        doc: dict[str, Any] = {"spec": spec, "ddp_tui_version": __version__}
        doc.update({"created_at": "2026-11-21T09:00:00Z", "group": None, "run_id": run_id})
        (run / "spec.json").write_text(json.dumps(doc, indent=2) + "\n")
        (run / "job.sbatch").write_text("#!/bin/bash\necho bench\n")
        attempt = {"job_id": str(job), "scheduler": "slurm", "retry_of": None, "attempt": 1}
        (run / "jobs.jsonl").write_text(json.dumps(attempt) + "\n")
        (run / "metrics.csv").write_text(
            METRICS_HEADER
            + "".join(
                f"{e},{1 / e:.4f},0.{e}5,{1.1 / e:.4f},0.{e}1,,,0.05,2.5,1600,0.1,2.3,,,55,2,\n"
                for e in (1, 2)
            )
        )
        (run / "progress.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "time": 1.7e9 + s,
                        "epoch": 3,
                        "step": s,
                        "steps_per_epoch": 16,
                        "loss": 0.3,
                        "samples_per_sec": 1600.0,
                    }
                )
                + "\n"
                for s in range(1, 9)
            )
        )
        (run / "run.json").write_text(
            json.dumps(
                {
                    "state": "running",
                    "world_size": 2,
                    "backend": "gloo",
                    "hosts": ["n1", "n2"],
                    "job_id": str(job),
                    "epochs": 4,
                }
            )
        )
        (run / f"slurm-{job}.out").write_text(
            "".join(f"epoch 3 step {s} loss 0.{s:04d}\n" for s in range(120))
        )
        (run / f"slurm-{job}.err").write_text("")
        ids.append(run_id)
    return sorted(ids)


class CountingLocal(LocalExecutor):
    """LocalExecutor that counts batches (the local side's "round trips")."""

    def __init__(self) -> None:
        self.batches = 0

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        self.batches += 1
        return super().run_batch(batch, timeout=timeout)


def bench_facade(
    env: SshEnv,
    make_ssh: Callable[[str], SSHExecutor],
    sizes: list[int],
    iterations: int,
    schedulers: dict[str, str],
) -> list[dict[str, Any]]:
    """``Cluster.refresh(follow=first run)`` over SSH and locally on the same store.

    ``schedulers`` maps "local"/"slurm" to the SSH alias to use for it."""
    rows = []
    counter = ExecCounter()
    try:
        for kind, alias in schedulers.items():
            for n in sizes:
                root = env.home / f"facade-{kind}-{n}"
                shutil.rmtree(root, ignore_errors=True)
                ids = make_run_store(root, n)
                chown_tree(root, env.user)
                with contextlib.ExitStack() as stack:
                    rows.append(
                        _bench_facade_one(
                            stack, kind, alias, root, ids, make_ssh, counter, iterations
                        )
                    )
                shutil.rmtree(root, ignore_errors=True)
    finally:
        counter.restore()
    return rows


def _bench_facade_one(
    stack: contextlib.ExitStack,
    kind: str,
    alias: str,
    root: Path,
    ids: list[str],
    make_ssh: Callable[[str], SSHExecutor],
    counter: ExecCounter,
    iterations: int,
) -> dict[str, Any]:
    local_ex = CountingLocal()
    ssh_ex = make_ssh(alias)
    stack.callback(ssh_ex.close)

    def scheduler(ex: Executor) -> Scheduler:
        if kind == "slurm":
            return SlurmScheduler(ex)
        state = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-local-sched-"))
        return LocalScheduler(state)

    profile = Profile()
    clusters = {
        "local": Cluster(
            local_ex,
            scheduler(local_ex),
            RunStore(local_ex, str(root)),
            profile=profile,
            location="local",
        ),
        "ssh": Cluster(
            ssh_ex,
            scheduler(ssh_ex),
            RunStore(ssh_ex, str(root)),
            profile=profile,
            location=ssh_ex.description,
        ),
    }
    follow = ids[0]
    shown: dict[str, list[tuple[object, ...]]] = {}
    for name, c in clusters.items():
        c.refresh()  # first sight: spec.json, jobs.jsonl and every file from byte 0
        c.refresh(follow=follow)  # opening the run reads its log
        snap = c.refresh(follow=follow)
        assert snap.error is None, f"{name}: {snap.error}"
        shown[name] = [
            (v.run_id, v.state, v.epochs_done, v.last_train_loss, v.hosts) for v in snap.runs
        ]
    assert shown["local"] == shown["ssh"], "the two clusters show different runs"
    assert len(shown["local"]) == len(ids)

    steady = 5
    trips, execs, batches = ssh_ex.round_trips, counter.count, local_ex.batches
    calls = 0
    for _ in range(steady):
        calls = clusters["ssh"].refresh(follow=follow).scheduler_calls
        clusters["local"].refresh(follow=follow)
    row: dict[str, Any] = {
        "scheduler": kind,
        "runs": len(ids),
        "scheduler_commands_per_refresh": calls,
        "ssh_round_trips_per_refresh": (ssh_ex.round_trips - trips) / steady,
        "ssh_execs_per_refresh": (counter.count - execs) / steady,
        "local_batches_per_refresh": (local_ex.batches - batches) / steady,
    }
    samples: dict[str, list[float]] = {name: [] for name in clusters}
    for _ in range(iterations):  # interleaved: machine noise hits both alike
        for name, c in clusters.items():
            start = time.perf_counter()
            c.refresh(follow=follow)
            samples[name].append((time.perf_counter() - start) * 1000)
    for name, values in samples.items():
        row[f"{name}_ms"] = round(statistics.median(values), 2)
        row[f"{name}_p90_ms"] = round(sorted(values)[int(0.9 * (len(values) - 1))], 2)
    row["ratio"] = round(row["ssh_ms"] / row["local_ms"], 2)
    return row


def lock_busy(path: Path) -> bool:
    """Whether another process holds the machine-wide flock ``path`` now."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also lets go of the lock if it was taken
    return False


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def _ancestors() -> list[int]:
    """The processes this one runs under, nearest first (not init)."""
    out = []
    pid = os.getppid()
    while pid > 1:
        out.append(pid)
        try:
            pid = _parent_pid(pid)
        except OSError:
            break
    return out


def held_by_ancestor(path: Path) -> int | None:
    """The process this one runs under that holds the flock ``path``, if one does.

    Waiting for that lock would wait for ever (its holder waits for this process), so the
    callers borrow what it guards instead. The holder is the busy lock's ancestor that has
    ``path`` open (the fixtures open it only to hold it, and no test runs before they do)."""
    if not lock_busy(path):
        return None
    target = os.path.realpath(path)
    for pid in _ancestors():
        fds = Path(f"/proc/{pid}/fd")
        with contextlib.suppress(OSError):
            for fd in fds.iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == target:
                        return pid
    return None


@contextlib.contextmanager
def slurm_test_cluster() -> Iterator[test_cluster.SlurmCluster]:
    """The Slurm test cluster: the one up already (left up), else a fresh one (torn down);
    SLURM_CONF points at it meanwhile.

    "Up already": brought up by hand (``slurm_cluster.py up``), or held by a process this
    one runs under (a pytest session's ``slurm_cluster`` fixture whose test runs this
    benchmark): that one is used without its lock, which would never come free."""
    reason = test_cluster.skip_reason()
    if reason:
        raise RuntimeError(reason)
    with contextlib.ExitStack() as stack:
        holder = held_by_ancestor(test_cluster.LOCK_PATH)
        if holder is not None:
            cluster = test_cluster.current()
            if cluster is None or not cluster.healthy():
                raise RuntimeError(
                    f"process {holder}, which this one runs under, holds the Slurm test "
                    f"cluster's lock ({test_cluster.LOCK_PATH}), but no healthy cluster is up"
                )
            reuse = True
        else:
            if lock_busy(test_cluster.LOCK_PATH):
                print(
                    f"waiting for another process to let go of the Slurm test cluster "
                    f"({test_cluster.LOCK_PATH})",
                    file=sys.stderr,
                    flush=True,
                )
            stack.enter_context(test_cluster.cluster_lock())
            cluster = test_cluster.current()
            reuse = cluster is not None and test_cluster.started_by_hand() and cluster.healthy()
            if not reuse:
                cluster = test_cluster.bring_up()
        assert cluster is not None
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            yield cluster
        finally:
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
            if not reuse:
                test_cluster.tear_down(cluster)


def _server_from_config(name: str, config: Path, roles: tuple[str, ...]) -> SshdServer:
    """A running server of tests/fixtures/sshd.py, described by its config (its ``Port``
    lines in ``roles`` order, its ``HostKey`` lines); not ours to stop."""
    lines = config.read_text().splitlines()
    ports = [int(ln.split()[1]) for ln in lines if ln.startswith("Port ")]
    keys = [Path(ln.split(None, 1)[1]) for ln in lines if ln.startswith("HostKey ")]
    return SshdServer(
        name, dict(zip(roles, ports, strict=True)), config, config.parent / f"{name}.log", keys
    )


@contextlib.contextmanager
def _borrowed_sshd(holder: int) -> Iterator[SshEnv]:
    """The environment that ``holder`` runs (its target sshd is its child): the user, the
    client key and the servers as they are. What this process adds (``start_server``, a
    ``workdir``) it removes; everything else stays for the holder to tear down."""
    root: Path | None = None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # sshd retitles itself ("sshd: /usr/sbin/sshd -D -f <config> ... [listener]").
            words = Path(f"/proc/{entry}/cmdline").read_bytes().decode().replace("\0", " ")
            argv = words.split()
            config = argv[argv.index("-f") + 1]
            if (
                SSHD in words
                and config.endswith("/target_sshd_config")
                and _parent_pid(int(entry)) == holder
            ):
                root = Path(config).parent
                break
    if root is None:
        raise RuntimeError(
            f"process {holder}, which this one runs under, holds the test sshd's lock "
            f"({LOCK_PATH}), but runs no target sshd of tests/fixtures/sshd.py"
        )
    env = SshEnv(
        root=root,
        user=USER,
        password="",  # not on disk; the benchmark logs in with the key
        home=HOME,
        key=root / "id_client",
        encrypted_key=root / "id_encrypted",
        encrypted_passphrase="",
        wrong_key=root / "id_wrong",
        target=_server_from_config("target", root / "target_sshd_config", TARGET_ROLES),
        jump=_server_from_config("jump", root / "jump_sshd_config", ("main",)),
    )
    try:
        yield env
    finally:
        for server in env._extra:
            server.stop()
            for path in (server.config, server.log, *server.host_keys):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{path}.pub").unlink()


@contextlib.contextmanager
def sshd_test_environment() -> Iterator[SshEnv]:
    """The test sshd (tests/fixtures/sshd.py): a fresh environment, torn down afterwards;
    or, when a process this one runs under holds it (a pytest session's ``sshd_env`` whose
    test runs this benchmark), that one, borrowed (:func:`_borrowed_sshd`): its lock would
    never come free."""
    holder = held_by_ancestor(LOCK_PATH)
    if holder is not None:
        with _borrowed_sshd(holder) as env:
            yield env
        return
    if lock_busy(LOCK_PATH):
        print(
            f"waiting for another process to let go of the test sshd ({LOCK_PATH})",
            file=sys.stderr,
            flush=True,
        )
    with sshd_environment() as env:
        yield env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=None, help="30; 2 with --quick")
    parser.add_argument("--follow-mb", type=int, default=None, help="64; 2 with --quick")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--facade-runs",
        default=None,
        help="run directories in the facade benchmark (50,200; 5 with --quick)",
    )
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="facade benchmark also with the real Slurm cluster (--quick: whenever the "
        "test cluster can run here)",
    )
    add_quick_option(parser)
    args = parser.parse_args()
    quick = args.quick
    if args.iterations is None:
        args.iterations = 2 if quick else 30
    if args.follow_mb is None:
        args.follow_mb = 2 if quick else 64
    if args.facade_runs is None:
        args.facade_runs = "5" if quick else "50,200"
    record = Record("remote", quick=quick)
    sizes = [int(x) for x in args.facade_runs.split(",") if x.strip()]
    reason = skip_reason()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    if quick and not args.slurm:
        slurm_reason = test_cluster.skip_reason()
        if slurm_reason is None:
            args.slurm = True
        else:
            print(f"the Slurm part skipped: {slurm_reason}")
    with contextlib.ExitStack() as outer:
        slurm = outer.enter_context(slurm_test_cluster()) if args.slurm else None
        env = outer.enter_context(sshd_test_environment())
        workdir = env.workdir()
        outer.callback(shutil.rmtree, workdir, True)  # a borrowed environment stays
        config = workdir / "config"
        blocks = [env.host_block("bench", env.target)]
        schedulers = {"local": "bench"}
        if slurm is not None:
            # Named for this benchmark: a borrowed environment may run a "login" of its own.
            login = env.start_server("bench-login", f"SetEnv SLURM_CONF={slurm.conf}")
            blocks.append(env.host_block("login", login))
            schedulers["slurm"] = "login"
        config.write_text("\n".join(blocks))

        def make(helper: BatchHelper, alias: str = "bench") -> SSHExecutor:
            return SSHExecutor(
                alias,
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
            facade = bench_facade(
                env, lambda alias: make("auto", alias), sizes, args.iterations, schedulers
            )
        finally:
            for ex in ssh.values():
                ex.close()
    results = {
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "connect_ms": connect_ms,
        "refresh": refresh,
        "follow_sftp": follow,
        "facade_refresh": facade,
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
    print(
        "Cluster.refresh(follow=one run), N runs mid-training, both clusters on one store; "
        f"median (p90) ms over {args.iterations} interleaved runs"
    )
    print(f"{'scheduler':>9} {'N':>4} {'local':>16} {'ssh':>16} {'ratio':>6}  per refresh")
    for row in facade:
        print(
            f"{row['scheduler']:>9} {row['runs']:>4} "
            f"{row['local_ms']:>7} ({row['local_p90_ms']:>6}) "
            f"{row['ssh_ms']:>7} ({row['ssh_p90_ms']:>6}) {row['ratio']:>5}x  "
            f"{row['ssh_round_trips_per_refresh']:g} SSH round trip(s), "
            f"{row['ssh_execs_per_refresh']:g} exec, "
            f"{row['scheduler_commands_per_refresh']} scheduler command(s); "
            f"local: {row['local_batches_per_refresh']:g} batch(es)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    record_results(record, results, args.iterations)
    record.save()
    return 0


def record_results(record: Record, results: dict[str, Any], iterations: int) -> None:
    """The figures of :func:`main`'s table: each SSH side against the local one."""
    record.figure("connect + authenticate", results["connect_ms"], unit="ms")
    for row in results["refresh"]:
        for name in ("ssh_persistent", "ssh_oneshot_python", "ssh_oneshot_sh"):
            record.figure(
                f"refresh batch, {row['reads']} reads, {name} against local",
                row[f"{name}_ms"],
                row["local_ms"],
                unit="ms",
                note=f"median of {iterations}; {row[f'{name}_round_trips_per_refresh']} "
                f"round trip(s), {row[f'{name}_execs_per_refresh']} exec(s) per refresh",
            )
    for f in results["follow_sftp"]:
        record.figure(
            f"follow over SFTP, {f['poll_bytes'] // 1024} KiB per poll",
            f["mb_per_s"],
            unit="MB/s",
            note=f"{f['megabytes']} MB, {f['polls']} polls, {f['ms_per_poll']} ms each",
        )
    for row in results["facade_refresh"]:
        what = f"Cluster.refresh, {row['scheduler']} scheduler, {row['runs']} runs"
        record.figure(
            f"{what}, ssh against local",
            row["ssh_ms"],
            row["local_ms"],
            unit="ms",
            note=f"median of {iterations}; p90 {row['ssh_p90_ms']} against "
            f"{row['local_p90_ms']} ms",
        )
        record.figure(
            f"{what}, SSH round trips per refresh",
            row["ssh_round_trips_per_refresh"],
            unit="round trips",
            note=f"{row['scheduler_commands_per_refresh']} scheduler command(s)",
        )


if __name__ == "__main__":
    sys.exit(main())
