"""The standalone DDP trainer that every ddp-tui job runs.

It imports only the standard library, torch, torchvision and ``ddp_tui.jobfiles`` (the run
files it shares with a user script's wrapper), because it is copied into each run directory with
that module and runs there with ``PYTHONPATH=<run>/code``. Entry points:

- ``python -m ddp_tui.trainer`` (also ``ddp-train``): training, see :mod:`.args`;
- ``python -m ddp_tui.trainer.preflight``: a collective test of the world.

This package module imports only the stdlib-only ``ddp_tui.jobfiles``, so that
``-m ddp_tui.trainer.preflight`` and the argument parser start without paying for torch.
"""

from ddp_tui.jobfiles import EXIT_REQUEUE, EXIT_WRITE_FAILED

# Exit codes shared by the trainer and preflight (see the run-directory contract); the
# requeue and write-failed codes are a script's wrapper's too.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_REQUEUE", "EXIT_USAGE", "EXIT_WRITE_FAILED"]
