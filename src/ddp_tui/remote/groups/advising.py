"""A group's scaling advice: its runs, their step times and the partition's preflights, read
through the store and handed to the pure model of :mod:`ddp_tui.advisor`.

The I/O side of the advisor, as :mod:`ddp_tui.remote.groups.comparison` is the I/O side of
:mod:`ddp_tui.reports.results`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ddp_tui.advisor import Advice, AdvisorInputs, FabricSample, SizeRun, advise, measure
from ddp_tui.errors import DdpTuiError
from ddp_tui.jobfiles import STEP_TIMES_FILE
from ddp_tui.remote.groups.comparison import export_comparison, load_group
from ddp_tui.remote.observe.followers import MetricsCache, TelemetryCache, catch_up
from ddp_tui.remote.store.runs import PREFLIGHT_FILE, RunInfo, RunStore, spec_nodes
from ddp_tui.remote.store.tail import JsonLinesReader
from ddp_tui.reports.results import RunData
from ddp_tui.spec.gpu_types import GpuKind, resolve_gpu_type
from ddp_tui.spec.partitions import PartitionInfo

#: The efficiency the advice keeps to when neither ``--threshold`` nor the profile says.
DEFAULT_THRESHOLD: Final = 0.8


class NoAdvice(DdpTuiError):
    """A group the advisor has nothing to measure in yet (no run has a steady epoch)."""

    title = "Advice"


class _StepTimesReader(JsonLinesReader):
    """``step_times.jsonl``, every line kept: a torn last line (an epoch being written) is
    held back by the file reader until it is whole, and broken lines are skipped."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.lines: list[dict[str, Any]] = []

    def _restart(self) -> None:
        super()._restart()
        self.lines = []

    def _parse(self, lines: list[str]) -> list[dict[str, Any]]:
        out = super()._parse(lines)
        self.lines.extend(out)
        return out


def read_step_times(store: RunStore, runs: Sequence[RunData]) -> dict[str, list[dict[str, Any]]]:
    """Each run's ``step_times.jsonl`` lines by run id (none where the file is absent), every
    run's file in the same batches."""
    readers = {r.run_id: _StepTimesReader(store.ref(r.run_id).file(STEP_TIMES_FILE)) for r in runs}
    catch_up(store.executor, list(readers.values()))
    return {run_id: reader.lines for run_id, reader in readers.items()}


def _partition_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    value = spec.get("partition")
    return tuple(p for p in value.split(",") if p) if isinstance(value, str) else ()


def _same_place(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two specs ran on the same partition (the default one when empty), device and
    GPU type: a gloo CPU preflight says nothing about NCCL on the GPUs, nor one on the
    partition's A100 nodes about its H100 ones."""
    return (
        _partition_names(a) == _partition_names(b)
        and a.get("device") == b.get("device")
        and a.get("gpu_type", "") == b.get("gpu_type", "")
    )


def fabric_samples(
    store: RunStore, infos: Sequence[RunInfo], like: Mapping[str, Any]
) -> list[FabricSample]:
    """The all-reduce tables of the passed preflights that ran where ``like`` (a group run's
    spec) runs."""
    out: list[FabricSample] = []
    for info in infos:
        if info.kind != "preflight" or not _same_place(info.spec, like):
            continue
        doc = store.read_json(info.ref, PREFLIGHT_FILE)
        if doc is None:
            continue
        names = _partition_names(info.spec)
        sample = measure.fabric_sample(
            info.run_id, doc, spec_nodes(info.spec), ",".join(names) or None
        )
        if sample is not None:
            out.append(sample)
    return out


def partition_size(spec: Mapping[str, Any], partitions: Sequence[PartitionInfo]) -> int | None:
    """The most processes the group's partition holds (None: unknown).

    On GPUs it is the partition's nodes times its GPUs per node, only the nodes of the spec's
    GPU type where it has one; for a CPU run its cores (a node takes more processes than it
    has cores, but they then share them, which no measured run showed). An empty partition
    is the cluster's default one; of several, the largest counts."""
    names = _partition_names(spec)
    chosen = (
        [p for p in partitions if p.name in names]
        if names
        else [p for p in partitions if p.is_default]
    )
    if not chosen:
        return None
    cpu = spec.get("device") == "cpu"
    gpu_type = spec.get("gpu_type")

    def processes(p: PartitionInfo) -> int:
        nodes = p.nodes
        if not cpu and isinstance(gpu_type, str) and gpu_type:
            kind = resolve_gpu_type(gpu_type, p.gpu_kinds)
            nodes = kind.nodes if isinstance(kind, GpuKind) and kind.nodes else 0
        nodes = nodes if p.max_nodes is None else min(nodes, p.max_nodes)
        return nodes * (p.cpus_per_node if cpu else p.gpus_per_node)

    size = max(processes(p) for p in chosen)
    return size if size > 0 else None


def advise_group(
    store: RunStore,
    group: str,
    *,
    partitions: Sequence[PartitionInfo],
    telemetry: TelemetryCache | None = None,
    metrics: MetricsCache | None = None,
    threshold: float | None = None,
    deadline_sec: float | None = None,
    runs: Sequence[RunData] | None = None,
) -> Advice:
    """The scaling advice of ``group`` (see :mod:`ddp_tui.advisor`).

    ``threshold``: the efficiency to keep to (None: :data:`DEFAULT_THRESHOLD`; the facade
    passes the profile's). ``runs``: the group's runs, loaded already. Raises LookupError
    for a group with no runs, and :class:`NoAdvice` while none of its runs has a steady
    epoch."""
    if runs is None:
        runs = load_group(store, group, telemetry, metrics)
    if not runs:
        raise LookupError(f"no runs in group {group!r}")
    step_times = read_step_times(store, runs)
    sized = [measure.size_run(run, step_times.get(run.run_id, ())) for run in runs]
    size_runs: tuple[SizeRun, ...] = tuple(s for s in sized if s is not None)
    if not size_runs:
        raise NoAdvice(
            f"group {group!r}: no run has a steady epoch yet (the first epoch is warm-up, so a "
            "run needs two completed epochs; an iteration loop, two step windows that say "
            "their seconds)"
        )
    like = runs[0].spec
    return advise(
        AdvisorInputs(
            group=group,
            runs=size_runs,
            fabric=tuple(fabric_samples(store, store.list_runs(), like)),
            max_world_size=partition_size(like, partitions),
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            deadline_sec=deadline_sec,
        )
    )


def export_group(
    store: RunStore,
    group: str,
    *,
    partitions: Sequence[PartitionInfo],
    telemetry: TelemetryCache | None = None,
    metrics: MetricsCache | None = None,
    threshold: float | None = None,
) -> list[str]:
    """Write the group's comparison with its advice (``comparison.md``, ``comparison.csv``,
    ``advice.csv``); their paths. A group the advisor cannot advise on yet is still
    exported, its Markdown saying why there is no advice."""
    runs = load_group(store, group, telemetry, metrics)
    advice: Advice | str
    try:
        advice = advise_group(store, group, partitions=partitions, threshold=threshold, runs=runs)
    except (LookupError, NoAdvice) as exc:
        advice = str(exc)
    return export_comparison(store, group, runs=runs, advice=advice)
