"""What ``_environment.j2`` renders for a spec's ``environment``: the venv's activate script,
conda's executable and env, the modules, and the container's words (``container.py``).

The ``python`` environment renders nothing here: its job scripts are byte for byte those of
before environments existed (the golden files hold them).
"""

from __future__ import annotations

import posixpath
from typing import Any

from ddp_tui.sbatch_templates.container import container_launch
from ddp_tui.spec import ExperimentSpec
from ddp_tui.spec.environments import clean_environment, conda_executable, env_prefix

__all__ = ["MODULE_INIT_FILES", "environment_context"]

#: Where a batch shell that has no ``module`` function finds one (Lmod's, then Environment
#: Modules'): a non-login shell started with ``--export=NONE`` has none of its own.
MODULE_INIT_FILES = (
    "/etc/profile.d/lmod.sh",
    "/etc/profile.d/modules.sh",
    "/usr/share/lmod/lmod/init/bash",
    "/usr/share/modules/init/bash",
)


def environment_context(spec: ExperimentSpec, run_dir: str, *, mode: str) -> dict[str, Any]:
    """The template values of ``spec``'s environment for a job in ``run_dir`` whose launcher
    runs as ``mode`` (``torchrun_single``, ``torchrun_multi`` or ``srun``). Raises
    :class:`~ddp_tui.spec.SpecError` where a container cannot mount the run directory."""
    s = spec
    prefix = env_prefix(s.python) or posixpath.dirname(posixpath.dirname(s.python))
    container = None
    if s.environment == "container":
        container = container_launch(s, run_dir, multi=mode != "torchrun_single")
    return {
        "environment": s.environment,
        "clean_env": clean_environment(s),
        "modules": list(s.modules),
        "module_init_files": MODULE_INIT_FILES,
        "venv_activate": posixpath.join(prefix, "bin", "activate"),
        "conda_exe": conda_executable(s.python),
        "conda_prefix": prefix,
        "container": container,
        # pyxis exists only in srun: a one-node job starts its launcher as an srun step too.
        "launch_in_step": mode != "torchrun_single"
        or (container is not None and container.in_step),
    }
