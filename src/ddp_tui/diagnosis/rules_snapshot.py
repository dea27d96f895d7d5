"""A file the script could not open because the code snapshot left it out.

A script run in snapshot mode runs from ``<run>/project/``, a copy of its project directory
that leaves out what git ignores, caches, environments and checkpoints
(:mod:`ddp_tui.remote.store.snapshot`). A data file kept in the project but ignored by git is then
missing in the job: ``FileNotFoundError: [Errno 2] No such file or directory:
'data/train.bin'``. The traceback rule would say "fix the error at train.py:121"; the cause
is the snapshot, and ``snapshot.json``'s ``excluded`` names what it left out and why.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import make, rank_words

# FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin' (Python, numpy,
# torch.load), and "FileNotFoundError: data/x.csv not found" forms that quote the path.
_MISSING = clue(
    r"(?:No such file or directory|FileNotFoundError)[^'\"\n]*['\"](?P<path>[^'\"\n]+)['\"]",
    "No such file or directory",
    "FileNotFoundError",
)
#: The directory of the run that holds the snapshot (runs.PROJECT_DIR), as it appears in an
#: absolute path the script built from ``__file__``.
_PROJECT = "/project/"
#: How many of the log's missing-file errors are compared with the snapshot's list.
_MAX_ERRORS = 20

_WHY = {
    "gitignore": "git ignores it (.gitignore) and the snapshot copies only what git would",
    "pattern": "ddp-tui never copies caches, environments and checkpoints",
    "link": "it is a link that leads out of the project (or nowhere)",
}
_INCLUDE = {
    "gitignore": "or, if it is small, stop ignoring it (a `!` pattern in .gitignore)",
    "pattern": "or move it out of the cache/checkpoint directory it is in",
    "link": "or give the script the link's target as an absolute path",
}


def _excluded(snapshot: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """(path, reason) for each path ``snapshot.json`` says was left out."""
    doc = snapshot.get("excluded") if isinstance(snapshot, Mapping) else None
    paths = doc.get("paths") if isinstance(doc, Mapping) else None
    for item in paths if isinstance(paths, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("path"), str):
            yield str(item["path"]), str(item.get("reason", ""))


def _in_project(path: str) -> str:
    """``path`` relative to the project: after the run's ``project/`` if absolute."""
    if path.startswith("/"):
        cut = path.rfind(_PROJECT)
        return path[cut + len(_PROJECT) :] if cut >= 0 else ""
    return posixpath.normpath(path)


def _left_out(rel: str, excluded: list[tuple[str, str]]) -> tuple[str, str] | None:
    for entry, reason in excluded:
        if rel == entry.rstrip("/") or (entry.endswith("/") and rel.startswith(entry)):
            return entry, reason
    return None


def left_out_of_snapshot(scan: Scan) -> Diagnosis | None:
    """A missing file that the snapshot left out, named with why and what to do."""
    excluded = list(_excluded(scan.facts.snapshot))
    if not excluded:
        return None
    for hit in scan.find_all(_MISSING, limit=_MAX_ERRORS):
        path = hit.group("path")
        rel = _in_project(path)
        found = _left_out(rel, excluded) if rel else None
        if found is None:
            continue
        entry, reason = found
        who = rank_words(hit).capitalize() or "The script"
        why = _WHY.get(reason, "the snapshot left it out")
        include = _INCLUDE.get(reason, "or keep the file outside the project")
        return make(
            "left-out-of-snapshot",
            "file left out of snapshot",
            f"{who} could not open {path}: the code snapshot the job runs from left "
            f"{entry} out, because {why}. The job runs a copy of the project in the run "
            "directory's project/, not the project directory itself.",
            "Run the project where it is with --code-mode in-place (the cluster must see the "
            "project directory), or pass the script the file's absolute path outside the "
            f"project, {include}.",
            [hit, Evidence("snapshot.json", None, f"excluded: {entry} ({reason})")],
        )
    return None
