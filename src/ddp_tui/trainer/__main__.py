"""``python -m ddp_tui.trainer`` / ``ddp-train``: exit 0 done, 1 failed, 2 bad arguments,
3 stopped by SIGUSR2/SIGTERM after a checkpoint (requeue wanted)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from . import EXIT_FAILURE, EXIT_USAGE
from .args import parse_args
from .errors import RendezvousError, UsageError
from .signals import StopSignal

PROG = "ddp-train"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train, and map the outcome to an exit code."""
    # First thing: a pre-emption signal during the slow torch import must not kill us.
    stop = StopSignal().install()
    try:
        cfg = parse_args(argv)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    from .train import run  # torch is imported only once the arguments are known to be good

    try:
        return run(cfg, stop)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except RendezvousError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
