"""ddp-tui's observation layer, started by Python's ``site`` module (see ddp_tui.scriptrun.observe).

This directory is first on the PYTHONPATH of a user's script run by ddp-tui, so this module is the
``sitecustomize`` Python imports at start-up. It first runs the environment's own
``sitecustomize``, if there is one further down the path (a cluster's or a conda env's), then
installs ddp-tui's import hook. Neither step may stop the script: our part is guarded, and an
error in the environment's own module is raised as it would have been without us.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _run_own_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # as if it had been found first
    spec.loader.exec_module(module)


def _observe() -> None:
    if os.environ.get("DDP_TUI_OBSERVE") != "1":
        return
    try:
        from ddp_tui.scriptrun.observe.hooks import install

        install()
    except Exception as exc:  # never the script's problem
        sys.stderr.write(f"[ddp-tui] observation off: {exc!r}\n")


try:
    _run_own_sitecustomize()
finally:
    _observe()
