"""What to ask for next time: ``--mem``, ``--time``, ``--cpus-per-task`` and GPUs per node,
each from what an ended job used, with the margin it leaves and the reason.

Pure. The values are in the spec's own forms (``mem`` like ``"512M"``/``"6G"``,
``time_limit`` like ``"00:15:00"``, counts as ints), so that "edit a copy right-sized" can
fill them into Compose as they are (:meth:`RightSizing.spec_changes`). A figure that was
not measured gives no suggestion, and the reason says so: nothing is guessed from a 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

#: Above the peak memory per node: RSS varies from run to run, and a job over its memory
#: is killed, so the margin is on the side of room.
MEM_MARGIN: Final = 0.20
#: Above the run time: a node slower by a fifth still ends in time.
TIME_MARGIN: Final = 0.20
#: Above the cores the tasks kept busy on average.
CPU_MARGIN: Final = 0.20
#: A GPU whose average utilisation over the job is at most this (%) sat idle.
IDLE_GPU_PCT: Final = 5.0

#: Ends after which the job's use says what it needs: it ran to its end, or for its whole
#: time (a job that ran out of time still shows its memory and CPU use).
_FULL_RUN: Final = frozenset({"COMPLETED"})
_RAN_ITS_TIME: Final = frozenset({"COMPLETED", "TIMEOUT"})


@dataclass(frozen=True)
class Suggestion:
    """One option to ask for next time. ``value`` None: no suggestion, ``reason`` says why."""

    field: str  # the spec's field: mem, time_limit, cpus_per_task, gpus_per_node
    option: str  # sbatch's option, for the text: --mem, --time, --cpus-per-task, --gpus-per-node
    value: str | int | None
    current: str | int | None
    margin: float | None  # 0.2: the value leaves 20 % above what was used
    reason: str


@dataclass(frozen=True)
class RightSizing:
    mem: Suggestion
    time_limit: Suggestion
    cpus_per_task: Suggestion
    gpus_per_node: Suggestion

    def all(self) -> tuple[Suggestion, ...]:
        return (self.mem, self.time_limit, self.cpus_per_task, self.gpus_per_node)

    def spec_changes(self) -> dict[str, str | int]:
        """The spec fields to change, with their new values (what differs from the current)."""
        return {
            s.field: s.value for s in self.all() if s.value is not None and s.value != s.current
        }


@dataclass(frozen=True)
class UsedResources:
    """What an ended job used and asked for, as the suggestions need it (None: unknown)."""

    state: str
    ended: bool
    peak_mib_per_node: float | None = None
    peak_bound: str = "exact"
    mem_per_node_mib: float | None = None
    mem_asked: str | None = None  # as asked (the spec's "64G"), else from accounting
    elapsed_sec: float | None = None
    time_limit_sec: float | None = None
    cores_used_per_task: float | None = None  # CPU time / elapsed / tasks
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    #: Per node, how many of its GPUs averaged at most IDLE_GPU_PCT (ddp-tui's telemetry);
    #: None where per-GPU use was not measured.
    idle_gpus_per_node: tuple[int, ...] | None = None
    gpu_util_avg: float | None = None  # %, whatever its source


def mem_text(mib: int) -> str:
    """A size as sbatch and the spec take it: whole GiB as ``G``, else ``M``."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def round_mem_mib(mib: float) -> tuple[int, str]:
    """``mib`` rounded up to a step that suits its size (128M below 1G, 512M below 16G, whole
    G above), and the step in words."""
    step = 128 if mib <= 1024 else 512 if mib <= 16 * 1024 else 1024
    return max(step, math.ceil(mib / step) * step), mem_text(step)


def round_time_min(seconds: float) -> tuple[int, str]:
    """``seconds`` as minutes rounded up to 5 min below an hour, 15 min below 6 h, whole
    hours above; and the step in words."""
    minutes = seconds / 60
    step = 5 if minutes <= 60 else 15 if minutes <= 360 else 60
    word = f"{step} min" if step < 60 else "1 h"
    return max(step, math.ceil(minutes / step) * step), word


def _clock(seconds: float) -> str:
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _pct(margin: float) -> str:
    return f"{margin * 100:.0f} %"


def _no_suggestion(field: str, option: str, current: str | int | None, reason: str) -> Suggestion:
    """No value to suggest, and why (a figure the suggestion rests on is missing)."""
    return Suggestion(field, option, None, current, None, reason)


def _not_ended(field: str, option: str, current: str | int | None) -> Suggestion:
    return _no_suggestion(field, option, current, "suggested once the job has ended")


def suggest_mem(used: UsedResources) -> Suggestion:
    current = used.mem_asked
    if not used.ended:
        return _not_ended("mem", "--mem", current)
    held = used.mem_per_node_mib
    asked = f" with {held:.0f} MiB per node" if held else ""
    if used.state == "OUT_OF_MEMORY":
        return _no_suggestion(
            "mem",
            "--mem",
            current,
            f"it ran out of memory{asked}: it needs more, how much more was not measured",
        )
    if used.state not in _RAN_ITS_TIME:
        return _no_suggestion(
            "mem",
            "--mem",
            current,
            f"it ended {used.state} before it finished: its peak says little of its need",
        )
    peak = used.peak_mib_per_node
    if peak is None:
        return Suggestion(
            "mem", "--mem", None, current, None, "its peak memory per node was not measured"
        )
    mib, step = round_mem_mib(peak * (1 + MEM_MARGIN))
    bound = "" if used.peak_bound == "exact" else f"{used.peak_bound} "
    held_text = f" of {held:.0f} MiB held" if held else ""
    reason = (
        f"peak {bound}{peak:.0f} MiB per node{held_text}, + {_pct(MEM_MARGIN)}, "
        f"rounded up to {step}"
    )
    return Suggestion("mem", "--mem", mem_text(mib), current, MEM_MARGIN, reason)


def suggest_time(used: UsedResources, current: str | None) -> Suggestion:
    if not used.ended:
        return _not_ended("time_limit", "--time", current)
    if used.state == "TIMEOUT":
        limit = _clock(used.time_limit_sec) if used.time_limit_sec else "its limit"
        return _no_suggestion(
            "time_limit",
            "--time",
            current,
            f"it ran out of time at {limit}: it needs more, how much more was not measured",
        )
    if used.state not in _FULL_RUN:
        return _no_suggestion(
            "time_limit",
            "--time",
            current,
            f"it ended {used.state} before it finished: its run time says nothing of its need",
        )
    if used.elapsed_sec is None:
        return Suggestion(
            "time_limit", "--time", None, current, None, "its run time was not recorded"
        )
    from ddp_tui.spec.timefmt import format_time_limit  # not at import: the spec package

    minutes, step = round_time_min(used.elapsed_sec * (1 + TIME_MARGIN))
    reason = f"ran {_clock(used.elapsed_sec)} + {_pct(TIME_MARGIN)}, rounded up to {step}"
    value = format_time_limit(minutes)
    return Suggestion("time_limit", "--time", value, current, TIME_MARGIN, reason)


def suggest_cpus(used: UsedResources) -> Suggestion:
    current = used.cpus_per_task
    if not used.ended:
        return _not_ended("cpus_per_task", "--cpus-per-task", current)
    if used.state not in _RAN_ITS_TIME:
        return _no_suggestion(
            "cpus_per_task",
            "--cpus-per-task",
            current,
            f"it ended {used.state} before it finished: its CPU use says little of its need",
        )
    busy, cpus = used.cores_used_per_task, used.cpus_per_task
    if busy is None or cpus is None:
        return _no_suggestion(
            "cpus_per_task",
            "--cpus-per-task",
            current,
            "the CPU time per task was not measured",
        )
    need = max(1, math.ceil(busy * (1 + CPU_MARGIN)))
    if need >= cpus:
        reason = f"each task kept {busy:.1f} of its {cpus} CPUs busy: keep {cpus}"
        return Suggestion("cpus_per_task", "--cpus-per-task", cpus, current, CPU_MARGIN, reason)
    reason = (
        f"each task kept {busy:.1f} of its {cpus} CPUs busy on average"
        f" + {_pct(CPU_MARGIN)}, rounded up"
    )
    return Suggestion("cpus_per_task", "--cpus-per-task", need, current, CPU_MARGIN, reason)


def suggest_gpus(used: UsedResources) -> Suggestion:
    current = used.gpus_per_node
    option = "--gpus-per-node"
    if not used.ended:
        return _not_ended("gpus_per_node", option, current)
    if current is not None and current <= 0:
        return Suggestion("gpus_per_node", option, None, current, None, "it held no GPUs")
    idle = used.idle_gpus_per_node
    if idle is None or current is None:
        low = used.gpu_util_avg is not None and used.gpu_util_avg <= IDLE_GPU_PCT
        reason = "per-GPU utilisation was not measured"
        if low:
            reason = (
                f"its GPUs averaged {used.gpu_util_avg:.0f} % busy, but per-GPU utilisation "
                "was not measured: check that the job uses every GPU it holds"
            )
        return Suggestion("gpus_per_node", option, None, current, None, reason)
    spare = min(idle) if idle else 0
    if spare <= 0:
        reason = f"every node kept its GPUs busy (above {IDLE_GPU_PCT:.0f} % on average): keep"
        return Suggestion("gpus_per_node", option, current, current, None, reason)
    value = max(1, current - spare)
    reason = (
        f"{spare} of the {current} GPUs on every node averaged at most {IDLE_GPU_PCT:.0f} % "
        "busy (ddp-tui telemetry); for a DDP run fewer GPUs is also a smaller world size"
    )
    return Suggestion("gpus_per_node", option, value, current, None, reason)


def right_size(used: UsedResources, *, time_limit_asked: str | None = None) -> RightSizing:
    """The four suggestions for ``used``; ``time_limit_asked`` the limit as it was asked."""
    return RightSizing(
        mem=suggest_mem(used),
        time_limit=suggest_time(used, time_limit_asked),
        cpus_per_task=suggest_cpus(used),
        gpus_per_node=suggest_gpus(used),
    )
