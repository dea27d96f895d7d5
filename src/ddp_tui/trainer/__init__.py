"""The standalone DDP trainer that every ddp-tui job runs.

It imports only the standard library, torch and torchvision, because it is copied into each run
directory and runs there with ``PYTHONPATH=<run>/code``. Entry points:

- ``python -m ddp_tui.trainer`` (also ``ddp-train``): training, see :mod:`.args`;
- ``python -m ddp_tui.trainer.preflight``: a collective test of the world.

This package module stays free of imports so that ``-m ddp_tui.trainer.preflight`` and the
argument parser start without paying for torch.
"""

# Exit codes shared by the trainer and preflight (see the run-directory contract).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_REQUEUE = 3
