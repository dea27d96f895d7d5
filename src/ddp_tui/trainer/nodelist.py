"""The rendezvous host of a Slurm node list; the expansion itself is shared with the app
(:func:`ddp_tui.jobfiles.expand_nodelist`)."""

from __future__ import annotations

from ddp_tui.jobfiles import expand_nodelist

__all__ = ["expand_nodelist", "first_host"]


def first_host(text: str) -> str:
    """The first host of a node list: the rendezvous host for one-task-per-GPU jobs."""
    hosts = expand_nodelist(text)
    if not hosts:
        raise ValueError(f"empty host list {text!r}")
    return hosts[0]
