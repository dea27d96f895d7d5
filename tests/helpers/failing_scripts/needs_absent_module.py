"""A user's DDP script that imports a package the job's Python does not have.

It is what a user sees when the cluster's environment lacks one of their script's
dependencies: every rank dies at import time with ``ModuleNotFoundError: No module named
'absent_augment_lib'``, before any training (``tests/integration/test_diagnosis_local.py``).
The module name is made up so that no environment can ever have it. It lives apart from
``user_scripts`` so the snapshots of the scripts that do run stay as they are.
"""

from __future__ import annotations

import absent_augment_lib  # noqa: F401  (the missing dependency, on purpose)
import torch  # the job's Python has torch: the failure is the user's own dependency

print(f"torch {torch.__version__}: not reached", flush=True)
