"""The verification checklist, as pure functions over what a run's files and its job say.

The facade (:meth:`Cluster.verify`) reads the files; these decide. A training run is
checked for nodes, world size and backend, every epoch and a checkpoint; a preflight run
for every rank answering, its bandwidth rows and its nodes. Both are checked for how the
job ended, and the two records of that end (the trainer's ``run.json`` and the
scheduler's state) are compared, so that a run that trained to the end but whose launcher
still failed is reported as exactly that.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddp_tui.preflight_report import PreflightSummary, summarize
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.run_damage import Damage, finite_epoch, finite_step
from ddp_tui.spec import ExperimentSpec


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not applicable yet
    detail: str


@dataclass(frozen=True)
class RunFiles:
    """What the checklist needs of a run directory, as the facade read it."""

    run_json: Mapping[str, Any] | None = None
    preflight: Mapping[str, Any] | None = None  # preflight.json (preflight runs)
    metrics: Sequence[Mapping[str, float | None]] = ()  # metrics.csv rows (training runs)
    checkpoint_bytes: int | None = None  # checkpoints/latest.pt's size; None: absent
    #: A user's script: the files it left in its checkpoint directory (None: not looked).
    script_checkpoints: tuple[str, ...] | None = None
    accounting_saved: bool = False  # sacct.txt exists


def verify_run(
    spec: ExperimentSpec,
    kind: str,
    job_id: str | None,
    status: JobStatus | None,
    files: RunFiles,
) -> list[Check]:
    """The whole checklist of one run (``kind`` "train", "preflight" or "adopted") whose
    latest attempt is ``job_id`` with ``status`` (None: unknown). An adopted run's script is
    not ddp-tui's: how its job ended is all there is to check."""
    state = status.state if status else JobState.UNKNOWN
    exit_code = status.exit_code if status else None
    checks = [completed_check(state, exit_code, files.run_json, job_id)]
    if kind == "preflight":
        checks += preflight_checks(spec, state, summarize(files.preflight))
    elif kind != "adopted":
        # An epoch of NaN or inf is no epoch: it counts as a gap, never as a traceback.
        epochs = [finite_epoch(r.get("epoch")) for r in files.metrics if r.get("epoch") is not None]
        # A script with no epochs: its rows are step windows (an empty epoch, a step).
        windows = [
            finite_step(r.get("step"))
            for r in files.metrics
            if r.get("epoch") is None and r.get("step") is not None
        ]
        checks += training_checks(spec, state, files.run_json, epochs, windows)
        checks += checkpoint_checks(spec, files)
    checks.append(accounting_check(state.is_terminal, files.accounting_saved))
    return checks


def outcome_note(
    state: JobState, exit_code: int | None, run_json: Mapping[str, Any] | None, job_id: str | None
) -> str:
    """What to say where the trainer's record and the job's end disagree; "" where they
    agree.

    torchrun or the job script can exit non-zero after every rank finished (a rank that
    died in interpreter teardown, an ``srun`` step that failed afterwards). Such a job is
    FAILED, and must not be turned into success; but "FAILED" alone would send the user
    looking for a training bug that is not there.
    """
    trained = run_json is not None and run_json.get("state") == "completed"
    if not trained or not state.is_terminal or state is JobState.COMPLETED:
        return ""
    code = f" (exit code {exit_code})" if exit_code is not None else ""
    return (
        f"run.json says the trainer completed, but job {job_id or '-'} ended "
        f"{state.value}{code}: something after training failed (the launcher or the job "
        "script); see the .err log"
    )


def completed_check(
    state: JobState, exit_code: int | None, run_json: Mapping[str, Any] | None, job_id: str | None
) -> Check:
    note = outcome_note(state, exit_code, run_json, job_id)
    return Check(
        "job completed",
        True if state is JobState.COMPLETED else (None if state.is_active else False),
        note or f"job {job_id or '-'} is {state.value}",
    )


#: What the epoch check adds for a script none of whose epochs was recognised; `why` (the
#: no-epochs rule) says the same and suggests a --metrics.
NONE_RECOGNISED = ": no epochs were recognised (ddp-tui why suggests a --metrics)"


def training_checks(
    spec: ExperimentSpec,
    state: JobState,
    run_json: Mapping[str, Any] | None,
    epochs: Sequence[int | None],
    windows: Sequence[int | None] = (),
) -> list[Check]:
    """Nodes, world size and backend (as the ranks formed them, where a user's script was
    observed), and every epoch (or, for a script with none, every logged step window)."""
    hosts = [str(h) for h in run_json.get("hosts", [])] if run_json else []
    ws = run_json.get("world_size") if run_json else None
    be = run_json.get("backend") if run_json else None
    want_be = spec.backend if spec.backend != "auto" else None
    # Compared in place, not as a list of every epoch wanted: spec.epochs is read from a file.
    every = len(epochs) == spec.epochs and all(e == i for i, e in enumerate(epochs, start=1))
    observed = run_json.get("observed") if run_json else None
    group: list[Check] = []
    how = ""
    want_ws = spec.world_size
    if isinstance(observed, dict) and observed.get("group") != "unknown":
        ws, be, how = observed.get("world_size"), observed.get("backend"), " as formed"
        want_ws, spawned = expected_world(spec, observed)
        how += spawned
        if observed.get("group") == "none":  # no group: each process is a world of its own
            ws, be, how = 1, None, " (no process group)"
            want_be = None if spec.world_size == 1 else want_be
        group = [group_check(spec, observed), *sync_checks(spec, observed)]
    elif spec.entry == "script" and run_json:
        how = " as launched (not observed)"
    return [
        Check(
            "nodes used match the request",
            None if not run_json else len(set(hosts)) == spec.nodes,
            f"requested {spec.nodes}, ran on {len(set(hosts))}: {', '.join(hosts) or '-'}",
        ),
        *group,
        Check(
            "world size and backend match the spec",
            None if not run_json else ws == want_ws and (want_be in (None, be)),
            f"world size {ws} (spec {spec.world_size}), backend {be} (spec {spec.backend}){how}",
        ),
        rows_check(spec, state, run_json, epochs, windows, every),
    ]


#: The row check of a script with no epochs (an iteration loop): its step windows.
WINDOWS_CHECK = "every logged window is in metrics.csv"


def rows_check(
    spec: ExperimentSpec,
    state: JobState,
    run_json: Mapping[str, Any] | None,
    epochs: Sequence[int | None],
    windows: Sequence[int | None],
    every: bool,
) -> Check:
    """Every epoch asked for; a script's epochs where it was asked for none; or, for a
    script with no epochs, every step window its wrapper made (run.json's ``step_windows``),
    and its step budget reached where one is known."""
    pending = state.is_active
    script = spec.entry == "script"
    if script and not epochs and (windows or spec.epochs is None):
        made = run_json.get("step_windows") if run_json else None
        made = made if isinstance(made, int) else None
        ok = bool(windows) and _ascending(windows) and (made is None or len(windows) >= made)
        detail = f"{len(windows)}/{made if made is not None else len(windows)} logged windows"
        if not windows:
            detail = "no rows: no epochs and no step windows were recognised"
        budget = run_json.get("max_steps") if run_json else None
        done = run_json.get("steps_completed") if run_json else None
        if isinstance(budget, int) and budget > 0:
            reached = isinstance(done, int) and done >= budget
            ok = ok and reached
            detail += f"; {done if isinstance(done, int) else 0}/{budget} steps"
        if not _ascending(windows):
            detail += " (duplicates or gaps)"
        return Check(WINDOWS_CHECK, None if pending else ok, detail)
    if script and spec.epochs is None:  # epochs nobody asked a number of: each one is a row
        return Check(
            "every epoch is in metrics.csv",
            None if pending else _ascending(epochs),
            f"{len(epochs)} epochs" + ("" if _ascending(epochs) else " (duplicates or gaps)"),
        )
    return Check(
        "every epoch is in metrics.csv",
        None if pending else every,
        f"{len(epochs)}/{spec.epochs} epochs"
        + ("" if _ascending(epochs) else " (duplicates or gaps)")
        + (NONE_RECOGNISED if script and not epochs else ""),
    )


def _ascending(epochs: Sequence[int | None]) -> bool:
    """Each epoch a number, and above the one before."""
    known = [e for e in epochs if e is not None]
    return len(known) == len(epochs) and all(a < b for a, b in itertools.pairwise(known))


def expected_world(spec: ExperimentSpec, observed: Mapping[str, Any]) -> tuple[int, str]:
    """The world size a script's group should have, and how that was worked out: the
    launched processes, times the processes each starts where the script spawns its own."""
    spawn = observed.get("spawn")
    nprocs = spawn.get("nprocs") if isinstance(spawn, Mapping) else None
    if not isinstance(nprocs, int) or nprocs < 1:
        return spec.world_size, ""
    return spec.world_size * nprocs, f", {nprocs} spawned by each of the {spec.world_size} launched"


def group_check(spec: ExperimentSpec, observed: Mapping[str, Any]) -> Check:
    """The ranks of a user's script formed one process group and trained in it."""
    state = observed.get("group")
    reason = str(observed.get("reason") or state)
    if expected_world(spec, observed)[0] < 2:
        return Check("the process trained", state != "unknown", reason)
    return Check("the ranks trained in one process group", state == "formed", reason)


#: The check of a group's gradient synchronisation (``why``: no-grad-sync).
SYNC_CHECK = "the ranks synchronised their gradients"


def sync_checks(spec: ExperimentSpec, observed: Mapping[str, Any]) -> list[Check]:
    """Ranks in one group that trained together: a DDP/FSDP wrap or gradient all-reduces
    were seen (observed.sync). Only for a group that formed: the group check already fails
    one that did not, and a sync state nobody observed is not checked."""
    sync = observed.get("sync")
    if observed.get("group") != "formed" or not isinstance(sync, Mapping):
        return []
    state = sync.get("state")
    if state not in ("synchronised", "never") or expected_world(spec, observed)[0] < 2:
        return []
    detail = str(sync.get("reason") or state)
    divergence = observed.get("divergence")
    if state == "never" and isinstance(divergence, Mapping) and divergence.get("evidence"):
        detail += f"; {divergence['evidence']}"
    return [Check(SYNC_CHECK, state == "synchronised", detail)]


def checkpoint_checks(spec: ExperimentSpec, files: RunFiles) -> list[Check]:
    """The trainer's checkpoint must exist. A user's script keeps its checkpoints as it
    likes, or not at all: what it left in its checkpoint directory is listed, if anything."""
    if spec.entry != "script":
        size = files.checkpoint_bytes
        detail = f"{size / 2**20:.1f} MiB" if size is not None else "missing"
        return [Check("a checkpoint exists", size is not None, f"checkpoints/latest.pt {detail}")]
    if not files.script_checkpoints:
        return []
    names = ", ".join(sorted(files.script_checkpoints)[:3])
    more = len(files.script_checkpoints) - 3
    return [
        Check(
            "a checkpoint exists",
            True,
            f"checkpoints/: {names}" + (f" and {more} more" if more > 0 else ""),
        )
    ]


def preflight_checks(spec: ExperimentSpec, state: JobState, pf: PreflightSummary) -> list[Check]:
    """Every rank answered, the bandwidth rows are there, and the nodes match."""
    pending = None if state.is_active else False
    if pf.ok is None:
        return [
            Check("every rank answered", pending, "no preflight.json yet"),
            Check("bandwidth rows are present", pending, "no preflight.json yet"),
            Check("nodes used match the request", pending, "no preflight.json yet"),
        ]
    answered = pf.ok and not pf.failed_ranks and pf.world_size == spec.world_size
    failed = f"; failed ranks {list(pf.failed_ranks)}" if pf.failed_ranks else ""
    error = f"; {pf.error}" if pf.error else ""
    single = pf.world_size == 1
    hosts = sorted(set(pf.hosts))
    return [
        Check(
            "every rank answered",
            answered,
            f"world size {pf.world_size} (spec {spec.world_size}){failed}{error}",
        ),
        Check(
            "bandwidth rows are present",
            pf.bandwidth_rows > 0 or (single and pf.ok),
            f"{pf.bandwidth_rows} message sizes"
            + (
                " (a single process has no collectives to time)"
                if single and not pf.bandwidth_rows
                else ""
            ),
        ),
        Check(
            "nodes used match the request",
            len(hosts) == spec.nodes if hosts else None,
            f"requested {spec.nodes}, ran on {len(hosts)}: {', '.join(hosts)}"
            if hosts
            else "preflight.json names no hosts",
        ),
    ]


def damage_check(damage: Sequence[Damage]) -> Check:
    """The run directory holds what ddp-tui and the job wrote, as they wrote it (see
    :mod:`ddp_tui.remote.store.run_damage`); the checks below read around what is damaged."""
    if not damage:
        return Check("the run directory is intact", True, "every file read as written")
    more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
    return Check("the run directory is intact", False, f"DAMAGED: {damage[0]}{more}")


def accounting_check(terminal: bool, saved: bool) -> Check:
    return Check(
        "accounting summary saved to sacct.txt",
        saved if (saved or terminal) else None,
        "saved" if saved else "not yet (the job has not ended)",
    )
