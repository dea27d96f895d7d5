"""What a scheduler says of itself that rarely changes, asked once per session: its
partitions (sinfo) and its version."""

from __future__ import annotations

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.scheduler import PartitionInfo, Scheduler, SchedulerError


class SchedulerFacts:
    """The scheduler's partitions and version, cached for the session."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._partitions: list[PartitionInfo] | None = None
        self._version: str | None = None

    def partitions(self) -> list[PartitionInfo]:
        """sinfo's partitions; raises what the scheduler raises (nothing is cached then)."""
        if self._partitions is None:
            self._partitions = self.scheduler.partitions()
        return self._partitions

    def known_partitions(self) -> list[PartitionInfo]:
        """The partitions, or none while sinfo does not answer: advice then goes on without
        the partition's size."""
        try:
            return self.partitions()
        except (SchedulerError, ExecutorError):
            return []

    def version(self) -> str:
        """The scheduler's version, or "?" while it does not answer."""
        if self._version is None:
            try:
                self._version = self.scheduler.version()
            except (SchedulerError, ExecutorError):
                return "?"
        return self._version
