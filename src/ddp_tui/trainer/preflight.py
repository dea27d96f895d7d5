"""``python -m ddp_tui.trainer.preflight``: check that the world really works, before training.

It forms the process group (a one-rank group for a single process), checks an all_reduce's
result, a broadcast and a barrier on every rank, then times all_reduce from 1 KiB up to
``--max-bytes`` and reports algorithm and bus bandwidth (busbw = algbw x 2(n-1)/n, as nccl-tests
does). Rank 0 writes ``preflight.json``.
A rank that does not answer is named with its host. Exit 0 when everything passed, else 1.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from .exit import run_process

KEY_PREFIX = "ddp_tui_preflight/host/"
DEFAULT_MAX_BYTES = 256 * 2**20
# At world size 1 the checks run over a one-rank group: it proves the backend starts on this
# device (NCCL's communicator, its kernels). A one-rank all-reduce moves no data, so the table
# then times the launch of a collective, not a link.
ONE_RANK_NOTE = (
    "one rank: the collectives ran over a one-rank group, which shows the backend starts on "
    "this device; a one-rank all-reduce moves no data, so the times are its launch latency, "
    "and busbw is 0 by its definition 2(n-1)/n"
)


class PreflightFailure(RuntimeError):
    """A check failed; ``ranks`` are the ranks to blame (when known)."""

    def __init__(self, message: str, ranks: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.ranks = list(ranks)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ddp_tui.trainer.preflight",
        description="Collective test of a DDP world: correctness, then all_reduce bandwidth.",
        allow_abbrev=False,
    )
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="largest message")
    p.add_argument("--min-bytes", type=int, default=1024, help="smallest message")
    p.add_argument("--timeout-sec", type=float, default=120.0, help="per check")
    ns = p.parse_args(argv)
    if ns.min_bytes < 4:
        p.error(f"argument --min-bytes: must be at least 4, got {ns.min_bytes}")
    if ns.max_bytes < ns.min_bytes:
        p.error(
            f"argument --max-bytes: must be at least --min-bytes ({ns.min_bytes}), "
            f"got {ns.max_bytes}"
        )
    if ns.timeout_sec <= 0:
        p.error(f"argument --timeout-sec: must be greater than 0, got {ns.timeout_sec:g}")
    return ns


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from ``min_bytes`` (rounded to whole float32 values) up to ``max_bytes``."""
    sizes: list[int] = []
    size = max(4, min_bytes - min_bytes % 4)
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    if sizes and sizes[-1] != max_bytes - max_bytes % 4:
        sizes.append(max_bytes - max_bytes % 4)
    return sizes


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' all_reduce bus bandwidth: what each link carries."""
    return algbw * 2 * (world_size - 1) / world_size


def failed_ranks(error_text: str) -> list[int]:
    """Ranks named by a failed ``monitored_barrier`` (``Ranks 1, 3 failed to pass ...``)."""
    match = re.search(r"Ranks?\s+([\d,\s]+?)\s+failed to pass", error_text)
    if not match:
        return []
    return [int(r) for r in re.findall(r"\d+", match.group(1))]


def _iterations(nbytes: int) -> int:
    if nbytes <= 2**20:
        return 20
    if nbytes <= 64 * 2**20:
        return 10
    return 5


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checks; the exit code.

    ``argv=None`` (the process's own command line, ``python -m ddp_tui.trainer.preflight``) is
    the process entry: it ends the process itself through :func:`.exit.run_process` and never
    returns. With an argv list (in-process callers, tests) it returns the exit code.
    """
    if argv is None:
        run_process(lambda: preflight_main(sys.argv[1:]))
    return preflight_main(argv)


def preflight_main(argv: Sequence[str]) -> int:
    """The checks themselves: the exit code, or an exception for a real failure."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    import torch
    import torch.distributed as dist

    from .distributed import all_gather, announce, close_world, init_world
    from .errors import RendezvousError, UsageError
    from .launch_env import detect
    from .run_info import utc_now, versions, write_json_atomic

    run_dir: Path = args.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    out_path = run_dir / "preflight.json"
    env = detect()
    report: dict[str, Any] = {
        "ok": False,
        "started_at": utc_now(),
        "finished_at": None,
        "world_size": env.world_size,
        "launcher": env.launcher,
        "rendezvous": env.rendezvous if env.distributed else None,
        "job_id": env.job_id,
        **versions(),
        "checks": {},
        "bandwidth": [],
        "error": None,
        "failed_ranks": [],
        "failed_hosts": [],
    }
    try:
        world = init_world(env, args.backend, args.timeout_sec, one_rank_group=True)
    except UsageError as exc:
        print(f"preflight: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except RendezvousError as exc:
        print(f"preflight: {exc}", file=sys.stderr, flush=True)
        if env.rank == 0:
            report.update(error=str(exc), finished_at=utc_now())
            write_json_atomic(out_path, report)
        return EXIT_FAILURE
    report["backend"] = world.backend
    timeout = timedelta(seconds=args.timeout_sec)
    store: Any = None
    if world.distributed:
        store = dist.distributed_c10d._get_default_store()
        store.set(f"{KEY_PREFIX}{world.rank}", f"{world.host}")

    def host_of(rank: int) -> str:
        if rank == world.rank:
            return world.host
        key = f"{KEY_PREFIX}{rank}"
        try:
            if store is not None and store.check([key]):
                return bytes(store.get(key)).decode()
        except Exception:  # the store itself may be what failed
            pass
        return "unknown host (never registered)"

    def checkpoint(name: str) -> None:
        """A monitored barrier: rank 0 learns which ranks did not arrive in time."""
        if not world.distributed:
            return
        try:
            dist.monitored_barrier(group=world.control, timeout=timeout, wait_all_ranks=True)
        except RuntimeError as exc:
            ranks = failed_ranks(str(exc))
            named = ", ".join(f"rank {r} ({host_of(r)})" for r in ranks) or "another rank"
            raise PreflightFailure(
                f"{named} did not answer within {args.timeout_sec:g}s at the {name} check", ranks
            ) from exc

    def verify(name: str, ok_here: bool) -> None:
        """Every rank's verdict, so rank 0 can name who got a wrong result."""
        verdicts = all_gather(world, ok_here)
        bad = [r for r, ok in enumerate(verdicts) if not ok]
        report["checks"][name] = {"ok": not bad, "failed_ranks": bad}
        if bad:
            named = ", ".join(f"rank {r} ({host_of(r)})" for r in bad)
            raise PreflightFailure(f"{name} gave a wrong result on {named}", bad)

    announce(world)
    # A fake, for the test of the failure report: a real hang cannot be produced on cue.
    stall = os.environ.get("DDP_TUI_FAKE_STALL_RANK", "")
    if world.distributed and stall.isdigit() and int(stall) == world.rank:
        time.sleep(args.timeout_sec + 30)

    code = EXIT_FAILURE
    try:
        checkpoint("start")
        pairs = all_gather(world, (world.host, world.device_name()))
        report.update(
            rank_hosts=[h for h, _ in pairs],
            hosts=list(dict.fromkeys(h for h, _ in pairs)),
            devices=[d for _, d in pairs],
        )
        n = world.world_size
        device = world.device
        sync: Callable[[], None] = (
            (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        )
        # init_world formed a group for every world size, one rank included.
        t = torch.full((1024,), float(world.rank + 1), device=device)
        dist.all_reduce(t)
        verify("all_reduce", bool(torch.all(t == n * (n + 1) / 2).item()))
        checkpoint("broadcast")
        b = torch.arange(1024, dtype=torch.float32, device=device)
        if world.rank != 0:
            b.zero_()
        dist.broadcast(b, src=0)
        verify(
            "broadcast",
            bool(torch.equal(b, torch.arange(1024, dtype=torch.float32, device=device))),
        )
        checkpoint("barrier")
        t0 = time.perf_counter()
        dist.barrier()
        report["checks"]["barrier"] = {"ok": True, "seconds": time.perf_counter() - t0}
        checkpoint("bandwidth")
        report["bandwidth"] = _bandwidth(world, args.min_bytes, args.max_bytes, sync)
        if n == 1:
            report["note"] = ONE_RANK_NOTE
        checkpoint("end")
        report["ok"] = True
        code = EXIT_OK
    except PreflightFailure as exc:
        report.update(
            error=str(exc), failed_ranks=exc.ranks, failed_hosts=[host_of(r) for r in exc.ranks]
        )
        print(f"preflight FAILED on rank {world.rank}: {exc}", file=sys.stderr, flush=True)
    except Exception as exc:  # a collective died: record where we were
        report["error"] = f"{type(exc).__name__}: {exc}"
        print(
            f"preflight FAILED on rank {world.rank} ({world.host}): {exc}",
            file=sys.stderr,
            flush=True,
        )
    finally:
        if world.is_main:
            report["finished_at"] = utc_now()
            # Each rank put its host in the store at start: "verify" matches them to the
            # requested nodes. Read without waiting: a rank that never registered says so.
            report["hosts"] = [host_of(r) for r in range(world.world_size)]
            write_json_atomic(out_path, report)
            _print_table(report)
        if code == EXIT_OK:
            close_world(world)
    return code


def _bandwidth(
    world: Any, min_bytes: int, max_bytes: int, sync: Callable[[], None]
) -> list[dict[str, Any]]:
    """Time all_reduce per message size; times are the slowest rank's."""
    rows: list[dict[str, Any]] = []
    n = world.world_size
    for nbytes in message_sizes(min_bytes, max_bytes):
        iters = _iterations(nbytes)
        elapsed = all_reduce_seconds(world, nbytes, iters, sync)
        algbw = nbytes / elapsed / 1e9
        rows.append(
            {
                "bytes": nbytes,
                "dtype": "float32",
                "iters": iters,
                "time_us": elapsed * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": bus_bandwidth(algbw, n),
            }
        )
    return rows


def all_reduce_seconds(world: Any, nbytes: int, iters: int, sync: Callable[[], None]) -> float:
    """Seconds one all_reduce of ``nbytes`` (float32) takes on the default group: the mean of
    ``iters`` timed after two warm-ups, the slowest rank's (every rank gets the same number)."""
    import torch
    import torch.distributed as dist

    from .distributed import all_max

    buf = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=world.device)
    for _ in range(2):  # warm-up: connection set-up and allocator
        dist.all_reduce(buf)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    sync()
    elapsed = (time.perf_counter() - t0) / iters
    (elapsed,) = all_max(world, [elapsed])
    return elapsed


def _print_table(report: dict[str, Any]) -> None:
    status = "ok" if report["ok"] else f"FAILED: {report['error']}"
    print(f"preflight {status}; world size {report['world_size']}, backend {report.get('backend')}")
    if report["bandwidth"]:
        print(f"{'bytes':>12} {'time_us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}")
        for row in report["bandwidth"]:
            print(
                f"{row['bytes']:>12} {row['time_us']:>12.1f} {row['algbw_gbps']:>11.3f} "
                f"{row['busbw_gbps']:>11.3f}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
