"""``python -m ddp_tui.telemetry --run-dir DIR [--interval SEC] [--node K] [--ranks-per-node N]
[--job ID] [--restart N] [--marker VALUE] [--once] [--proc-root DIR]``.

The job script starts one per node (see :mod:`.launch`) with ``DDP_TUI_SAMPLER=1`` in its
environment. It ends on SIGTERM or SIGINT, when its parent goes away (the launcher it was
started beside has ended), when the job's processes have gone, or when writes keep failing.
:func:`main` never raises and always returns 0: a sampler problem must never fail the job.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.jobfiles import TELEMETRY_DEFAULT_SEC

from .gpus import open_reader
from .lines import Origin
from .sampler import Sampler, Settings

MIN_INTERVAL_SEC = 0.05
MAX_INTERVAL_SEC = 3600.0


class _Stop(BaseException):
    """Raised by the signal handlers: ends a sleep (or an ``nvidia-smi`` call) at once."""


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    return int(value) if value.isdigit() else default


def parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    # No abbreviations: main() looks for "--once" itself.
    p = argparse.ArgumentParser(
        prog="python -m ddp_tui.telemetry", description=__doc__, allow_abbrev=False
    )
    p.add_argument("--run-dir", required=True, help="the run directory")
    p.add_argument("--interval", type=float, default=float(TELEMETRY_DEFAULT_SEC))
    p.add_argument("--node", type=int, default=_env_int(env, "SLURM_NODEID", 0))
    p.add_argument("--ranks-per-node", type=int, default=None)
    p.add_argument("--job", default=env.get("SLURM_JOB_ID") or env.get("DDP_TUI_JOB_ID") or "")
    p.add_argument("--restart", type=int, default=_env_int(env, "SLURM_RESTART_COUNT", 0))
    p.add_argument(
        "--marker",
        default=None,
        help="the DDP_TUI_RUN_DIR value of the job's processes (default: --run-dir)",
    )
    p.add_argument("--once", action="store_true", help="write one sample and exit")
    p.add_argument("--proc-root", default="/proc", help="where /proc is (tests: a fake)")
    return p


def settings_from(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    interval = args.interval if args.interval >= MIN_INTERVAL_SEC else MIN_INTERVAL_SEC
    origin = Origin(
        host=env.get("SLURMD_NODENAME") or socket.gethostname(),
        node=args.node,
        job=str(args.job),
        restart=args.restart,
    )
    return Settings(
        run_dir=args.run_dir,
        interval=min(interval, MAX_INTERVAL_SEC),
        origin=origin,
        marker=args.marker or args.run_dir,
        ranks_per_node=args.ranks_per_node,
        nodename=env.get("SLURMD_NODENAME") or None,
        visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
    )


def build_sampler(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Sampler:
    """The sampler these arguments describe (``env``: the environment to read, default
    ``os.environ``), with the best GPU reader this node has. Raises SystemExit on bad
    arguments, as argparse does."""
    env = os.environ if env is None else env
    args = parser(env).parse_args(list(argv))
    gpu, note = open_reader()
    sampler = Sampler(settings_from(args, env), gpu, proc_root=args.proc_root)
    if note:
        sampler.note(note)
    return sampler


def sample_once(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """What ``--once`` does: append a start line and one sample, and return those lines."""
    sampler = build_sampler(argv, env)
    try:
        lines = [sampler.start_line(), *sampler.sample()]
        sampler.write(lines)
        return lines
    finally:
        sampler.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sampler; always 0 (a bad argument, too, only prints argparse's message)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if "--once" in args:
            sample_once(args)
        else:
            _loop(args)
    except BaseException:  # _Stop, SystemExit from argparse, anything: never fail the job
        pass
    return 0


def _loop(argv: list[str]) -> None:
    parent = os.getppid()  # before anything slow: a parent gone meanwhile is noticed
    _install_handlers()
    sampler = build_sampler(argv)
    try:
        why = sampler.run(stop=lambda: os.getppid() != parent, sleep=time.sleep)
        if why.startswith("writes failed"):
            print(f"ddp_tui.telemetry: {why}", file=sys.stderr)  # nowhere else to say it
    finally:
        sampler.close()


def _install_handlers() -> None:
    def stop(signum: int, frame: Any) -> None:
        raise _Stop(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
