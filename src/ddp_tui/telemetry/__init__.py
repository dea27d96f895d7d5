"""The job side of resource telemetry: one sampler per node of a job.

``python -m ddp_tui.telemetry --run-dir DIR ...`` (:mod:`.cli`) appends, every few seconds, one
``host`` line (the job's resident memory with its children, CPU time, load) and one ``gpu`` line
per visible device (NVML, else ``nvidia-smi``, else none) to ``<run>/telemetry/node-<K>.jsonl``
(docs/architecture.md, "The run directory"). :mod:`.procs` finds the job's processes in
``/proc`` by their environment, :mod:`.gpus` reads and parses the devices, :mod:`.lines` builds
the JSON lines and :mod:`.sampler` runs the loop and writes them; :mod:`.launch` starts it in
front of a job's launcher. Like the trainer it is copied into each run directory, may run on an
old Python (3.8), and imports only the standard library and ``ddp_tui.jobfiles``. Nothing in it
may fail the job: problems become ``note`` lines and the exit code is always 0.
"""
