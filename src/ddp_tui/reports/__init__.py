"""What ddp-tui reports about runs, as pure data and text: no I/O (docs/architecture.md).

- :mod:`~ddp_tui.reports.outcomes`: a group's outcome table (the fields that differ, each
  run's outcome, the best run) and the diff of two runs (docs/compare.md);
- :mod:`~ddp_tui.reports.results`: per-run summaries and a group's scaling comparison, with
  their Markdown and CSV;
- :mod:`~ddp_tui.reports.usage`: what a run costs in GPU-hours (CPU-hours on the CPU);
- :mod:`~ddp_tui.reports.text`: strict JSON, as every ``--json`` prints it, and log lines
  as a terminal shows them.

Import the modules themselves: this package imports nothing, so that ``usage`` and ``text``
stay light (``ls`` and the Jobs screen) while ``outcomes`` and ``results`` need pandas.
"""
