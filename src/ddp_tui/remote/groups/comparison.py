"""A group's runs read through the store, and its comparison written next to the runs.

The I/O side of :mod:`ddp_tui.reports.results` and :mod:`ddp_tui.reports.outcomes`, whose
summaries and tables are pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ddp_tui.advisor import Advice
from ddp_tui.advisor.report import advice_csv, advice_markdown
from ddp_tui.remote.observe.followers import MetricsCache, TelemetryCache
from ddp_tui.remote.store.runs import RunInfo, RunRef, RunStore, RunStoreError, spec_nodes
from ddp_tui.remote.store.tail import MetricsRow
from ddp_tui.reports.outcomes import (
    Member,
    Outcomes,
    outcome_table,
    outcomes_note,
    total_hours_text,
    with_outcomes,
)
from ddp_tui.reports.results import RunData, comparison_markdown, scaling_table, to_csv

#: The heading of the advice's section in ``comparison.md``.
ADVICE_HEADING = "## Scaling advice"


def load_run(
    store: RunStore,
    run: RunRef | RunInfo,
    telemetry: TelemetryCache | None = None,
    *,
    metrics: Sequence[MetricsRow] | None = None,
) -> RunData:
    """Read one run's spec, metrics, run.json and telemetry through the store's executor
    (``resources`` is None when the run wrote no telemetry). ``telemetry`` keeps runs' files
    read between calls; without it they are read whole. ``metrics``: the run's rows, read
    already (else ``metrics.csv`` is read whole)."""
    if isinstance(run, RunInfo):
        ref, spec_json = run.ref, dict(run.spec_json)
    else:
        ref, spec_json = run, store.read_spec(run)
    spec = spec_json.get("spec")
    group = spec_json.get("group")
    spec = spec if isinstance(spec, Mapping) else {}
    readers = (telemetry or TelemetryCache(store.executor)).readers(ref, spec_nodes(spec))
    summary = readers.accumulator.summary()
    return RunData(
        run_id=ref.run_id,
        spec=spec,
        metrics=store.read_metrics(ref) if metrics is None else metrics,
        run_json=store.read_run_json(ref),
        group=group if isinstance(group, str) else None,
        resources=None if summary.empty else summary,
    )


def load_group(
    store: RunStore,
    group: str,
    telemetry: TelemetryCache | None = None,
    metrics: MetricsCache | None = None,
) -> list[RunData]:
    """Every run of a comparison group. ``metrics`` keeps the runs' rows read between calls
    (each call parses only the rows appended since); without it each file is read whole."""
    infos = [info for info in store.list_runs() if info.group == group]
    rows = (metrics or MetricsCache(store.executor)).rows([info.ref for info in infos])
    return [load_run(store, info, telemetry, metrics=rows[info.run_id]) for info in infos]


def recorded_member(run: RunData, info: RunInfo | None) -> Member:
    """``run`` with the elapsed time and state its latest attempt's recorded end gives
    (``jobs.jsonl``; none yet: 0 s and no state). What an export knows without asking the
    scheduler; Compare asks through the facade's views (:mod:`ddp_tui.remote.groups.outcomes_io`),
    which agree for every ended run."""
    job = info.latest_job if info is not None else None
    end = info.ends.get(str(job.get("job_id"))) if info is not None and job else None
    elapsed = end.get("elapsed_sec") if end else None
    state = end.get("state") if end else None
    return Member(
        run,
        elapsed_sec=float(elapsed) if isinstance(elapsed, int | float) else 0.0,
        state=state if isinstance(state, str) else None,
    )


def recorded_outcomes(store: RunStore, group: str, runs: Sequence[RunData]) -> Outcomes:
    """The outcome table of ``runs`` (``group``'s, loaded already), from what their run
    directories record (:func:`recorded_member`)."""
    infos = {info.run_id: info for info in store.list_runs()}
    return outcome_table(group, [recorded_member(r, infos.get(r.run_id)) for r in runs])


def _safe_dir_name(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group).strip("._") or "group"


def export_comparison(
    store: RunStore,
    group: str,
    *,
    runs: Sequence[RunData] | None = None,
    out_dir: str | None = None,
    telemetry: TelemetryCache | None = None,
    metrics: MetricsCache | None = None,
    advice: Advice | str | None = None,
    outcomes: Outcomes | None = None,
) -> list[str]:
    """Write ``comparison.md`` and ``comparison.csv`` for ``group``; returns their paths.

    Both hold one table, a row per run: the outcome table (``outcomes``; by default
    :func:`recorded_outcomes`: the fields that differ, the outcomes, the best marked), then
    the scaling table's columns (:func:`ddp_tui.reports.outcomes.with_outcomes`). The Markdown says
    below it what differs, the metric, and the group's total hours. ``advice``: the
    group's scaling advice, appended to the Markdown as a section and written as
    ``advice.csv`` beside the CSV; or why it could not be computed, said in that section
    (and no ``advice.csv``). By default the files go to ``<runs_root>/comparisons/<group>/``
    on the store's machine.
    """
    if runs is None:
        runs = load_group(store, group, telemetry, metrics)
    df = scaling_table(runs)
    if outcomes is None:
        outcomes = recorded_outcomes(store, group, runs)
    out_dir = out_dir or f"{store.root.rstrip('/')}/comparisons/{_safe_dir_name(group)}"
    markdown = comparison_markdown(group, with_outcomes(df, outcomes, display=True))
    markdown = f"{markdown.rstrip()}\n\n{outcomes_note(outcomes)}\n\n{total_hours_text(outcomes)}\n"
    files = {f"{out_dir}/comparison.md": markdown}
    files[f"{out_dir}/comparison.csv"] = to_csv(with_outcomes(df, outcomes))
    if advice is not None:
        md_path = f"{out_dir}/comparison.md"
        files[md_path] = _with_advice(files[md_path], advice)
        if not isinstance(advice, str):
            files[f"{out_dir}/advice.csv"] = advice_csv(advice)
    try:
        store.executor.makedirs(out_dir)
        for path, text in files.items():
            store.executor.write_atomic(path, text.encode())
    except OSError as exc:  # a read-only or full runs root: where and why, not a traceback
        raise RunStoreError(
            f"cannot write the comparison to {out_dir}: {exc.strerror or exc}"
        ) from exc
    return list(files)


def _with_advice(markdown: str, advice: Advice | str) -> str:
    """``comparison.md`` with the advice's section (or why there is none) at its end."""
    if isinstance(advice, str):
        section = f"{ADVICE_HEADING}\n\nThe advice could not be computed: {advice}"
    else:
        section = advice_markdown(advice)  # its own heading: ADVICE_HEADING and the group
    return f"{markdown.rstrip()}\n\n{section.strip()}\n"
