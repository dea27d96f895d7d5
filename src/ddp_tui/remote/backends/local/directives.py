"""The ``#SBATCH`` lines of a job script, read the way sbatch reads them.

The local scheduler runs the very ``job.sbatch`` that Slurm would get; these helpers
take from it what a one-node local run needs: the job name, the log file patterns
and the node count (to refuse what it cannot run).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
from collections.abc import Mapping

from ddp_tui.remote.backends.job_ids import task_ranges
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.stdio_paths import PatternValues, expand_stdio_path

_SHORT_OPTS = {"-o": "output", "-e": "error", "-N": "nodes", "-J": "job-name", "-D": "chdir"}


def sbatch_options(script: str) -> dict[str, str]:
    """The ``#SBATCH`` options of ``script`` as long names without dashes.

    Like sbatch, only the lines before the first command count. Flags without a
    value map to "".
    """
    opts: dict[str, str] = {}
    for raw in script.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#!") and not opts):
            continue
        if not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        rest = line[len("#SBATCH") :]
        try:
            tokens = shlex.split(rest, comments=True)
        except ValueError:
            tokens = rest.split()
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            i += 1
            if tok.startswith("--"):
                key, eq, value = tok[2:].partition("=")
                if not eq and i < len(tokens) and not tokens[i].startswith("-"):
                    value = tokens[i]
                    i += 1
                opts[key] = value
            elif tok[:2] in _SHORT_OPTS:
                value = tok[2:]
                if not value and i < len(tokens):
                    value = tokens[i]
                    i += 1
                opts[_SHORT_OPTS[tok[:2]]] = value
    return opts


#: What a job submitted with ``--export=NONE`` keeps of the submitting process's environment:
#: what a login gives (Slurm loads the user's login environment in its place). Nothing else of
#: the app's shell (a VIRTUAL_ENV, a conda env, a PYTHONPATH) may change the job.
EXPORT_NONE_KEEP = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "SHELL", "TMPDIR"})


def exported_environment(options: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` a job of these ``#SBATCH`` ``options`` starts with: all of it
    (sbatch's default, ``--export=ALL``), or with ``--export=NONE`` (or ``NIL``) only
    :data:`EXPORT_NONE_KEEP` and the locale (``LC_*``). Any other ``--export`` value is taken
    as ALL, as before."""
    if options.get("export", "ALL").strip().upper() not in ("NONE", "NIL"):
        return dict(environ)
    return {k: v for k, v in environ.items() if k in EXPORT_NONE_KEEP or k.startswith("LC_")}


def requested_nodes(script: str) -> int:
    """The minimum node count the script asks for (``--nodes=2-4`` asks for 2); 1 if unset."""
    value = sbatch_options(script).get("nodes", "")
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else 1


def refuse_multi_node(nodes: int) -> None:
    """Raise the scheduler's refusal for a job of more than one node."""
    if nodes > 1:
        raise SchedulerError(
            f"the local scheduler runs one-node jobs only; this job asks for {nodes} nodes"
            " — use a Slurm profile"
        )


def expand_log_pattern(
    pattern: str, job_id: str, job_name: str, *, array: tuple[str, int] | None = None
) -> str:
    """Resolve sbatch's filename patterns (``%j``, ``%x``, ``%u``, ``%N``, ...) for one job, as
    Slurm does (:func:`~ddp_tui.remote.backends.stdio_paths.expand_stdio_path`); ``array``: the
    master id and index of an array task (``%A`` and ``%a``). The job runs here, so ``%N`` is
    this host; a plain job's ``%a`` is 0."""
    master, index = array if array is not None else (job_id, 0)
    values = PatternValues(
        job_id=job_id,
        array_job_id=master,
        array_task_id=index,
        name=job_name,
        user=_user(),
        node=socket.gethostname(),
    )
    path = expand_stdio_path(pattern, values)
    return pattern if path is None else path  # every value is known: never None


#: The most tasks one array may have (Slurm's default MaxArraySize is 1001: indices 0-1000).
MAX_ARRAY_INDEX = 1000


def parse_array(value: str) -> tuple[list[int], int]:
    """The indices and the throttle of an ``--array`` value such as ``0-5%2``, ``1,3,5``
    or ``0-10:2`` (sbatch's forms); the throttle is 0 when there is no ``%K``. Raises
    :class:`SchedulerError` naming what is wrong, as sbatch refuses such a script."""
    spec, pct, limit_text = value.strip().partition("%")
    if pct and (not limit_text.isdigit() or int(limit_text) < 1):
        raise SchedulerError(f"--array={value}: the throttle after % must be a number >= 1")
    try:
        indices = sorted({i for r in task_ranges(spec) for i in r})
    except ValueError as exc:
        raise SchedulerError(f"--array={value}: {exc}") from None
    if not indices:
        raise SchedulerError(f"--array={value}: no index")
    if indices[-1] > MAX_ARRAY_INDEX:
        raise SchedulerError(f"--array={value}: indices go up to {MAX_ARRAY_INDEX}")
    return indices, int(limit_text) if pct else 0


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER", "user")
