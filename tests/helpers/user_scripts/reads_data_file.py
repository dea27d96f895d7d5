"""A script that reads its training tokens from ``data/train.bin``, as character-level
language-model scripts do, knowing nothing of ddp-tui.

Its project keeps the data beside the code and lists ``data/`` in ``.gitignore`` (the tests
make such a project around a copy of this file). Every rank joins the group, then opens the
file relative to the working directory: where it is missing, the rank ends with
``FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'``.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    path = os.path.join("data", "train.bin")
    with open(path, "rb") as fh:
        tokens = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8)
    total = torch.tensor([float(tokens.sum())])
    dist.all_reduce(total)
    if dist.get_rank() == 0:
        print(f"epoch 1 tokens {tokens.numel()} sum {total.item():.0f}", flush=True)
    # Not destroy_process_group(): gloo's teardown aborts one run in three under torch 2.15
    # (toy_task.end says how; this file travels alone, so it ends the same way itself).
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
