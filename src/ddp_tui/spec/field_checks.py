"""The named checks of the few fields a generic check cannot hold: the escape hatches
(``env_setup``, ``extra_sbatch``, ``extra_trainer_args``, ``nccl_env``), ``python``,
``time_limit``, and a user script's ``script``, ``script_args``, ``metrics`` and
``metrics_columns``. A description names one with ``check=...``; :data:`FIELD_CHECKS` maps the
names to the functions.

``env_setup`` lines are the user's own shell code (``module load ...``) and run verbatim,
with the same rights as the user who wrote them; these checks only keep them from breaking
the rest of the script by accident. ``extra_sbatch`` items land on ``#SBATCH`` lines, which
cannot be quoted, so they are held to a whitelist.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from typing import Final

from ddp_tui.scriptrun.presets import check_metrics_source
from ddp_tui.spec.checks import CONTROL_RE, Check, text_error
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.fields import FieldSpec
from ddp_tui.spec.timefmt import TIME_HELP, parse_time_limit_seconds
from ddp_tui.spec.vocabulary import MAX_TIME_MIN

_ENV_NAME_RE: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
_MODULE_RE: Final = re.compile(r"-m\s+[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_COLUMN_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# The value is a whitelist: #SBATCH lines cannot be quoted, and sbatch itself strips quotes.
_EXTRA_SBATCH_RE: Final = re.compile(
    r"--([a-z][a-z0-9-]{0,63})(=[A-Za-z0-9_.,:/=+@%*!&|\[\]^~-]+)?"
)
_CONTROL_NO_TAB_RE: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_HEREDOC_RE: Final = re.compile(r"(?<!<)<<(?!<)")

#: sbatch options the spec (or the app) sets itself. An extra option may not name one of these,
#: nor abbreviate one: sbatch's getopt_long accepts unambiguous prefixes such as ``--out``.
_RESERVED_SBATCH: Final = frozenset(
    {
        "account",
        "array",
        "chdir",
        "constraint",
        "cpus-per-gpu",
        "cpus-per-task",
        "error",
        "gpus",
        "gpus-per-node",
        "gpus-per-socket",
        "gpus-per-task",
        "gres",
        "job-name",
        "mem",
        "mem-per-cpu",
        "mem-per-gpu",
        "nodes",
        "no-requeue",
        "ntasks",
        "ntasks-per-gpu",
        "ntasks-per-node",
        "open-mode",
        "output",
        "parsable",
        "partition",
        "qos",
        "requeue",
        "signal",
        "test-only",
        "time",
        "wrap",
    }
)
#: Variables the job script sets or relies on; ``nccl_env`` may not override them.
_RESERVED_ENV: Final = frozenset(
    {
        "BASH_ENV",
        "CDPATH",
        "ENV",
        "GLOBIGNORE",
        "HEAD",
        "HOME",
        "IFS",
        "JOB_ID",
        "LAUNCHER_PID",
        "MASTER_ADDR",
        "MASTER_PORT",
        "PATH",
        "PORT",
        "PS4",
        "PYTHON",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "RUN_DIR",
        "SHELLOPTS",
        "BASHOPTS",
        "STATUS",
    }
)


def _is_str_list(value: object) -> bool:
    return isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)


def check_time_limit(field: FieldSpec, value: object) -> list[FieldError]:
    if not isinstance(value, str):
        return [FieldError(field.name, f"{TIME_HELP}, got {value!r}")]
    try:
        seconds = parse_time_limit_seconds(value)
    except ValueError as e:
        return [FieldError(field.name, str(e))]
    if seconds > MAX_TIME_MIN * 60:
        return [FieldError(field.name, f"must be at most 365 days, got {value!r}")]
    return []


def check_python(field: FieldSpec, value: object) -> list[FieldError]:
    error = text_error(field.name, value, max_len=field.max_len, required=field.required)
    spaced = isinstance(value, str) and (any(c.isspace() for c in value) or value.startswith("-"))
    if error is None and spaced:
        error = FieldError(
            field.name,
            f"must be one program name or path without spaces (e.g. python3 or "
            f"~/venv/bin/python), got {value!r}",
        )
    return [] if error is None else [error]


def check_extra_sbatch(field: FieldSpec, value: object) -> list[FieldError]:
    if not _is_str_list(value):
        return [FieldError(field.name, f"must be a list of strings, got {value!r}")]
    assert isinstance(value, tuple | list)
    errors: list[FieldError] = []
    for item in value:
        m = _EXTRA_SBATCH_RE.fullmatch(item) if len(item) <= field.max_len else None
        if m is None:
            errors.append(
                FieldError(
                    field.name,
                    "each item must look like --option or --option=value (a lower-case option "
                    "name; the value only letters, digits and _.,:/=+@%*!&|[]^~-), got "
                    + repr(item),
                )
            )
            continue
        opt = m.group(1)
        clash = sorted(r for r in _RESERVED_SBATCH if r == opt or r.startswith(opt))
        if clash:
            errors.append(
                FieldError(
                    field.name,
                    f"--{opt} would override --{clash[0]}, which ddp-tui sets from the spec; "
                    f"use the matching field instead, got {item!r}",
                )
            )
    return errors


def check_env_setup(field: FieldSpec, value: object) -> list[FieldError]:
    if not _is_str_list(value):
        return [FieldError(field.name, f"must be a list of strings (shell lines), got {value!r}")]
    assert isinstance(value, tuple | list)
    errors: list[FieldError] = []
    for i, line in enumerate(value, 1):
        where = f"line {i}"
        if len(line) > field.max_len:
            errors.append(FieldError(field.name, f"{where}: at most {field.max_len} characters"))
        elif _CONTROL_NO_TAB_RE.search(line):
            errors.append(
                FieldError(
                    field.name,
                    f"{where}: one shell line per item; no newlines or control characters, "
                    f"got {line!r}",
                )
            )
        elif line.lstrip().upper().startswith("#SBATCH"):
            errors.append(
                FieldError(
                    field.name, f"{where}: #SBATCH lines belong in extra_sbatch, got {line!r}"
                )
            )
        elif line.rstrip().endswith("\\"):
            errors.append(
                FieldError(
                    field.name, f"{where}: must not end with \\ (it would join the next line)"
                )
            )
        elif _HEREDOC_RE.search(line):
            errors.append(
                FieldError(
                    field.name,
                    f"{where}: here-documents (<<) would swallow the rest of the script, "
                    f"got {line!r}",
                )
            )
    if not errors and value:
        problem = _shell_syntax_error(tuple(value))
        if problem:
            errors.append(FieldError(field.name, f"not valid bash: {problem}"))
    return errors


@functools.lru_cache(maxsize=256)
def _shell_syntax_error(lines: tuple[str, ...]) -> str | None:
    """bash -n over the set-up block alone (so an open quote or ``if`` cannot reach the rest
    of the script). Skipped where bash is not installed: the cluster still checks at run time."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        proc = subprocess.run(
            [bash, "-n"],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return None
    msg = " ".join(proc.stderr.split())
    return msg.replace("bash: ", "", 1) or f"bash -n exited {proc.returncode}"


def check_extra_trainer_args(field: FieldSpec, value: object) -> list[FieldError]:
    if not _is_str_list(value):
        return [FieldError(field.name, f"must be a list of strings, got {value!r}")]
    assert isinstance(value, tuple | list)
    errors: list[FieldError] = []
    for item in value:
        if not item or len(item) > field.max_len or CONTROL_RE.search(item):
            errors.append(
                FieldError(
                    field.name,
                    f"each item must be 1-{field.max_len} characters without newlines or control "
                    f"characters, got {item!r}",
                )
            )
            continue
        opt = item.split("=", 1)[0]
        # argparse accepts prefixes, so --run and --run-d are --run-dir too.
        if len(opt) > 2 and opt.startswith("--") and "--run-dir".startswith(opt):
            errors.append(
                FieldError(
                    field.name,
                    f"the run directory is set by ddp-tui and cannot be changed, got {item!r}",
                )
            )
    return errors


def check_nccl_env(field: FieldSpec, value: object) -> list[FieldError]:
    pairs: list[tuple[object, object]]
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, tuple | list) and all(
        isinstance(p, tuple | list) and len(p) == 2 for p in value
    ):
        pairs = [(p[0], p[1]) for p in value]
    else:
        return [FieldError(field.name, f"must map NAME to value, got {value!r}")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for key, val in pairs:
        if not isinstance(key, str) or not _ENV_NAME_RE.fullmatch(key) or len(key) > 128:
            errors.append(
                FieldError(
                    field.name,
                    f"names must be upper-case shell variable names like NCCL_SOCKET_IFNAME, "
                    f"got {key!r}",
                )
            )
            continue
        if key in _RESERVED_ENV or key.startswith("SLURM_"):
            errors.append(
                FieldError(field.name, f"{key} is set by the job script and cannot be overridden")
            )
        if key in seen:
            errors.append(FieldError(field.name, f"{key} is given twice"))
        seen.add(key)
        problem = text_error(field.name, val, max_len=field.max_len, required=False)
        if problem is not None:
            errors.append(FieldError(field.name, f"{key}: {problem.message}"))
    return errors


def check_script(field: FieldSpec, value: object) -> list[FieldError]:
    """A path (no leading ``-``, so it cannot pass for an option of python) or
    ``-m package.module``. Whether the file exists is the plan's to check: it is on the
    app's machine for a snapshot and on the cluster in place."""
    error = text_error(field.name, value, max_len=field.max_len, required=False)
    module = isinstance(value, str) and value.startswith("-")
    if error is None and module and not _MODULE_RE.fullmatch(str(value).strip()):
        error = FieldError(
            field.name,
            f"must be a path to a .py file, or -m package.module, got {value!r}",
        )
    return [] if error is None else [error]


def check_script_args(field: FieldSpec, value: object) -> list[FieldError]:
    error = text_error(field.name, value, max_len=field.max_len, required=False)
    if error is None and isinstance(value, str):
        try:
            shlex.split(value)
        except ValueError as e:
            error = FieldError(field.name, f"must split into shell words ({e}), got {value!r}")
    return [] if error is None else [error]


def check_metrics(field: FieldSpec, value: object) -> list[FieldError]:
    error = text_error(field.name, value, max_len=field.max_len, required=True)
    if error is None and isinstance(value, str):
        problem = check_metrics_source(value)
        if problem:
            error = FieldError(field.name, problem)
    return [] if error is None else [error]


def check_metrics_columns(field: FieldSpec, value: object) -> list[FieldError]:
    if not isinstance(value, tuple | list) or not all(
        isinstance(p, tuple | list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in value
    ):
        return [FieldError(field.name, f"must map SOURCE to COLUMN, got {value!r}")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for src, dst in value:
        if not src or len(src) > field.max_len or any(c.isspace() for c in src):
            errors.append(
                FieldError(
                    field.name,
                    f"a source name must be 1-{field.max_len} characters without spaces, "
                    f"got {src!r}",
                )
            )
        if not _COLUMN_RE.fullmatch(dst):
            errors.append(
                FieldError(
                    field.name,
                    f"a column must be a name of letters, digits and _ (e.g. train_loss), "
                    f"got {dst!r}",
                )
            )
        elif dst in seen:
            errors.append(FieldError(field.name, f"column {dst} is mapped twice"))
        seen.add(dst)
    return errors


FIELD_CHECKS: Final[Mapping[str, Check]] = {
    "env_setup": check_env_setup,
    "extra_sbatch": check_extra_sbatch,
    "extra_trainer_args": check_extra_trainer_args,
    "nccl_env": check_nccl_env,
    "metrics": check_metrics,
    "metrics_columns": check_metrics_columns,
    "python": check_python,
    "script": check_script,
    "script_args": check_script_args,
    "time_limit": check_time_limit,
}
