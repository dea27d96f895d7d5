"""A user's own script at plan time: where it is, and what of it the run will hold.

A snapshot is taken on the app's machine (a laptop in remote mode): the script's path and
the project directory are made absolute there, and the project's manifest is built (its
files, size and git commit) so that its errors show before anything is written. A script
run in place must exist on the cluster: that is one ``stat`` through the executor. The
plan then renders the job script from the resolved spec (docs/architecture.md, "Submit").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.store.snapshot import SnapshotError, SnapshotManifest, build_manifest
from ddp_tui.spec import ExperimentSpec, FieldError


@dataclass(frozen=True)
class ScriptPrep:
    """A script spec with its paths resolved, its snapshot's manifest, and what is wrong."""

    spec: ExperimentSpec
    snapshot: SnapshotManifest | None
    errors: tuple[FieldError, ...]
    warnings: tuple[str, ...] = ()


def _absolute(text: str, base: Path) -> Path:
    path = Path(text).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def prepare_script(spec: ExperimentSpec, executor: Executor) -> ScriptPrep:
    """``spec`` (a valid ``entry="script"`` spec) ready to render: see the module's doc."""
    if spec.code_mode == "in-place":
        errors = tuple(_check_in_place(spec, executor))
        where = spec.project_dir or spec.script
        note = (
            f"the script runs in place: a retry or requeue runs whatever is at {where} on the "
            "cluster then (code mode snapshot keeps a copy with the run)"
        )
        return ScriptPrep(spec, None, errors, () if errors else (note,))
    return _prepare_snapshot(spec)


def _prepare_snapshot(spec: ExperimentSpec) -> ScriptPrep:
    here = Path.cwd()
    module = spec.script_module is not None
    project = _absolute(spec.project_dir, here) if spec.project_dir else None
    script = spec.script
    if not module:
        # A relative script is inside the project directory when one is given.
        path = _absolute(spec.script, project or here)
        if not path.is_file():
            problem = "a directory" if path.is_dir() else "not found"
            return _failed(
                spec,
                "script",
                f"{path} is {problem} on this machine (the snapshot "
                "is taken here): give the path of the script file",
            )
        project = project or path.parent
        if not path.is_relative_to(project):
            return _failed(spec, "script", f"{path} is not inside the project directory {project}")
        script = str(path)
    project = project or here
    if not project.is_dir():
        return _failed(spec, "project_dir", f"{project} is not a directory on this machine")
    resolved = spec.replace(script=script, project_dir=str(project))
    try:
        manifest = current_snapshot(resolved)
    except SnapshotError as exc:
        return ScriptPrep(resolved, None, (FieldError("project_dir", str(exc)),))
    if not module:
        rel = Path(script).relative_to(project).as_posix()
        if rel not in {arc for _, arc in manifest.files}:
            return ScriptPrep(
                resolved,
                None,
                (
                    FieldError(
                        "script",
                        f"{rel} is left out of the snapshot of {project} (.gitignore, or a "
                        "cache or checkpoint directory): the job could not run it",
                    ),
                ),
            )
    return ScriptPrep(resolved, manifest, ())


def _failed(spec: ExperimentSpec, field: str, message: str) -> ScriptPrep:
    return ScriptPrep(spec, None, (FieldError(field, message),))


def _check_in_place(spec: ExperimentSpec, executor: Executor) -> list[FieldError]:
    module = spec.script_module is not None
    field, path = ("project_dir", spec.project_dir) if module else ("script", spec.script)
    if not module and not (path.startswith(("/", "~")) or spec.project_dir):
        return [
            FieldError(
                "script",
                "run in place needs an absolute (or ~/) path on the cluster, or a project "
                f"directory it is relative to, got {path!r}",
            )
        ]
    if not module and spec.project_dir and not path.startswith(("/", "~")):
        path = f"{spec.project_dir.rstrip('/')}/{path}"
    try:
        found = executor.stat(executor.expand_home(path))
    except ExecutorError as exc:
        return [FieldError(field, f"could not check {path} on the cluster: {exc}")]
    if found is None:
        return [FieldError(field, f"{path} does not exist on the cluster")]
    return []


def current_snapshot(spec: ExperimentSpec) -> SnapshotManifest:
    """The project of a resolved ``spec`` as it is now, under its cap: what a plan lists,
    and what a submit lists again (a Compose preview can be minutes old, and the user may
    have added a file since). Raises :class:`SnapshotError`."""
    return build_manifest(Path(spec.project_dir), max_bytes=spec.snapshot_max_mb * 2**20)
