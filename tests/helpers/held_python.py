"""A job Python that never starts on one node: a rendezvous one node's task never joins.

:func:`python_held_on` writes a small shell wrapper to use as the spec's ``python``. On the
named host it waits while the hold file (tests/helpers/hold.py) exists, *before* the real
interpreter starts; everywhere else it ``exec``s the real interpreter at once. So in a 2-node
job the launcher (torchrun, or the trainer under srun) runs on the first node and waits at the
rendezvous for a node whose process does not exist: the real "one node's task never started"
(a stuck ``module load``, a node whose file system hangs), by construction, not by a race.

The wrapper must be where the job's nodes can read it: the Slurm test nodes share this file
system. srun's ``--kill-on-bad-exit`` ends the waiting wrapper once the first node's task
fails; the hold's release at the end of the test ends it in any case.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.helpers.hold import Hold


def python_held_on(host: str, hold: Hold, directory: Path, real: str = sys.executable) -> Path:
    """The wrapper's path (``<directory>/python-held-on-<host>``), executable."""
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / f"python-held-on-{host}"
    file = shlex.quote(str(hold.file))
    wrapper.write_text(
        "#!/bin/bash\n"
        "# Written by tests/helpers/held_python.py: never starts Python on "
        f"{host} while {hold.file} exists.\n"
        f'if [ "$(hostname)" = {shlex.quote(host)} ]; then\n'
        f'    echo "[test hold] python on $(hostname) waits on {hold.file}" >&2\n'
        f"    while [ -e {file} ]; do sleep 0.2; done\n"
        "fi\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
