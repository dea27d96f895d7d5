"""Slurm host lists (``n[1-2]``, ``gpu[01-03,07],login1``) as the app reads them: the job
side's grammar (:func:`ddp_tui.jobfiles.expand_nodelist`, which the trainer uses too), with
each host once, since a node list names the nodes a shell may open on."""

from __future__ import annotations

from ddp_tui.jobfiles import expand_nodelist


def expand_hostlist(text: str) -> list[str]:
    """The host names of a Slurm host list, in its order (``n[1-2],m3`` -> n1 n2 m3); a
    host named twice is kept once. Raises ValueError on a malformed list."""
    return list(dict.fromkeys(expand_nodelist(text)))
