"""The shared ending of the framework scripts: ``leave(code)`` instead of returning.

torch 2.15's gloo backend aborts at interpreter teardown in about 1 run of 3 (SIGABRT,
``terminate called without an active exception`` from gloo's threads), and torchrun then
reports the whole job failed. The scripts skip the teardown: wait for every rank, flush,
``os._exit``.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import torch.distributed as dist


def leave(code: int = 0) -> NoReturn:
    """Wait for the other ranks (if there is a process group), flush, and exit at once."""
    # Workaround for the gloo teardown abort in torch 2.15: never let Python tear gloo down.
    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # no rank leaves while a peer still talks to it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
