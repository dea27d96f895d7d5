"""The observation layer: what every process of a user's script did, seen from inside it.

The wrapper (:mod:`ddp_tui.scriptrun.runner`) puts :data:`BOOT_DIR` first on the script's
``PYTHONPATH``. Python's ``site`` module then imports its ``sitecustomize`` at start-up, in the
script and in every Python process the script starts, before a line of the script runs (the way
OpenTelemetry's and Datadog's auto-instrumentation get into an unmodified program). That
``sitecustomize`` loads the environment's own one, then installs :mod:`.hooks`: an import hook
that patches torch, Lightning, Hugging Face and Accelerate as the script imports them. Nothing is
imported early, so a process that never imports torch pays one ``sys.meta_path`` entry.

Each process that has something to say (a process group formed, an epoch ended, a test phase)
appends JSON lines to ``observe/<attempt>-<host>-<pid>.jsonl`` in the run directory
(:mod:`.journal`); rank 0's wrapper reads them (:mod:`ddp_tui.scriptrun.observed`).

Rules: a hook never changes what the script computes and never fails it. Every hook is guarded;
one that raises turns itself off and leaves a ``note`` record. ``--observe off`` leaves it out.
"""

from __future__ import annotations

from pathlib import Path

#: Put first on the script's PYTHONPATH: holds the ``sitecustomize`` that starts observing.
BOOT_DIR = Path(__file__).resolve().parent / "boot"
#: The run directory's folder of journals.
OBSERVE_DIR = "observe"
#: Set (to "1") in the script's environment when observing: the boot module acts only then.
ENV_FLAG = "DDP_TUI_OBSERVE"
