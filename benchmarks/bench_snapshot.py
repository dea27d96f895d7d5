"""The project snapshot at submit: manifest + upload, locally and over SSH.

A generated project of about 50 MB (about 2,000 small ``.py`` files in nested packages
and a few large data files) is snapshotted the way ``create_run`` does it:
``build_manifest`` (a plain directory walk, and again as a git repository, where the
list comes from ``git ls-files``) then one ``Executor.upload_files``. Each is timed next
to a reference measured side by side in the same run, interleaved:

- locally (``LocalExecutor``) against ``shutil.copytree`` of the same directory (both in
  ``/dev/shm`` unless ``--dir`` says otherwise);
- over SSH (``SSHExecutor`` to the private loopback sshd of ``tests/fixtures/sshd.py``,
  needs root) against ``tar c -C PROJECT . | ssh HOST 'tar x'`` with the OpenSSH client
  on an already open multiplexed connection (ControlMaster), so neither side pays for a
  login. ``--no-ssh`` (or not root) skips this part.

The run directory's extra cost is also reported: bytes sent (the tar stream) against
the project's bytes, and SSH commands per upload (must be 1).

    .venv/bin/python benchmarks/bench_snapshot.py [--mb 50] [--small 2000]
        [--iterations 3] [--local-iterations 7] [--no-ssh] [--dir DIR] [--json out.json]
    .venv/bin/python benchmarks/bench_snapshot.py --quick   # 2 MB, 100 files, once: seconds

A full run writes benchmarks/results/snapshot.json. A quick run prints the same lines and
writes nothing; it skips the SSH part, saying why, when another process holds the test
sshd (tests/fixtures/sshd.py's lock, e.g. a pytest session's ``sshd_env``) rather than wait
for it; a full run waits.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.sshd import LOCK_PATH, SshEnv, skip_reason, sshd_environment

from ddp_tui.remote.backends.executor import Executor, LocalExecutor
from ddp_tui.remote.backends.ssh import SSHExecutor
from ddp_tui.remote.backends.ssh.api import NoPrompter
from ddp_tui.remote.store.snapshot import MB, SnapshotManifest, build_manifest
from record import Record, add_quick_option

LARGE_FILES = 4


class AcceptAll(NoPrompter):
    """The benchmark's prompter: trusts the private test server's key, knows no secrets."""

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        return True


def make_project(root: Path, total_mb: int, small: int) -> int:
    """``small`` source files (1-9 kB, in packages of 40) and ``LARGE_FILES`` data files
    making up the rest of ``total_mb``; returns the bytes written."""
    rng = random.Random(11)
    written = 0
    for i in range(small):
        pkg = root / "src" / f"pkg{i // 40:02d}" / ("sub" if i % 3 == 0 else "")
        pkg.mkdir(parents=True, exist_ok=True)
        lines = rng.randint(20, 220)
        text = "".join(f"VALUE_{i}_{n} = {rng.random()!r}  # padding\n" for n in range(lines))
        (pkg / f"mod{i:04d}.py").write_text(text)
        written += len(text)
    rest = max(0, total_mb * MB - written)
    data = root / "data"
    data.mkdir()
    for i in range(LARGE_FILES):
        size = rest // LARGE_FILES
        (data / f"shard{i}.bin").write_bytes(os.urandom(size))
        written += size
    (root / "train.py").write_text("print('train')\n")
    return written + len("print('train')\n")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleave(
    ours: Callable[[], object],
    reference: Callable[[], object],
    iterations: int,
    between: Callable[[], None],
) -> tuple[list[float], list[float]]:
    """Alternate the two (ours first on even rounds), ``between`` each untimed."""
    a: list[float] = []
    b: list[float] = []
    for i in range(iterations):
        pair = [(ours, a), (reference, b)]
        for fn, out in pair if i % 2 == 0 else reversed(pair):
            out.append(timed(fn))
            between()
    return a, b


def row(name: str, ours: list[float], ref: list[float], **extra: Any) -> dict[str, Any]:
    mo, mr = statistics.median(ours), statistics.median(ref)
    rounded = {"ours_s": round(mo, 3), "reference_s": round(mr, 3), "ratio": round(mo / mr, 2)}
    return {"case": name, **rounded, **extra}


def snapshot_upload(project: Path, executor: Executor, dst: str) -> tuple[SnapshotManifest, int]:
    manifest = build_manifest(project, max_bytes=1 << 40)
    return manifest, executor.upload_files(manifest.files, dst)


def bench_local(project: Path, scratch: Path, iterations: int) -> list[dict[str, Any]]:
    ex = LocalExecutor()
    dst = scratch / "dst"

    def clear() -> None:
        shutil.rmtree(dst, ignore_errors=True)

    # The reference skips .git: the object store is not part of the project's files.
    no_git = shutil.ignore_patterns(".git")
    rows = []
    for kind in ("plain", "git"):
        ours, ref = interleave(
            lambda: snapshot_upload(project, ex, str(dst)),
            lambda: shutil.copytree(project, dst, ignore=no_git),
            iterations,
            clear,
        )
        rows.append(row(f"local, {kind} directory", ours, ref, reference="shutil.copytree"))
        manifest_s = [
            timed(lambda: build_manifest(project, max_bytes=1 << 40)) for _ in range(iterations)
        ]
        rows.append(
            {"case": f"  of which manifest, {kind}", "ours_s": statistics.median(manifest_s)}
        )
        if kind == "plain":
            make_git(project)
    return rows


def make_git(project: Path) -> None:
    git = ["git", "-C", str(project), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (project / ".gitignore").write_text("*.log\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "bench"], check=True)


@contextmanager
def ssh_setup(env: SshEnv) -> Iterator[tuple[SSHExecutor, list[str]]]:
    workdir = env.workdir()
    known = env.known_hosts(workdir / "known_hosts", (env.target, "main"))
    control = workdir / "cm-%C"
    config = workdir / "config"
    config.write_text(
        env.host_block(
            "bench",
            env.target,
            UserKnownHostsFile=str(known),
            StrictHostKeyChecking="yes",
            ControlMaster="auto",
            ControlPath=str(control),
            ControlPersist="60",
        )
    )
    ssh = ["ssh", "-F", str(config), "bench"]
    ex = SSHExecutor(
        "bench", prompter=AcceptAll(), ssh_config_path=str(config), known_hosts_path=str(known)
    )
    try:
        ex.connect()
        subprocess.run([*ssh, "true"], check=True)  # opens the multiplexed master
        yield ex, ssh
    finally:
        ex.close()
        subprocess.run([*ssh[:-1], "-O", "exit", "bench"], capture_output=True, check=False)


def bench_ssh(env: SshEnv, project: Path, iterations: int) -> list[dict[str, Any]]:
    remote = f"bench-snapshot-{os.getpid()}"
    with ssh_setup(env) as (ex, ssh):

        def reference() -> None:
            tar = subprocess.Popen(
                ["tar", "-c", "-f", "-", "--exclude=./.git", "-C", str(project), "."],
                stdout=subprocess.PIPE,
            )
            cmd = f"mkdir -p {remote} && tar -x -f - -C {remote}"
            subprocess.run([*ssh, cmd], stdin=tar.stdout, check=True)
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait() != 0:
                raise RuntimeError("tar -c failed")

        def clear() -> None:
            ex.remove_tree(f"~/{remote}")

        execs = ex.exec_count
        manifest, sent = snapshot_upload(project, ex, f"~/{remote}")  # also the warm-up
        commands = ex.exec_count - execs
        clear()
        ours, ref = interleave(
            lambda: snapshot_upload(project, ex, f"~/{remote}"), reference, iterations, clear
        )
        return [
            row(
                "ssh, git directory",
                ours,
                ref,
                reference="tar c | ssh (ControlMaster) tar x",
                ssh_commands_per_upload=commands,
                bytes_sent=sent,
                project_bytes=manifest.total_bytes,
                mb_per_s=round(manifest.total_bytes / MB / statistics.median(ours), 1),
                reference_mb_per_s=round(manifest.total_bytes / MB / statistics.median(ref), 1),
            )
        ]


def sshd_held() -> bool:
    """Whether another process holds the test sshd's lock now (sshd_environment() would
    wait for it to let go: a pytest session holds it until it ends)."""
    if not LOCK_PATH.exists():
        return False
    with open(LOCK_PATH) as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return False


def record_rows(record: Record, rows: list[dict[str, Any]], note: str) -> None:
    for r in rows:
        name = r["case"].strip()
        if "reference_s" not in r:
            record.figure(name, r["ours_s"], None, unit="s", note=note)
            continue
        against = f"{name}, against {r['reference']}"
        record.figure(against, r["ours_s"], r["reference_s"], unit="s", note=note)
        if "bytes_sent" in r:
            record.figure(
                f"{name}, throughput against {r['reference']}",
                r["mb_per_s"],
                r["reference_mb_per_s"],
                unit="MB/s",
                note=note,
            )
            commands = r["ssh_commands_per_upload"]
            record.figure(f"{name}, SSH commands per upload", commands, None, note="must be 1")
            record.figure(
                f"{name}, tar stream bytes against the project's bytes",
                r["bytes_sent"] / MB,
                r["project_bytes"] / MB,
                unit="MB",
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="project size")
    parser.add_argument("--small", type=int, default=2000, help="small source files")
    parser.add_argument("--iterations", type=int, default=3, help="rounds over SSH")
    parser.add_argument("--local-iterations", type=int, default=7, help="rounds locally")
    parser.add_argument("--no-ssh", action="store_true", help="local only")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
        help="where the project and the local copies go (default: /dev/shm, a tmpfs, so "
        "the local ratio is the code's and not a busy disk's)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_quick_option(parser)
    args = parser.parse_args()
    if args.quick:
        args.mb, args.small, args.iterations, args.local_iterations = 2, 100, 1, 1
    record = Record("snapshot", quick=args.quick)
    ssh_reason = "--no-ssh" if args.no_ssh else skip_reason()
    if ssh_reason is None and sshd_held():
        if args.quick:
            ssh_reason = f"another process holds the test sshd ({LOCK_PATH})"
        else:
            print(f"waiting for another process to let go of the test sshd ({LOCK_PATH})")
    with ExitStack() as stack:
        scratch = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-snap-", dir=args.dir))
        )
        project = scratch / "project"
        project.mkdir()
        start = time.perf_counter()
        size = make_project(project, args.mb, args.small)
        files = sum(1 for p in project.rglob("*") if p.is_file())
        made = time.perf_counter() - start
        print(
            f"project: {files} files, {size / MB:.1f} MB (made in {made:.1f} s); "
            f"in {scratch.parent}; cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}; "
            f"median of {args.local_iterations} (local) and {args.iterations} (ssh) "
            "interleaved runs"
        )
        rows = bench_local(project, scratch, args.local_iterations)
        if ssh_reason is None:
            env = stack.enter_context(sshd_environment())
            rows += bench_ssh(env, project, args.iterations)
    for r in rows:
        if "reference_s" not in r:
            print(f"{r['case']:<26} {r['ours_s']:>7.3f} s")
            continue
        line = (
            f"{r['case']:<26} {r['ours_s']:>7.3f} s   {r['reference']}: "
            f"{r['reference_s']:.3f} s   ratio {r['ratio']:.2f}"
        )
        if "bytes_sent" in r:
            line += (
                f"\n{'':<26} {r['mb_per_s']} MB/s vs {r['reference_mb_per_s']} MB/s; "
                f"{r['ssh_commands_per_upload']} SSH command per upload; tar stream "
                f"{r['bytes_sent'] / MB:.1f} MB for {r['project_bytes'] / MB:.1f} MB of files"
            )
        print(line)
    if ssh_reason is not None:
        print(f"ssh part skipped: {ssh_reason}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    record_rows(
        record,
        rows,
        f"{files} files, {size / MB:.1f} MB; median of {args.local_iterations} (local) and "
        f"{args.iterations} (ssh) interleaved runs",
    )
    record.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
