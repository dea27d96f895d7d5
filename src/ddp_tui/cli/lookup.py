"""A run or a group as the command line names it: a run id, a unique prefix of one, a job id
of any attempt, or a group key."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.model.views import RunView

#: The help of an argument that names a run.
RUN_HELP: Final = "run id, a unique prefix of one, or a job id"
#: The help of an argument that names a group.
GROUP_HELP: Final = "group key, or a run in the group"
#: The help of ``--group`` (cancel, retry): act on a run's whole group.
GROUP_OPTION_HELP: Final = "act on the whole group (a sweep) of the run, or of the group key given"


def add_run_argument(parser: argparse.ArgumentParser, dest: str = "run") -> None:
    """The positional argument that names a run."""
    parser.add_argument(dest, help=RUN_HELP)


def resolve_run(cluster: Cluster, key: str) -> RunView:
    """A run by id, unique id prefix, or job id of any attempt."""
    runs = cluster.refresh().runs
    exact = [v for v in runs if v.run_id == key or any(a.job_id == key for a in v.attempts)]
    if exact:
        return exact[0]
    prefix = [v for v in runs if v.run_id.startswith(key)]
    if len(prefix) == 1:
        return prefix[0]
    if not prefix:
        raise LookupError(f"no run matches {key!r} (give a run id, a prefix of one, or a job id)")
    raise LookupError(f"{key!r} matches {len(prefix)} runs; give more of the run id")


def resolve_run_or_job(cluster: Cluster, key: str) -> RunView | str:
    """A run as :func:`resolve_run` finds it or, for a Slurm job id that is not one of
    ddp-tui's runs (a job sent with plain ``sbatch``), that job id itself."""
    from ddp_tui.remote.backends.job_ids import is_job_id

    try:
        return resolve_run(cluster, key)
    except LookupError:
        if is_job_id(key):
            return key
        raise LookupError(
            f"no run or job matches {key!r} (give a run id, a prefix of one, or a job id)"
        ) from None


def resolve_group(cluster: Cluster, key: str) -> str:
    """A comparison group by its key, or the group of a run (id, prefix or job id)."""
    if key in cluster.groups():
        return key
    return resolve_run(cluster, key).group or key
