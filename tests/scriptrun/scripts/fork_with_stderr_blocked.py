"""A rank that forks its DataLoader worker while another of its threads is stuck inside a
``logging`` write to stderr: the state a rank's stderr pipe puts it in when nobody reads it.

The test gives this script a stderr pipe that it does not read. What may print (torch's import,
gloo's start) comes first. Then a thread logs one message four times the pipe's size: once the
pipe holds its full size, that thread is inside the write for good, holding the ``logging``
handler's lock and the ``BufferedWriter`` lock of ``sys.stderr``. Only then does the main thread
fork its DataLoader worker (in a one-rank gloo group) and train one pass. Prints one JSON line:
the batches the worker delivered, the optimizer steps, and every Python thread alive at the end
with the module of its target.

It ends with ``os._exit``: the forked worker inherited the stderr lock held, and CPython's exit
flush in the worker would wait on it for ever (the test ends the process group it started).
"""

from __future__ import annotations

import array
import fcntl
import json
import logging
import os
import sys
import termios
import threading


def queued_bytes(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def block_a_thread_in_a_stderr_write() -> threading.Thread:
    capacity = fcntl.fcntl(2, fcntl.F_GETPIPE_SZ)
    log = logging.getLogger("blocked")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    writer = threading.Thread(
        target=log.info, args=("x" * (4 * capacity),), name="blocked-writer", daemon=True
    )
    writer.start()
    # Held by construction: the message is larger than the pipe, so a full pipe means the
    # writer is inside its write and cannot leave it until the test reads.
    while queued_bytes(2) < capacity:
        if not writer.is_alive():
            raise SystemExit("the writer finished: stderr is not an unread pipe")
        os.sched_yield()
    return writer


def main() -> None:
    # Everything that may print (torch's import, gloo's start) comes before stderr is blocked.
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    dist.init_process_group("gloo")  # the observed group; the rank's stack dump is registered
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(
        data,
        batch_size=8,
        num_workers=1,
        multiprocessing_context="fork",
        persistent_workers=True,  # no shutdown at the pass's end: the worker never exits here
        timeout=60,  # a worker that never starts fails the script instead of hanging it
    )
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    writer = block_a_thread_in_a_stderr_write()
    batches = steps = 0
    try:
        for x, y in loader:  # iter() forks the worker now
            batches += 1
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            steps += 1
    except Exception as exc:  # a traceback on stderr would block: the answer goes to stdout
        os.write(1, (json.dumps({"error": repr(exc)}) + "\n").encode())
        os._exit(1)
    threads = [
        [t.name, getattr(getattr(t, "_target", None), "__module__", None)]
        for t in threading.enumerate()
    ]
    result = {"batches": batches, "steps": steps, "threads": threads}
    result["writer_blocked"] = writer.is_alive()  # the held state lasted to the end
    os.write(1, (json.dumps(result) + "\n").encode())  # straight to the pipe, no Python buffer
    os._exit(0)


if __name__ == "__main__":
    main()
