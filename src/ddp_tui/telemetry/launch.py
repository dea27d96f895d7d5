"""Start this node's resource sampler, then become the launcher: ``python -m
ddp_tui.telemetry.launch --interval N --ranks-per-node R -- COMMAND...``.

The job script puts this in front of the launch command of every srun task (and of
torchrun on one node), so that each node of the allocation gets one sampler without a
separate Slurm step: a step of its own would need ``srun --overlap``, whose meaning changed
across Slurm releases, and could hold CPUs the training step then waits for. Only the
node's first task (``SLURM_LOCALID`` 0) starts one; then this process execs ``COMMAND``,
keeping its pid, so the sampler is a child of the launcher (torchrun or rank 0) and stops
with it. Nothing here may fail the job: a sampler that cannot start is skipped, and the
command runs as it would have without this module.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence


def _option(argv: Sequence[str], name: str, default: str) -> str:
    """The value after ``name`` in ``argv`` (ours are few and fixed: no argparse needed)."""
    for i, word in enumerate(argv[:-1]):
        if word == name:
            return argv[i + 1]
    return default


def sampler_command(argv: Sequence[str], env: dict[str, str]) -> list[str] | None:
    """The sampler's command line for this task, or None when this task starts none (not
    the node's first task, or an interval of 0). The sampler reads its node, job and restart
    from the same environment (``SLURM_NODEID``, ``SLURM_JOB_ID``, ``SLURM_RESTART_COUNT``)."""
    interval = _option(argv, "--interval", "0")
    if env.get("SLURM_LOCALID", "0") != "0" or interval in ("0", ""):
        return None
    return [
        sys.executable,
        "-m",
        "ddp_tui.telemetry",
        "--run-dir",
        env.get("DDP_TUI_RUN_DIR") or os.getcwd(),
        "--interval",
        interval,
        "--ranks-per-node",
        _option(argv, "--ranks-per-node", "1"),
    ]


def start_sampler(argv: Sequence[str]) -> None:
    """Start the sampler in the background, detached from the job's output; never raise."""
    env = dict(os.environ)
    command = sampler_command(argv, env)
    if command is None:
        return
    env["DDP_TUI_SAMPLER"] = "1"  # the sampler leaves itself out of the job's processes
    # No sampler is no failure: the Resources tab then says why it is empty.
    with contextlib.suppress(OSError, ValueError):
        subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args or args.index("--") == len(args) - 1:
        print("usage: python -m ddp_tui.telemetry.launch [options] -- COMMAND...", file=sys.stderr)
        return 2
    cut = args.index("--")
    options, command = args[:cut], args[cut + 1 :]
    start_sampler(options)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        # What a shell would say, so that the job's diagnosis reads it the same way.
        print(f"{command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main())
