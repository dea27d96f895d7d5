"""Checks that stop a doomed job before it queues: the job's Python, and its data root.

A job whose ``python`` lacks torch fails a second after it starts, often after hours in
the queue. So before a plan is final, one command runs through the executor (over SSH: one
exec on the open connection) with the spec's environment set-up lines, as the job runs
them: the interpreter must find torch and torchvision (the built-in trainer; a preflight
only needs torch), and the data root of a dataset read from disk must exist.

A Python that passed is remembered per (profile, where, python, env_setup) in a JSON file
in the user's state directory, so later plans (each Compose preview is one) run nothing
for it. Failures are never remembered: a fix must show at once. A user who knows better
overrides the check: the profile's ``check_python = false``, the CLI's
``--skip-python-check``, or Compose's skip box (remembered in the same file, like a
success, until a re-check). See docs/architecture.md, "Submit".
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ddp_tui.remote.backends.executor import CommandTimeout, Executor, ExecutorError
from ddp_tui.remote.submit.state_file import StateFile, state_path
from ddp_tui.sbatch_templates import shquote, shquote_home
from ddp_tui.spec import BUILTIN_DATASETS, ExperimentSpec, FieldError

if TYPE_CHECKING:
    from ddp_tui.config import Profile

#: The file of remembered checks, in ddp-tui's state directory.
CACHE_FILE = "python-checks.json"
#: A cold ``import torch`` on a network file system can take most of a minute.
CHECK_TIMEOUT_SEC = 120.0
#: Datasets the trainer reads from the data root (torchvision's only without download).
FILE_DATASETS = ("imagefolder", "tabular")
TORCHVISION_DATASETS = tuple(d for d in BUILTIN_DATASETS if d not in ("synthetic", *FILE_DATASETS))
#: Starts every line the check prints, so the set-up's own output cannot be mistaken for it.
_MARK = "ddp-tui-prequeue"
#: How a remembered record says the user overrode the check.
OVERRIDDEN = "overridden"
#: Ends every error of the Python check (:func:`is_check_error` tells them by it).
CHECK_FAILED = "The job would fail at start"


@dataclass(frozen=True)
class PythonKey:
    """What a remembered check is valid for: the same interpreter, set up the same way,
    in the same place."""

    profile: str
    where: str  # the facade's location: "local scheduler", "Slurm on this host", "user@host"
    python: str
    env_setup: tuple[str, ...]

    @classmethod
    def of(cls, profile_name: str, where: str, spec: ExperimentSpec) -> PythonKey:
        return cls(profile_name, where, spec.python, tuple(spec.env_setup))

    def text(self) -> str:
        return json.dumps([self.profile, self.where, self.python, list(self.env_setup)])


@dataclass(frozen=True)
class PythonRecord:
    """A remembered check: the versions found of the modules checked, or
    :data:`OVERRIDDEN` (which stands for every module)."""

    versions: str
    checked_at: float
    modules: tuple[str, ...] = ()

    @property
    def overridden(self) -> bool:
        return self.versions == OVERRIDDEN

    def covers(self, modules: Sequence[str]) -> bool:
        """Whether this record answers a check of ``modules`` (a preflight's torch-only
        check does not answer the trainer's)."""
        return self.overridden or set(modules) <= set(self.modules)


def default_cache_path() -> Path:
    """``$XDG_STATE_HOME/ddp-tui/python-checks.json``, beside the local scheduler's state."""
    return state_path(CACHE_FILE)


class PythonCheckCache(StateFile):
    """Remembered checks in one small JSON file; every call reads it afresh, so that two
    processes (the app and the CLI) see each other's answers. Never raises on a missing or
    damaged file: a check not remembered simply runs again (:mod:`.state_file`)."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__(path if path is not None else default_cache_path())

    def get(self, key: PythonKey) -> PythonRecord | None:
        entry = self.load().get(key.text())
        if not isinstance(entry, dict):
            return None
        versions, at = entry.get("versions"), entry.get("checked_at")
        modules = entry.get("modules", [])
        if not isinstance(versions, str) or not isinstance(at, int | float):
            return None
        if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
            return None
        return PythonRecord(versions, float(at), tuple(modules))

    def put(self, key: PythonKey, versions: str, modules: Sequence[str] = ()) -> None:
        """Remember that ``key`` found ``modules`` (or, with :data:`OVERRIDDEN`, that the
        user overrode the check)."""
        data = self.load()
        data[key.text()] = {
            "modules": list(modules),
            "profile": key.profile,
            "where": key.where,
            "python": key.python,
            "env_setup": list(key.env_setup),
            "versions": versions,
            "checked_at": time.time(),
        }
        self.save(data)

    def override(self, key: PythonKey) -> None:
        self.put(key, OVERRIDDEN)

    def forget(self, key: PythonKey) -> None:
        """Drop what is remembered for ``key``: its next plan checks again."""
        data = self.load()
        if data.pop(key.text(), None) is not None:
            self.save(data)


def is_check_error(error: FieldError) -> bool:
    """Whether ``error`` came from the Python check (one a user may override), not from the
    spec's own rules."""
    fields = ("python", "env_setup", "modules", "container_image")  # (env_preflight's too)
    return error.field in fields and CHECK_FAILED in error.message


def switch_python_check(
    key: PythonKey,
    *,
    recheck: bool = False,
    skip: bool | None = None,
    cache: PythonCheckCache | None = None,
) -> None:
    """Apply a user's switches before a plan: ``recheck`` forgets what is remembered (so
    the plan checks again); ``skip`` True remembers an override, False drops one."""
    cache = cache if cache is not None else PythonCheckCache()
    record = cache.get(key)
    if skip:
        cache.override(key)
    elif (skip is False and record is not None and record.overridden) or recheck:
        cache.forget(key)


@dataclass(frozen=True)
class _Wanted:
    """What one plan's check command tests."""

    modules: tuple[str, ...]  # () when the Python check is not needed
    data_root: str  # "" when the data root is not tested


def _modules(spec: ExperimentSpec, kind: str) -> tuple[str, ...]:
    if kind == "preflight":
        return ("torch",)  # the collective test imports torch only
    if spec.entry == "script":
        return ()  # a user's script needs what it imports: diagnosed after it fails
    return ("torch", "torchvision")


def _needs_data_root(spec: ExperimentSpec, kind: str) -> bool:
    if kind != "train" or spec.entry == "script" or not spec.data_root:
        return False
    return spec.dataset in FILE_DATASETS or (
        spec.dataset in TORCHVISION_DATASETS and not spec.download
    )


#: What the job's python runs: are the modules there, and in which versions? Found, not
#: imported: ``import torch`` takes seconds (most of a minute on a cold network file
#: system), and Compose plans on every pause in typing. A broken install that is found
#: still fails in the job, where the run's diagnosis names it.
_FIND_MODULES = """\
import importlib.util, sys
missing = [n for n in {names!r} if importlib.util.find_spec(n) is None]
if missing:
    sys.exit("ModuleNotFoundError: No module named %r" % missing[0])
def version(name):
    try:
        import importlib.metadata
        return importlib.metadata.version(name)
    except Exception:
        return "?"
print({mark!r}, *[version(n) for n in {names!r}])
"""


def check_command(spec: ExperimentSpec, modules: Sequence[str], data_root: str) -> list[str]:
    """The argv of the check: ``bash -c SCRIPT`` where SCRIPT tests the data root first (it
    needs no set-up), then runs the environment set-up lines as the job does (verbatim:
    they are the user's own shell code, and a failing one stops the job too), then looks
    for ``modules`` with the spec's python. Every other value is shell-quoted."""
    lines = []
    if data_root:
        root = shquote_home(data_root)
        lines.append(
            f"if [ -e {root} ]; then echo {_MARK}-data ok; else echo {_MARK}-data missing; fi"
        )
    if modules:
        code = _FIND_MODULES.format(names=tuple(modules), mark=_MARK + "-python")
        # set +u as in the job: module and conda scripts read unset variables.
        lines += ["set -e +u", *spec.env_setup, "set +e", f"echo {_MARK}-env ok"]
        lines.append(f"exec {shquote_home(spec.python)} -c {shquote(code)}")
    return ["bash", "-c", "\n".join(lines)]


def prequeue_errors(
    executor: Executor,
    spec: ExperimentSpec,
    profile: Profile,
    *,
    where: str,
    kind: str = "train",
    known: Sequence[FieldError] = (),
    cache: PythonCheckCache | None = None,
    recheck: bool = False,
) -> list[FieldError]:
    """The checks of the module's doc for a plan of ``spec`` (``kind`` "train" or
    "preflight"), as field errors on ``python``, ``env_setup`` and ``data_root``; at most
    one command through ``executor``, none when nothing needs checking.

    ``known`` are the errors the plan found already: a field that is wrong on its own is
    not checked against the cluster. ``recheck`` ignores (and replaces) what is remembered.
    """
    wrong = {e.field for e in known}
    cache = cache if cache is not None else PythonCheckCache()
    key = PythonKey.of(profile.name, where, spec)
    modules = _modules(spec, kind)
    if not profile.check_python or wrong & {"python", "env_setup"}:
        modules = ()
    if spec.environment in ("modules", "container"):
        # Its python exists only on the node, after module load or inside the image: the
        # environment check job answers for it (env_preflight.py), not the login node.
        modules = ()
    if modules and recheck:
        cache.forget(key)
    elif modules and (record := cache.get(key)) is not None and record.covers(modules):
        modules = ()  # passed (or overridden) before
    data_root = spec.data_root if _needs_data_root(spec, kind) else ""
    if wrong & {"data_root", "dataset"}:
        data_root = ""
    errors: list[FieldError] = []
    if data_root and not data_root.startswith(("/", "~")):
        # The trainer starts in the job's new run directory: a relative path means a
        # place inside it, where nothing is yet.
        errors.append(
            FieldError(
                "data_root",
                f"{data_root} is relative to the run directory the job starts in, where it "
                "cannot exist yet; give an absolute or ~/ path on the cluster",
            )
        )
        data_root = ""
    if modules or data_root:
        errors[:0] = _run_checks(executor, spec, _Wanted(modules, data_root), cache, key, where)
    return errors


def _run_checks(
    executor: Executor,
    spec: ExperimentSpec,
    wanted: _Wanted,
    cache: PythonCheckCache,
    key: PythonKey,
    where: str,
) -> list[FieldError]:
    argv = check_command(spec, wanted.modules, wanted.data_root)
    fields = ["python"] if wanted.modules else []
    fields += ["data_root"] if wanted.data_root else []
    try:
        res = executor.run(argv, timeout=CHECK_TIMEOUT_SEC)
    except CommandTimeout:
        return [
            FieldError(f, f"could not be checked {_on(where)}: the check did not answer within "
                       f"{CHECK_TIMEOUT_SEC:g} s")
            for f in fields
        ]  # fmt: skip
    except ExecutorError as exc:
        return [FieldError(f, f"could not be checked {_on(where)}: {exc}") for f in fields]
    out = res.stdout.splitlines()
    errors: list[FieldError] = []
    if wanted.data_root and f"{_MARK}-data ok" not in out:
        errors.append(
            FieldError(
                "data_root",
                f"{wanted.data_root} does not exist {_on(where)} (dataset {spec.dataset} is read "
                "from there)",
            )
        )
    if wanted.modules:
        error = _python_error(spec, wanted.modules, res.returncode, out, res.stderr, where)
        if error is None:
            found = next((ln for ln in out if ln.startswith(f"{_MARK}-python")), "")
            cache.put(key, found.removeprefix(f"{_MARK}-python").strip(), wanted.modules)
        else:
            errors.insert(0, error)
    return errors


def _on(where: str) -> str:
    """``on user@host`` for a remote cluster; ``on this host`` for the facade's local
    places ("local scheduler", "Slurm on this host")."""
    return f"on {where}" if "@" in where else "on this host"


def _python_error(
    spec: ExperimentSpec,
    modules: tuple[str, ...],
    status: int,
    out: list[str],
    err: str,
    where: str,
) -> FieldError | None:
    """None when the import worked; else what failed, naming the interpreter and set-up."""
    last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
    setup = (
        f" after the environment set-up ({'; '.join(spec.env_setup)})"
        if spec.env_setup
        else " (no environment set-up lines)"
    )
    if f"{_MARK}-env ok" not in out:
        return FieldError(
            "env_setup",
            f"the environment set-up failed {_on(where)} (exit {status}): "
            f"{last or 'no message'}. {CHECK_FAILED} (the python check ran it)",
        )
    if status == 0:
        return None  # (an interpreter that prints nothing, such as `true`, also passes)
    if status == 127:
        what = f"{spec.python} was not found {_on(where)}{setup}"
    else:
        what = f"{spec.python} {_on(where)} cannot import {', '.join(modules)}{setup}: " + (
            last or f"exit {status}"
        )
    return FieldError(
        "python",
        f"{what}. {CHECK_FAILED}: set python (or env_setup) to an interpreter "
        "with " + " and ".join(modules) + ", or skip this check if you know better "
        "(--skip-python-check, the profile's check_python = false, or Compose's skip box)",
    )
