"""What would remove a data wait: the input pipeline's settings a run could change, by name.

When the ranks wait for their next batch, the advice names the setting that would hide the
wait, in the order that removes the most for the least: the built-in trainer's ``--decode gpu``
for JPEG folders on GPUs (the host decodes nothing), more loader workers where the rank has
idle cores, more batches ready (``--prefetch``) where the trainer lowered it for the host's
memory, and, where the rank's cores are all busy, more of them (``cpus_per_task``). The names
are the spec's fields and the trainer's options (``ddp_tui/trainer/args.py``;
docs/input-pipeline.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddp_tui.advisor.inputs import SizeRun

#: The most workers the trainer gives a rank by itself (``trainer/loader_sizing.py``).
MAX_WORKERS = 8
#: The most batches a worker keeps ready there.
MAX_PREFETCH = 4
#: Workers to add where no core is idle: the cores to ask for besides the busy ones.
MORE_CORES = 2


@dataclass(frozen=True)
class Remedy:
    """One setting that would hide the wait: what to set it to, how, and why."""

    setting: str  # "decode", "workers", "prefetch" or "cpus_per_task"
    value: int | str
    now: int | str | None
    how: str
    why: str

    @property
    def text(self) -> str:
        now = "" if self.now is None else f", now {self.now}"
        return f"{self.how}{now} ({self.why})"


def _idle_cores(run: SizeRun) -> int | None:
    """Whole cores of a rank that neither its compute nor its workers use (None: unknown). A
    GPU rank's main process takes one; a CPU rank's compute threads take theirs."""
    share = run.cores
    if share is None or run.workers is None:
        return None
    busy = share.threads if run.device == "cpu" else 1
    return math.floor(share.cpus / max(1, share.ranks)) - busy - run.workers


def remedies(run: SizeRun) -> list[Remedy]:
    """The settings that would hide ``run``'s data wait, the most effective first."""
    found: list[Remedy] = []
    if run.dataset == "imagefolder" and run.device == "cuda" and run.decode != "gpu":
        found.append(
            Remedy(
                "decode",
                "gpu",
                run.decode,
                "decode gpu (the spec's field; the trainer's --decode)",
                "the GPU decodes the JPEGs in batches, the workers only read the files",
            )
        )
    idle = _idle_cores(run)
    workers = run.workers
    if idle is not None and idle > 0 and workers is not None and workers < MAX_WORKERS:
        more = min(MAX_WORKERS, workers + idle)
        found.append(
            Remedy(
                "workers",
                more,
                workers,
                f"workers {more} (the spec's field; the trainer's --workers)",
                f"{idle} of each rank's cores are idle",
            )
        )
    if workers and run.prefetch is not None and run.prefetch < 2:
        found.append(
            Remedy(
                "prefetch",
                2,
                run.prefetch,
                "--prefetch 2 (in the spec's extra_trainer_args)",
                "twice the batches ready ride out slow ones, if the host's memory holds them "
                "(the trainer chose fewer to fit it)",
            )
        )
    if idle is not None and idle <= 0 and run.cores is not None and not found:
        share = run.cores
        per_task = share.cores // max(1, share.ranks) if share.per_task else share.cores
        extra = MORE_CORES * (1 if share.per_task else share.ranks)
        found.append(
            Remedy(
                "cpus_per_task",
                per_task + extra,
                per_task,
                f"cpus_per_task {per_task + extra}",
                f"each rank's {share.per_rank:g} core(s) are busy with its "
                + ("compute threads" if run.device == "cpu" else "main process")
                + (f" and {run.workers} worker(s)" if run.workers else "")
                + f": {MORE_CORES} more a rank for loader workers",
            )
        )
    return found
