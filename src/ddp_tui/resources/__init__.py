"""Resource telemetry summaries: what ``telemetry/node-K.jsonl`` says of a run's GPUs and hosts.

The sampler (``ddp_tui.telemetry``) writes one JSON line per device and one per node every
few seconds (the line format is in docs/architecture.md). This package, pure and standard
library only, turns those lines into per-device and per-node memory statistics (peak, mean,
and the mode on 64 MiB bins), average utilisation and power, plot series over time, and the
idle flag of a GPU that a running job is not using: :mod:`.summary` holds the shapes and their
words, :mod:`.bounded` the bounded accumulators, :mod:`.accumulator` the line reader. However
long a job runs, memory stays bounded.
"""

from ddp_tui.resources.accumulator import (
    MAX_NOTES,
    ResourceAccumulator,
    parse_lines,
    summarize_samples,
)
from ddp_tui.resources.summary import (
    IDLE_AFTER_SEC,
    IDLE_UTIL_PCT,
    MAX_POINTS,
    MODE_BIN_MIB,
    RESOURCE_TABLE_HEADER,
    DeviceSummary,
    HostSummary,
    MemoryStats,
    ResourceSummary,
    ResourceView,
    Series,
    attempts_text,
    empty_reason,
    idle_devices,
    resources_table,
)

__all__ = [
    "IDLE_AFTER_SEC",
    "IDLE_UTIL_PCT",
    "MAX_NOTES",
    "MAX_POINTS",
    "MODE_BIN_MIB",
    "RESOURCE_TABLE_HEADER",
    "DeviceSummary",
    "HostSummary",
    "MemoryStats",
    "ResourceAccumulator",
    "ResourceSummary",
    "ResourceView",
    "Series",
    "attempts_text",
    "empty_reason",
    "idle_devices",
    "parse_lines",
    "resources_table",
    "summarize_samples",
]
