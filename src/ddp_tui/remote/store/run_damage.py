"""What can be wrong with what a run directory holds, found where it is read.

A run directory is written by the app, the trainer, a user's script and the scheduler, and
read by the CLI and the app; anything can happen to it in between (a full disk, a hand
edit, a copy gone wrong). Every reader of its files passes what it read through here:

- a file that cannot be read at all (a directory where a file belongs, permission denied,
  a symlink loop, not JSON, not text) is a :class:`Damage`: the file and its problem, in
  words;
- a JSON record keeps only the fields whose type and range are right; each field dropped
  is named as damage, and the rest of the record still counts;
- numbers that cannot be real (``nodes`` beyond the spec's own limit, an infinite epoch)
  are refused like a wrong type, so that nothing downstream sizes a list by them.

A damaged run is still listed (``DAMAGED``, with its damage named) and harms no other run.
Nothing here writes: a reader never "repairs" a run directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ddp_tui.remote.backends.executor import ReadResult
from ddp_tui.spec import FIELDS, ExperimentSpec, SpecError
from ddp_tui.spec.validate import CHECKS
from ddp_tui.spec.vocabulary import MAX_NODES, MAX_PROCS_PER_NODE

#: The state a damaged run shows in ``ls`` and Jobs, in place of its job's.
DAMAGED: Final = "DAMAGED"
#: The name a damage of the run directory itself (not one of its files) goes by.
RUN_DIRECTORY: Final = "run directory"
#: The longest value quoted in a problem; a damaged file can hold megabytes.
_QUOTE_MAX = 40
#: The most epochs a run can have: the spec's own limit.
MAX_EPOCHS: Final = FIELDS["epochs"].maximum or 100_000
MAX_STEPS: Final = FIELDS["max_steps"].maximum or 10**12
MAX_WORLD_SIZE: Final = MAX_NODES * MAX_PROCS_PER_NODE


@dataclass(frozen=True)
class Damage:
    """One problem with one file of a run directory."""

    file: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.problem}"

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "problem": self.problem}


def quoted(value: object) -> str:
    """``value`` as a problem quotes it: its repr, cut short."""
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python prints
        text = "a number too long to print"
    return text if len(text) <= _QUOTE_MAX else text[: _QUOTE_MAX - 3] + "..."


def read_problem(result: ReadResult, *, missing_ok: bool = True) -> str | None:
    """What kept a read of a file from its bytes: it cannot be read, it is a directory, or
    (``missing_ok=False``) it is not there. None: the bytes are what the file holds."""
    if result.error:
        return f"cannot be read ({result.error})"
    if result.stat is None:
        return None if missing_ok else "is missing"
    if result.stat.is_dir:
        return "is a directory, not a file"
    return None


def load_object(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON object file's content, or (None, what is wrong with it)."""
    if not data.strip():
        return None, "is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "is not text (not UTF-8)"
    try:
        obj = json.loads(text)
    except RecursionError:
        return None, "is not JSON (nested too deeply)"
    except ValueError as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"is not JSON, or cut short ({getattr(exc, 'msg', exc)}{where})"
    if not isinstance(obj, dict):
        return None, f"holds {_json_kind(obj)}, not a JSON object"
    return obj, None


def _json_kind(obj: object) -> str:
    if isinstance(obj, list):
        return "a JSON array"
    if isinstance(obj, str):
        return "a JSON string"
    if obj is None:
        return "null"
    return "a JSON number" if isinstance(obj, int | float) else "a JSON value"


# -- field checks ------------------------------------------------------------------------

#: A field's check: its value in, what is wrong with it out (None: it is fine).
FieldCheck = Callable[[object], str | None]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def whole(lo: int, hi: int) -> FieldCheck:
    def check(value: object) -> str | None:
        if _is_int(value) and lo <= value <= hi:  # type: ignore[operator]
            return None
        return f"must be a whole number from {lo} to {hi}"

    return check


def number(lo: float = 0.0, hi: float = math.inf) -> FieldCheck:
    """A finite number in [lo, hi]."""

    def check(value: object) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                if math.isfinite(value) and lo <= value <= hi:
                    return None
            except OverflowError:  # an int too big for a float
                pass
        return f"must be a finite number from {lo:g} to {hi:g}"

    return check


def text(value: object) -> str | None:
    return None if isinstance(value, str) else "must be text"


def job_id(value: object) -> str | None:
    """A job id as jobs.jsonl and run.json give it: text, or a whole number."""
    if (isinstance(value, str) and value.strip()) or (_is_int(value) and value >= 0):  # type: ignore[operator]
        return None
    return "must be a job id (text or a whole number)"


def texts(value: object) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return "must be a list of texts"


def mapping(value: object) -> str | None:
    return None if isinstance(value, dict) else "must be a JSON object"


def optional(check: FieldCheck) -> FieldCheck:
    def opt(value: object) -> str | None:
        return None if value is None else check(value)

    return opt


def clean_record(
    rec: Mapping[str, Any], checks: Mapping[str, FieldCheck]
) -> tuple[dict[str, Any], list[str]]:
    """``rec`` without the fields its ``checks`` refuse, and a problem per refused field.
    Fields without a check are kept as they are (a newer version's)."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in rec.items():
        check = checks.get(key)
        problem = check(value) if check is not None else None
        if problem is None:
            out[key] = value
        else:
            problems.append(f"{key} {problem}, got {quoted(value)}")
    return out, problems


# -- spec.json -----------------------------------------------------------------------------

_SPEC_JSON: Final[Mapping[str, FieldCheck]] = {
    "spec": mapping,
    "group": optional(text),
    "kind": lambda v: (
        None if v in ("train", "preflight", "adopted") else "must be train, preflight or adopted"
    ),
    "created_at": text,
    "run_id": text,
    "ddp_tui_version": text,
}
#: The spec's numeric fields, held to their own descriptions (1 to 1024 nodes, ...): a
#: number beyond them was never submitted, and would size lists downstream.
_NUMERIC: Final = tuple(n for n, f in FIELDS.items() if f.check_name in ("int_range", "number"))


def check_spec_json(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """spec.json without what it must not hold, and what was wrong: fields of the wrong
    type, and numeric spec fields outside their range, are dropped (their defaults stand
    in). Fields the spec does not know are kept (a newer version's)."""
    out, problems = clean_record(doc, _SPEC_JSON)
    spec = dict(out.get("spec") or {})
    if "spec" not in doc:
        problems.append("has no spec")
    try:
        ExperimentSpec.from_dict(spec)
    except SpecError as exc:
        for err in exc.errors:
            problems.append(f"spec.{err.field} {err.message}")
            spec.pop(err.field, None)
    for name in _NUMERIC:
        if name in spec:
            errs = CHECKS[FIELDS[name].check_name](FIELDS[name], spec[name])
            if errs:
                problems.append(f"spec.{name} {errs[0].message}")
                del spec[name]
    if "spec" in out or "spec" in doc:
        out["spec"] = spec
    return out, problems


def spec_json_of(result: ReadResult) -> tuple[dict[str, Any], list[str]]:
    """A run's spec.json as read (the usable part; {} where none is), and its problems."""
    problem = read_problem(result, missing_ok=False)
    if problem is not None:
        return {}, [problem]
    doc, problem = load_object(result.data)
    if doc is None:
        return {}, [problem or "is not a JSON object"]
    return check_spec_json(doc)


# -- jobs.jsonl ----------------------------------------------------------------------------

_ATTEMPT: Final[Mapping[str, FieldCheck]] = {
    "job_id": job_id,
    "scheduler": text,
    "submitted_at": text,
    "retry_of": optional(job_id),
    "attempt": whole(1, 1_000_000),
    "intent": optional(text),
}
_END: Final[Mapping[str, FieldCheck]] = {
    "job_id": job_id,
    "state": text,
    "raw_state": optional(text),
    "exit_code": optional(whole(-1024, 1024)),
    "elapsed_sec": optional(number()),
    "node_list": optional(text),
    "start": optional(text),
    "end": optional(text),
    "reason": optional(text),
    "recorded_at": optional(text),
    "scope": optional(text),
    "diagnosis": optional(mapping),
}


#: A submit's intent (:mod:`ddp_tui.remote.store.run_jobs`): its fields, where they are wrong,
#: are dropped like any other's.
_INTENT: Final[Mapping[str, FieldCheck]] = {
    "token": text,
    "attempt": whole(1, 1_000_000),
    "retry_of": optional(job_id),
    "by": optional(text),
    "at": optional(text),
}
_EVENTS: Final[Mapping[str, Mapping[str, FieldCheck]]] = {
    "intent": _INTENT,
    "intent_void": {"token": text, "at": optional(text)},
}


def clean_job_line(rec: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """One ``jobs.jsonl`` record, its wrong fields dropped, and their problems; None where
    what is left means nothing (an end without a job id or a state). Other events (a
    submit's intent, its voiding) keep their right fields."""
    event = rec.get("event")
    if event is None:
        # Kept even without its job id: it still counts as an attempt and answers its
        # intent, so that nothing takes the run for one never submitted.
        return clean_record(rec, _ATTEMPT)
    if event == "end":
        out, problems = clean_record(rec, _END)
        return (out if "job_id" in out and "state" in out else None), problems
    if not isinstance(event, str):
        return None, [f"event must be text, got {quoted(event)}"]
    return clean_record(rec, _EVENTS.get(event, {}))


# -- usage.json --------------------------------------------------------------------------------

#: The largest fraction a usage record may hold (100 = 10,000 %): a CPU or memory efficiency
#: beyond it is no measurement.
MAX_FRACTION: Final = 100.0
_USAGE: Final[Mapping[str, FieldCheck]] = {
    "job_id": job_id,
    "state": optional(text),
    "cpu_efficiency": optional(number(0.0, MAX_FRACTION)),
    "mem_efficiency": optional(number(0.0, MAX_FRACTION)),
    "max_rss_mib_per_node": optional(number()),
    "time_used_fraction": optional(number(0.0, MAX_FRACTION)),
    "source": text,
    "note": optional(text),
    "recorded_at": optional(text),
}


def check_usage_json(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """usage.json without its wrong fields, and what was wrong; a record without its job id
    says nothing (``{}``)."""
    out, problems = clean_record(doc, _USAGE)
    if "job_id" not in doc:
        problems.append("has no job_id")
    return (out if "job_id" in out else {}), problems


def usage_json_of(result: ReadResult) -> tuple[dict[str, Any] | None, list[str]]:
    """A run's usage.json as read: its usable record (None where there is none, or none
    usable), and its problems. A missing file is no problem: most runs have none yet."""
    problem = read_problem(result)
    if problem is not None:
        return None, [problem]
    if result.stat is None and not result.data:
        return None, []
    doc, problem = load_object(result.data)
    if doc is None:
        return None, [problem or "is not a JSON object"]
    record, problems = check_usage_json(doc)
    return record or None, problems


# -- run.json and progress.jsonl -------------------------------------------------------------

_RUN_JSON: Final[Mapping[str, FieldCheck]] = {
    "state": text,
    "world_size": whole(1, MAX_WORLD_SIZE),
    "backend": optional(text),
    "launcher": optional(text),
    "hosts": texts,
    "rank_hosts": texts,
    "devices": texts,
    "rendezvous": optional(text),
    "model": optional(text),
    "dataset": optional(text),
    "task": optional(text),
    "epochs": optional(whole(0, MAX_EPOCHS)),
    "epochs_completed": optional(whole(0, MAX_EPOCHS)),
    # A script's steps (an iteration loop's progress and its step windows).
    "max_steps": optional(whole(1, MAX_STEPS)),
    "steps_completed": optional(whole(0, MAX_STEPS)),
    "step_windows": optional(whole(0, MAX_STEPS)),
    "epoch_offset": optional(whole(0, 1)),
    "job_id": optional(job_id),
    "started_at": optional(text),
    "attempt_started_at": optional(text),
    "finished_at": optional(text),
    "attempts": optional(whole(0, 1_000_000)),
    "exit_code": optional(whole(-1024, 1024)),
    "num_params": optional(whole(0, 10**15)),
    "batch_size": optional(whole(0, 10**9)),
    "global_batch_size": optional(whole(0, 10**12)),
    "steps_per_epoch": optional(whole(0, 10**12)),
    "train_samples": optional(whole(0, 10**15)),
    "val_samples": optional(whole(0, 10**15)),
    "lr": optional(number(-math.inf, math.inf)),
    "flops_per_sample": optional(number()),
    "error": optional(text),
    "entry": optional(text),
    "script": optional(text),
    "observed": optional(mapping),
}


_OBSERVED: Final[Mapping[str, FieldCheck]] = {
    "group": text,
    "reason": optional(text),
    "world_size": optional(whole(0, MAX_WORLD_SIZE)),
    "backend": optional(text),
    "hosts": texts,
    "devices": texts,
    "ranks": lambda v: None if isinstance(v, list) else "must be a list",
    "launched": optional(whole(0, MAX_WORLD_SIZE)),
    "notes": lambda v: None if isinstance(v, list) else "must be a list",
}


def check_run_json(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """run.json without its wrong fields (in ``observed`` too), and what was wrong."""
    out, problems = clean_record(doc, _RUN_JSON)
    observed = out.get("observed")
    if isinstance(observed, dict):
        out["observed"], wrong = clean_record(observed, _OBSERVED)
        problems += [f"observed.{w}" for w in wrong]
    return out, problems


_PROGRESS: Final[Mapping[str, FieldCheck]] = {
    # null for a script with no epochs: its progress is by steps (of max_steps, where known).
    "epoch": optional(whole(0, MAX_EPOCHS)),
    "max_steps": optional(whole(1, MAX_STEPS)),
    "step": whole(0, MAX_STEPS),
    # null where the steps have no known epoch length (a loader with no len, a step loop)
    "steps_per_epoch": optional(whole(0, 10**12)),
    "loss": optional(number(-math.inf, math.inf)),
    "samples_per_sec": optional(number()),
    "time": optional(number()),
}


def check_progress(rec: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A ``progress.jsonl`` line without its wrong fields (an epoch of ``Infinity``), and
    what was wrong with them. A loss may be NaN: training does diverge."""
    return clean_record(rec, _PROGRESS)


def finite_step(value: object) -> int | None:
    """A metrics row's step as a whole number, or None where it cannot be one."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        step = int(value)
        return step if 0 <= step <= MAX_STEPS else None
    return None


def finite_epoch(value: object) -> int | None:
    """A metrics row's epoch as a whole number, or None where it cannot be one (NaN, inf,
    negative, beyond the spec's limit)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        epoch = int(value)
        return epoch if 0 <= epoch <= MAX_EPOCHS else None
    return None
