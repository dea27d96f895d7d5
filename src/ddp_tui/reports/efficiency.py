"""What a job used against what it held: CPU and memory efficiency, GPU utilisation and
memory, time against the limit, GPU-hours; and what to ask for next time.

Pure: :func:`usage_report` takes one attempt's accounting (:mod:`ddp_tui.reports.accounting`:
the allocation and every step, every node) and, for ddp-tui's own runs, its telemetry
summary (:mod:`ddp_tui.resources`) and its spec's requests (:class:`Asked`). Each figure says
where it came from; a figure with no source is None, "not measured", never 0 (a step shorter
than Slurm's sampling interval has no memory sample at all, and sacct prints nothing for it).

Sources, best first:

- CPU: sacct's TotalCPU (user + system time of every task of every step, from the kernel's
  accounting at each task's exit) against Elapsed x AllocCPUS; else ddp-tui's telemetry
  (the average CPU use of the job's processes on each node) against the cores asked for.
- memory per node: ddp-tui's telemetry (each node's summed RSS, sampled); else sacct's
  ``TRESUsageIn*`` worked out per node (:func:`~ddp_tui.reports.accounting.node_peaks`).
- GPUs: ddp-tui's telemetry; else sacct's ``gres/gpuutil`` and ``gres/gpumem`` where the
  cluster records them (``AccountingStorageTRES``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ddp_tui.reports.accounting import (
    GPU_MEM,
    GPU_UTIL,
    JobAccounting,
    NodeMemory,
    StepUsage,
    memory_per_node_mib,
    node_peaks,
    size_mib,
)
from ddp_tui.reports.rightsizing import (
    IDLE_GPU_PCT,
    RightSizing,
    UsedResources,
    mem_text,
    right_size,
)
from ddp_tui.reports.usage import allocated_cores, as_spec, device_hours, job_tasks

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ddp_tui.resources import ResourceSummary
    from ddp_tui.spec import ExperimentSpec

NOT_MEASURED: Final = "not measured"


@dataclass(frozen=True)
class Figure:
    """One figure of the report: its value (None: not measured), where it came from, and a
    note (why it is not measured, or how it bounds the truth)."""

    value: float | None
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class Asked:
    """What a ddp-tui run asked for (its spec), where accounting does not say or says it
    less well; None: not known. A job sent by hand has none: its accounting says."""

    mem: str | None = None  # the spec's "64G"; None: the cluster's default
    time_limit: str | None = None  # "01:00:00"
    cpus_per_task: int | None = None
    tasks: int | None = None  # tasks in the job, for the CPU time per task
    gpus_per_node: int | None = None
    nodes: int | None = None
    cores: int | None = None  # cores held (the local scheduler records none)
    gpus: int | None = None  # GPUs held


@dataclass(frozen=True)
class UsageReport:
    """One job's (its last attempt's) use against what it held, and the suggestion."""

    job_id: str
    run_id: str | None
    name: str
    state: str
    ended: bool
    source: str  # where the accounting came from: "sacct", "the run's record", ...
    attempts: int
    elapsed_sec: float | None
    time_limit_sec: float | None
    nodes: tuple[str, ...]
    cpus: int | None
    gpus: int | None
    mem_per_node_mib: float | None
    cpu_efficiency: Figure  # a fraction: 0.5 is half the cores busy on average
    max_rss_mib_per_node: Figure  # the largest node's peak
    mem_efficiency: Figure  # that peak over the memory per node
    gpu_util_avg: Figure  # %
    gpu_mem_peak_mib: Figure
    time_used_fraction: Figure
    gpu_hours_allocated: Figure
    gpu_hours_busy: Figure
    per_node: tuple[NodeMemory, ...]
    suggestion: RightSizing
    notes: tuple[str, ...] = field(default_factory=tuple)

    #: The figures by their JSON names, in the order the text lists them.
    FIGURES: ClassVar[tuple[str, ...]] = (
        "cpu_efficiency",
        "max_rss_mib_per_node",
        "mem_efficiency",
        "gpu_util_avg",
        "gpu_mem_peak_mib",
        "time_used_fraction",
        "gpu_hours_allocated",
        "gpu_hours_busy",
    )

    def figure(self, name: str) -> Figure:
        value: Figure = getattr(self, name)
        return value

    def to_json(self) -> dict[str, Any]:
        """The report as JSON: each figure a number or null, ``sources`` saying where each
        came from, ``suggestion`` the values (``mem``, ``time_limit``, ``cpus_per_task``,
        ``gpus_per_node``; null: none) and ``detail``, each with its margin and reason."""
        sug = self.suggestion
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            "ended": self.ended,
            "source": self.source,
            "attempts": self.attempts,
            "elapsed_sec": self.elapsed_sec,
            "time_limit_sec": self.time_limit_sec,
            "nodes": list(self.nodes),
            "cpus": self.cpus,
            "gpus": self.gpus,
            "mem_per_node_mib": self.mem_per_node_mib,
            **{name: self.figure(name).value for name in self.FIGURES},
            "sources": {
                name: {"source": self.figure(name).source, "note": self.figure(name).note}
                for name in self.FIGURES
            },
            "per_node": [asdict(n) for n in self.per_node],
            "suggestion": {
                **{s.field: s.value for s in sug.all()},
                "detail": [asdict(s) for s in sug.all()],
            },
            "notes": list(self.notes),
        }


def spec_asked(spec: Mapping[str, Any] | ExperimentSpec) -> Asked:
    """What a ddp-tui run's spec asked for (the job script's shape: see
    :func:`ddp_tui.reports.usage.job_tasks`)."""
    s = as_spec(spec)
    gpus_per_node = 0 if s.device == "cpu" else s.gpus_per_node
    return Asked(
        mem=s.mem or None,
        time_limit=s.time_limit,
        cpus_per_task=s.cpus_per_task,
        tasks=job_tasks(s),
        gpus_per_node=gpus_per_node,
        nodes=s.nodes,
        cores=allocated_cores(s),
        gpus=s.nodes * gpus_per_node,
    )


def _main_step(steps: Sequence[StepUsage]) -> StepUsage | None:
    """The step that did the work: the one with the most CPU time (not ``extern``, which
    only holds the allocation)."""
    work = [s for s in steps if s.step != "extern" and s.cpu_sec is not None]
    return max(work, key=lambda s: s.cpu_sec or 0.0) if work else None


def asked_from(acct: JobAccounting, asked: Asked | None = None) -> Asked:
    """``asked`` with what it leaves unknown taken from the accounting."""
    from ddp_tui.spec.timefmt import format_time_limit  # not at import: the spec package

    a = asked or Asked()
    main = _main_step(acct.steps)
    tasks = a.tasks or (main.tasks if main else None)
    cpt = a.cpus_per_task
    if cpt is None and main is not None and main.cpus and main.tasks:
        cpt = max(1, main.cpus // main.tasks)
    nodes = a.nodes or acct.node_count or len(acct.nodes) or None
    gpn = a.gpus_per_node
    if gpn is None and acct.gpus is not None and nodes:
        gpn = acct.gpus // nodes
    limit = a.time_limit
    if limit is None and acct.time_limit_sec:
        limit = format_time_limit(math.ceil(acct.time_limit_sec / 60))
    mem = a.mem
    per_node = memory_per_node_mib(acct)
    if mem is None and per_node:
        mem = mem_text(math.ceil(per_node))
    return Asked(
        mem=mem,
        time_limit=limit,
        cpus_per_task=cpt,
        tasks=tasks,
        gpus_per_node=gpn,
        nodes=nodes,
        cores=acct.cpus or a.cores,
        gpus=acct.gpus if acct.gpus is not None else a.gpus,
    )


def _cpu_sec(acct: JobAccounting) -> float | None:
    """The CPU time of every step, summed (the allocation's own where no step has one)."""
    stepped = [s.cpu_sec for s in acct.steps if s.cpu_sec is not None]
    return sum(stepped) if stepped else acct.cpu_sec


def _cpu(
    acct: JobAccounting, ended: bool, cores: int | None, tel: ResourceSummary | None
) -> Figure:
    elapsed = acct.elapsed_sec
    cpu_sec = _cpu_sec(acct)
    if acct.source == "sacct" and ended and cpu_sec is not None:
        if not elapsed or not acct.cpus:
            return Figure(None, "sacct", "the job ran less than a second, or held no CPUs")
        return Figure(
            cpu_sec / (elapsed * acct.cpus),
            "sacct",
            f"TotalCPU {cpu_sec:.1f} s / (Elapsed {elapsed:.0f} s x {acct.cpus} CPUs)",
        )
    used = [h.cpu_avg for h in tel.hosts if h.cpu_avg is not None] if tel else []
    if used and cores:
        busy = sum(used) / 100
        return Figure(
            busy / cores,
            "ddp-tui telemetry",
            f"{busy:.1f} cores busy on average / {cores} held" + ("" if ended else ", so far"),
        )
    if acct.source == "sacct" and not ended:
        return Figure(None, "", "sacct counts a step's CPU time when the step ends")
    return Figure(None, "", "no CPU time recorded")


def _memory(
    acct: JobAccounting, ended: bool, tel: ResourceSummary | None
) -> tuple[Figure, tuple[NodeMemory, ...]]:
    hosts = [h for h in tel.hosts if h.memory.peak is not None] if tel else []
    if hosts:
        per_node = tuple(
            NodeMemory(h.host, h.memory.peak or 0.0, "exact", "the node's summed RSS, sampled")
            for h in hosts
        )
        source = "ddp-tui telemetry"
    else:
        per_node = node_peaks(acct.steps)
        source = "sacct" if acct.source == "sacct" else ""
    if not per_node:
        note = (
            "accounting holds no memory sample (a step shorter than Slurm's sampling "
            "interval, JobAcctGatherFrequency, has none)"
            if acct.source == "sacct"
            else "no memory samples"
        )
        if acct.source == "sacct" and not ended:
            note = "sacct records a step's memory when the step ends"
        return Figure(None, "", note), ()
    top = max(per_node, key=lambda n: n.peak_mib)
    note = f"{top.bound}, on {top.node}: {top.how}" + ("" if ended else "; so far")
    return Figure(top.peak_mib, source, note), per_node


def _steps_gpu(steps: Sequence[StepUsage]) -> tuple[float | None, float | None]:
    """sacct's GPU utilisation (%, the steps' averages weighted by their run time) and
    GPU memory peak (MiB), where the cluster records them."""
    util = [(s.usage_ave[GPU_UTIL], s.elapsed_sec or 0.0) for s in steps if GPU_UTIL in s.usage_ave]
    weight = sum(w for _, w in util)
    avg = (
        sum(u * w for u, w in util) / weight
        if weight
        else (sum(u for u, _ in util) / len(util) if util else None)
    )
    mems = [s.usage_max[GPU_MEM] for s in steps if GPU_MEM in s.usage_max]
    return avg, (max(mems) if mems else None)


def _gpu(
    acct: JobAccounting, gpus: int | None, tel: ResourceSummary | None
) -> tuple[Figure, Figure]:
    if gpus == 0:
        return Figure(None, "", "no GPUs"), Figure(None, "", "no GPUs")
    util, mem = (tel.gpu_util_avg, tel.gpu_mem_peak_mib) if tel else (None, None)
    util_fig = Figure(util, "ddp-tui telemetry") if util is not None else None
    mem_fig = Figure(mem, "ddp-tui telemetry") if mem is not None else None
    s_util, s_mem = _steps_gpu(acct.steps)
    ours = "ddp-tui's telemetry has no GPU samples" if tel else "no ddp-tui telemetry"
    why = ours + ", and sacct records no {} (AccountingStorageTRES)"
    if util_fig is None:
        util_fig = (
            Figure(s_util, "sacct", "TRESUsageInAve gres/gpuutil")
            if s_util is not None
            else Figure(None, "", why.format("gres/gpuutil"))
        )
    if mem_fig is None:
        mem_fig = (
            Figure(s_mem, "sacct", "TRESUsageInMax gres/gpumem")
            if s_mem is not None
            else Figure(None, "", why.format("gres/gpumem"))
        )
    return util_fig, mem_fig


def _idle_gpus(tel: ResourceSummary | None) -> tuple[int, ...] | None:
    """Per node, its GPUs that averaged at most IDLE_GPU_PCT busy; None without per-GPU
    utilisation."""
    if tel is None:
        return None
    by_node: dict[int, list[float]] = {}
    for d in tel.devices:
        if d.util_avg is not None:
            by_node.setdefault(d.node, []).append(d.util_avg)
    if not by_node:
        return None
    return tuple(sum(u <= IDLE_GPU_PCT for u in utils) for utils in by_node.values())


@dataclass(frozen=True)
class EfficiencyFigures:
    """What a job used of the CPUs and memory it held: the figures a table's efficiency
    column shows, and the report's first ones (:func:`efficiency_figures`)."""

    cpu: Figure  # a fraction of the cores held, busy on average
    peak: Figure  # the largest node's peak memory, MiB
    mem: Figure  # that peak over the memory per node
    per_node: tuple[NodeMemory, ...]
    mem_per_node_mib: float | None


def efficiency_figures(
    acct: JobAccounting,
    *,
    ended: bool,
    telemetry: ResourceSummary | None = None,
    cores: int | None = None,
    mem_asked: str | None = None,
) -> EfficiencyFigures:
    """CPU and memory efficiency of one attempt, each with its source (sources as the
    module says; ``cores`` and ``mem_asked``, what a run's spec held, stand in where
    accounting does not say). The part of :func:`usage_report` that a listing of many jobs
    needs, without the rest of the report."""
    tel = telemetry if telemetry is not None and not telemetry.empty else None
    cpu = _cpu(acct, ended, cores, tel)
    peak, per_node = _memory(acct, ended, tel)
    mem_per_node = memory_per_node_mib(acct)
    if mem_per_node is None and mem_asked:
        mem_per_node = size_mib(mem_asked) or None  # "0": all of the node's, size unknown
    if peak.value is not None and mem_per_node:
        mem_eff = Figure(
            peak.value / mem_per_node,
            peak.source,
            f"peak {peak.value:.0f} MiB of {mem_per_node:.0f} MiB per node",
        )
    else:
        mem_eff = Figure(
            None,
            "",
            "the peak per node was not measured" if mem_per_node else "no memory per node recorded",
        )
    return EfficiencyFigures(cpu, peak, mem_eff, per_node, mem_per_node)


def usage_report(
    acct: JobAccounting,
    *,
    ended: bool,
    telemetry: ResourceSummary | None = None,
    asked: Asked | None = None,
    run_id: str | None = None,
) -> UsageReport:
    """The usage report of one attempt. ``ended``: the job has ended (its state is final);
    while it runs the figures are what is known so far and there is no suggestion."""
    a = asked_from(acct, asked)
    tel = telemetry if telemetry is not None and not telemetry.empty else None
    eff = efficiency_figures(acct, ended=ended, telemetry=tel, cores=a.cores, mem_asked=a.mem)
    cpu, peak, per_node, mem_per_node = eff.cpu, eff.peak, eff.per_node, eff.mem_per_node_mib
    mem_eff = eff.mem
    gpus = a.gpus
    util, gpu_mem = _gpu(acct, gpus, tel)
    elapsed, limit = acct.elapsed_sec, acct.time_limit_sec
    if limit is None and a.time_limit:
        from ddp_tui.spec.timefmt import parse_time_limit_seconds

        try:
            limit = float(parse_time_limit_seconds(a.time_limit))
        except ValueError:
            limit = None
    if elapsed is not None and limit:
        time_used = Figure(elapsed / limit, acct.source, f"{elapsed:.0f} s of {limit:.0f} s")
    else:
        time_used = Figure(None, "", "no time limit recorded" if elapsed is not None else "")
    if gpus is not None and elapsed is not None:
        alloc = Figure(device_hours(gpus, elapsed), acct.source, f"{gpus} GPUs x elapsed")
    else:
        alloc = Figure(None, "", "the GPUs held were not recorded")
    if alloc.value is not None and util.value is not None:
        busy = Figure(alloc.value * util.value / 100, util.source, "GPU-hours x utilisation")
    else:
        busy = Figure(None, "", "no GPUs" if gpus == 0 else "GPU utilisation " + NOT_MEASURED)
    cores_per_task = None
    cpu_sec = _cpu_sec(acct)
    if cpu.value is not None and a.tasks and elapsed:
        if cpu.source == "sacct" and cpu_sec is not None:
            cores_per_task = cpu_sec / elapsed / a.tasks
        elif a.cores:
            cores_per_task = cpu.value * a.cores / a.tasks
    top = max(per_node, key=lambda n: n.peak_mib) if per_node else None
    used = UsedResources(
        state=acct.state,
        ended=ended,
        peak_mib_per_node=peak.value,
        peak_bound=top.bound if top else "exact",
        mem_per_node_mib=mem_per_node,
        mem_asked=a.mem,
        elapsed_sec=elapsed,
        time_limit_sec=limit,
        cores_used_per_task=cores_per_task,
        cpus_per_task=a.cpus_per_task,
        gpus_per_node=a.gpus_per_node,
        idle_gpus_per_node=_idle_gpus(tel),
        gpu_util_avg=util.value,
    )
    notes: list[str] = []
    if acct.attempts > 1:
        notes.append(f"requeued: accounting holds {acct.attempts} attempts; this is the last")
    if not ended:
        notes.append("the job has not ended: figures so far, the suggestion once it ends")
    quiet = [s.step for s in acct.steps if s.step != "extern" and not node_peaks([s])]
    if acct.source == "sacct" and quiet and per_node and not tel:
        notes.append("steps with no memory sample (not counted): " + ", ".join(quiet))
    return UsageReport(
        job_id=acct.job_id,
        run_id=run_id,
        name=acct.name,
        state=acct.state,
        ended=ended,
        source=acct.source,
        attempts=acct.attempts,
        elapsed_sec=elapsed,
        time_limit_sec=limit,
        nodes=acct.nodes,
        cpus=acct.cpus or a.cores,
        gpus=gpus,
        mem_per_node_mib=mem_per_node,
        cpu_efficiency=cpu,
        max_rss_mib_per_node=peak,
        mem_efficiency=mem_eff,
        gpu_util_avg=util,
        gpu_mem_peak_mib=gpu_mem,
        time_used_fraction=time_used,
        gpu_hours_allocated=alloc,
        gpu_hours_busy=busy,
        per_node=per_node,
        suggestion=right_size(used, time_limit_asked=a.time_limit),
        notes=tuple(notes),
    )


# -- in words -------------------------------------------------------------------------------

#: Each figure's label in the text, by its JSON name.
LABELS: Final = {
    "cpu_efficiency": "CPU efficiency",
    "max_rss_mib_per_node": "peak memory per node",
    "mem_efficiency": "memory efficiency",
    "gpu_util_avg": "GPU utilisation",
    "gpu_mem_peak_mib": "GPU memory peak",
    "time_used_fraction": "time used",
    "gpu_hours_allocated": "GPU-hours held",
    "gpu_hours_busy": "GPU-hours busy",
}


def value_text(name: str, value: float | None) -> str:
    """A figure's value for a table cell; "not measured" for None, never 0."""
    if value is None:
        return NOT_MEASURED
    if name in ("cpu_efficiency", "mem_efficiency", "time_used_fraction"):
        return f"{value * 100:.1f} %"
    if name == "gpu_util_avg":
        return f"{value:.1f} %"
    if name in ("max_rss_mib_per_node", "gpu_mem_peak_mib"):
        return f"{value:.0f} MiB"
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def report_rows(report: UsageReport) -> list[tuple[str, str, str]]:
    """(what, value, where from) for each figure, in :attr:`UsageReport.FIGURES` order."""
    rows = []
    for name in report.FIGURES:
        fig = report.figure(name)
        source = "; ".join(p for p in (fig.source, fig.note) if p)
        rows.append((LABELS[name], value_text(name, fig.value), source))
    return rows
