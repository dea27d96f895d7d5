"""The job side of "bring your own training script": the wrapper every worker process runs.

``python -m ddp_tui.scriptrun --run-dir DIR ... -- SCRIPT.py ARGS`` sets up the environment the
run-directory contract promises (docs/architecture.md), execs the script on ranks other than 0,
and on rank 0 runs it as a child whose stdout it copies unchanged and parses into the same
``metrics.csv``, ``progress.jsonl`` and ``run.json`` the built-in trainer writes. Metrics come
from the reporting helper's ``@ddp-tui`` lines (:mod:`.report`), the presets and user regexes
of :mod:`.presets`, tqdm bars on stderr (copied unchanged too; ``auto`` and ``tqdm`` only), or
a CSV file the script writes (:mod:`.csvsource`). Like the trainer it is
copied into each run directory and imports only the standard library and itself.
"""
