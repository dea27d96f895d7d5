"""``python -m ddp_tui.trainer`` / ``ddp-train``: exit 0 done, 1 failed, 2 bad arguments,
3 stopped by SIGUSR2/SIGTERM after a checkpoint (requeue wanted), 4 a run-directory record
could not be written (a full or read-only disk)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ddp_tui.jobfiles import RunWriteError

from . import EXIT_FAILURE, EXIT_USAGE, EXIT_WRITE_FAILED
from .args import parse_args
from .errors import RendezvousError, UsageError
from .exit import run_process, say
from .signals import StopSignal

PROG = "ddp-train"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, train, and map the outcome to an exit code.

    ``argv=None`` (the process's own command line: ``python -m ddp_tui.trainer``, the
    ``ddp-train`` script) is the process entry: it ends the process itself through
    :func:`.exit.run_process` and never returns. With an argv list (in-process callers, tests)
    it returns the exit code.
    """
    if argv is None:
        run_process(lambda: train_main(sys.argv[1:]))
    return train_main(argv)


def train_main(argv: Sequence[str]) -> int:
    """The trainer's work: the exit code, or an exception for a real failure."""
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
    except RunWriteError as exc:
        # Fatal and final: no retry. This rank ends now; its peers, waiting for it in their
        # next collective, fail when its sockets close, and the launcher ends what is left.
        say(exc.message())
        return EXIT_WRITE_FAILED


if __name__ == "__main__":
    main()
