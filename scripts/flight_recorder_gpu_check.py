"""A real flight recorder dump, loaded and analysed by ddp-tui's own reader.

    PYTHONPATH=src python scripts/flight_recorder_gpu_check.py [--out DIR] [--backend nccl|gloo]

On a GPU: a one-rank NCCL process group with the recorder on, as the job script turns it on
(the buffer size, ``TORCH_NCCL_DUMP_ON_TIMEOUT``, the dump file ``DIR/nccl_trace/check/rank_``;
under torch 2.11's ``TORCH_FR_*`` names where it has them), runs a few
all_reduces from ``train_step``, then dumps the recorder through torch's API
(``torch._C._distributed_c10d._dump_nccl_trace()``, the very bytes the watchdog writes on a
timeout) into that file. One rank cannot hang a collective, so the timeout itself is not
provoked. The dump is then read with :func:`ddp_tui.diagnosis.flight_recorder.load_dump`
(which never unpickles anything but plain values) and analysed: every all_reduce must be
there, completed, called from ``train_step``, and no hang found.

Without CUDA (or with ``--backend gloo``) it does the same over gloo, whose process groups
record into the same recorder natively from torch 2.15 on (``_dump_fr_trace``). It prints
one JSON line at the end and exits 0 when the dump loaded as expected, 1 when it did not,
and 2 when this torch cannot do it at all (no recorder for the backend).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

CALLS = 5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument(
        "--out", type=Path, default=None, help="where the dump goes (default: a temp dir)"
    )
    p.add_argument(
        "--backend", choices=("nccl", "gloo"), default=None, help="default: nccl on CUDA"
    )
    return p.parse_args(argv)


def record_and_dump(backend: str, prefix: str, store: str) -> bytes:
    """A one-rank group of ``backend`` with the recorder on, CALLS all_reduces, its dump."""
    import torch
    import torch.distributed as dist

    c10d = torch._C._distributed_c10d
    dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    tensor = torch.ones(3, 4, device=device)

    def train_step() -> None:
        dist.all_reduce(tensor)

    for _ in range(CALLS):
        train_step()
    if backend == "nccl":
        torch.cuda.synchronize()
        # Let the watchdog see the calls complete (it retires them in the recorder).
        dist.barrier()
        torch.cuda.synchronize()
        time.sleep(1.0)
        raw: bytes = c10d._dump_nccl_trace()
    else:
        raw = dump_when_retired(c10d._dump_fr_trace)
    Path(prefix + "0").write_bytes(raw)
    dist.destroy_process_group()
    return raw


def dump_when_retired(dump: Callable[[], bytes], timeout: float = 10.0) -> bytes:
    """The recorder's dump once every all_reduce in it is retired. gloo retires a call from
    its own thread after the call has returned, so a dump taken at once can hold the last one
    still "scheduled" (seen on a loaded machine: a hang where there is none). Bounded: after
    ``timeout`` the dump is taken as it is, and the check says what it found."""
    from ddp_tui.diagnosis.flight_recorder import load_dump

    deadline = time.monotonic() + timeout
    while True:
        raw = dump()
        entries = load_dump(raw, rank=0, name="retired?").entries
        if all(e.done for e in entries if e.op == "all_reduce") or time.monotonic() > deadline:
            return raw
        time.sleep(0.05)


def check(raw: bytes, name: str) -> dict[str, Any]:
    from ddp_tui.diagnosis.flight_recorder import analyse, load_dump

    dump = load_dump(raw, rank=0, name=name)
    reduces = [e for e in dump.entries if e.op == "all_reduce"]
    frames = [e.user_frame.label for e in reduces if e.user_frame is not None]
    report = analyse({0: dump}, world_size=1)
    problems = []
    if len(reduces) < CALLS:
        problems.append(f"{len(reduces)} all_reduce entries, expected {CALLS}")
    if [e.collective_seq for e in reduces[:CALLS]] != list(range(1, CALLS + 1)):
        problems.append(f"seq ids {[e.collective_seq for e in reduces]}")
    if not all(f.startswith("train_step at ") for f in frames) or len(frames) != len(reduces):
        problems.append(f"user frames {frames}")
    if report.hangs:
        problems.append(f"a hang where there is none: {report.hangs[0].sentence}")
    return {
        "version": dump.version,
        "entries": len(dump.entries),
        "labels": [e.label() for e in dump.entries],
        "states": sorted({e.state for e in dump.entries}),
        "bytes": len(raw),
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="fr-check-"))
    trace = out / "nccl_trace" / "check"
    trace.mkdir(parents=True, exist_ok=True)
    prefix = str(trace / "rank_")
    # As the job script sets them (torch 2.11 renamed two), before torch reads them.
    found = re.match(r"(\d+)\.(\d+)", version("torch"))
    new_names = found is not None and (int(found[1]), int(found[2])) >= (2, 11)
    os.environ.setdefault(
        "TORCH_FR_BUFFER_SIZE" if new_names else "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"
    )
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    os.environ.setdefault(
        "TORCH_FR_DUMP_TEMP_FILE" if new_names else "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix
    )
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and dist.is_nccl_available()
    backend = args.backend or ("nccl" if cuda else "gloo")
    result: dict[str, Any] = {"backend": backend, "torch": torch.__version__, "dump": prefix + "0"}
    c10d = torch._C._distributed_c10d
    needed = "_dump_nccl_trace" if backend == "nccl" else "_dump_fr_trace"
    if not hasattr(c10d, needed) or (backend == "nccl" and not cuda):
        result["skipped"] = f"torch {torch.__version__} has no {needed} with a {backend} group here"
        print(json.dumps(result))
        return 2
    raw = record_and_dump(backend, prefix, str(out / "store"))
    result.update(check(raw, f"nccl_trace/check/rank_0 ({backend})"))
    print(json.dumps(result))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
