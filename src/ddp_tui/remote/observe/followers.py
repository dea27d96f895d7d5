"""Incremental readers of one run's files, for the jobs table and the followed run.

They do no I/O themselves: each says which :class:`FileRead` it needs next and takes the
:class:`ReadResult` back, so that the facade batches every run's reads (and the
scheduler's poll) into one round trip.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ddp_tui.jobfiles import telemetry_file
from ddp_tui.remote.backends.executor import Batch, Executor, FileRead, ReadResult
from ddp_tui.remote.model.views import RunDetail
from ddp_tui.remote.store.run_damage import check_run_json
from ddp_tui.remote.store.runs import (
    METRICS_FILE,
    PREFLIGHT_FILE,
    PROGRESS_FILE,
    RUN_JSON,
    RunRef,
    attempt_logs,
)
from ddp_tui.remote.store.tail import (
    IncrementalFile,
    JsonLinesReader,
    LogReader,
    MetricsReader,
    MetricsRow,
    ProgressReader,
)
from ddp_tui.resources import ResourceAccumulator, ResourceView


class Feedable(Protocol):
    @property
    def needs_reread(self) -> bool: ...

    def request(self) -> FileRead: ...
    def read_new(self, result: ReadResult) -> Any: ...


def json_or_none(result: ReadResult) -> dict[str, Any] | None:
    """A JSON object file's content, or None (absent, empty, or being rewritten)."""
    if result.stat is None or not result.data:
        return None
    try:
        doc = json.loads(result.data.decode("utf-8", "replace"))
    except ValueError:
        return None  # being rewritten right now: keep the last good copy
    return doc if isinstance(doc, dict) else None


@dataclass
class JsonFileReader:
    path: str
    data: dict[str, Any] | None = None
    needs_reread: bool = False

    def request(self) -> FileRead:
        return FileRead(self.path)

    def read_new(self, result: ReadResult) -> dict[str, Any] | None:
        self.data = json_or_none(result) or self.data
        return self.data


class TableReaders:
    """What the jobs table needs of one run, read incrementally: a training run's
    metrics, progress and run.json; a preflight run's preflight.json and run.json."""

    def __init__(self, ref: RunRef, kind: str) -> None:
        self.metrics = MetricsReader(ref.file(METRICS_FILE))
        self.progress = ProgressReader(ref.file(PROGRESS_FILE))
        self._run_json = JsonFileReader(ref.file(RUN_JSON))
        self._preflight = JsonFileReader(ref.file(PREFLIGHT_FILE))
        self._readers: list[Feedable] = (
            [self._preflight, self._run_json]
            if kind == "preflight"
            else [self.metrics, self.progress, self._run_json]
        )
        #: The attempt whose end has been followed by one last read of the files.
        self.read_after_end: str | None = None

    @property
    def run_json(self) -> dict[str, Any] | None:
        return self._run_json.data

    @property
    def preflight(self) -> dict[str, Any] | None:
        return self._preflight.data

    def readers(self) -> list[Feedable]:
        return self._readers


class _TelemetryFile(JsonLinesReader):
    """One node's ``telemetry/node-K.jsonl``, its samples fed to the run's accumulator."""

    def __init__(self, path: str, owner: TelemetryReaders) -> None:
        super().__init__(path)
        self.owner = owner

    def _restart(self) -> None:
        super()._restart()
        self.owner.restart(self)

    def settle(self) -> None:
        """Take a reset made by the owner as seen, so that it does not restart the owner
        again (each file's restart would otherwise reset all the others, without end)."""
        self._generation = self.file.generation

    def _parse(self, lines: list[str]) -> list[dict[str, Any]]:
        new = super()._parse(lines)
        if new:
            self.owner.accumulator.add_all(new)
            self.owner.version += 1
        return new


class TelemetryReaders:
    """Every node's telemetry file of one run, read from byte 0 and incrementally into one
    bounded accumulator: the Resources tab's summaries and plots cost the new lines only."""

    def __init__(self, ref: RunRef, nodes: int) -> None:
        self.files = [_TelemetryFile(ref.file(telemetry_file(k)), self) for k in range(nodes)]
        self.accumulator = ResourceAccumulator()
        #: Bumped when lines arrive; with the state, says whether the view changed.
        self.version = 0
        self._shown: tuple[int, str, int] | None = None

    def restart(self, restarted: _TelemetryFile) -> None:
        """A file was truncated or replaced: the totals start again, from every file's start."""
        self.accumulator = ResourceAccumulator()
        self.version += 1
        for f in self.files:
            if f is not restarted:
                f.file.reset()
                f.file.needs_reread = True
                f.settle()

    def view(self, *, telemetry_sec: int, state: str) -> ResourceView | None:
        """The view when something changed since the last call, else None (no news)."""
        key = (self.version, state, telemetry_sec)
        if key == self._shown:
            return None
        self._shown = key
        return self.accumulator.view(telemetry_sec=telemetry_sec, state=state)


#: Runs whose telemetry :class:`TelemetryCache` keeps read (the oldest used goes first).
TELEMETRY_RUNS_KEPT = 64
#: Batches one catch-up may take (each reads up to 4 MiB per file).
_CATCH_UP_ROUNDS = 64


class TelemetryCache:
    """Runs' telemetry, kept read between calls: Compare recomputes as a group's runs
    progress, and a long GPU job's files run to megabytes, so each call reads only the bytes
    that arrived since the last (a run read for the first time is read whole, in 4 MiB
    steps). At most :data:`TELEMETRY_RUNS_KEPT` runs are kept."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._runs: dict[str, TelemetryReaders] = {}

    def readers(self, ref: RunRef, nodes: int) -> TelemetryReaders:
        """The run's readers, brought up to date with its files."""
        readers = self._runs.pop(ref.run_id, None)
        if readers is None or len(readers.files) != nodes:
            readers = TelemetryReaders(ref, nodes)
        self._runs[ref.run_id] = readers  # now the most recently used
        while len(self._runs) > TELEMETRY_RUNS_KEPT:
            del self._runs[next(iter(self._runs))]
        catch_up(self.executor, readers.files)
        return readers


class _Catching(Feedable, Protocol):
    @property
    def file(self) -> IncrementalFile: ...


def catch_up(
    executor: Executor, readers: Sequence[_Catching], rounds: int = _CATCH_UP_ROUNDS
) -> None:
    """Read ``readers`` to their files' ends, all of them in each batch, at most ``rounds``
    batches (a reader restarted meanwhile reads again)."""
    pending = list(readers)
    for _ in range(rounds):
        if not pending:
            break
        results = executor.run_batch(Batch(reads=[r.request() for r in pending])).reads
        behind = []
        # (Taken before any result is fed: a telemetry file's restart resets its siblings.)
        offsets = [reader.file.offset for reader in pending]
        for reader, res, before in zip(pending, results, offsets, strict=True):
            reader.read_new(res)
            # Behind: restarted, or it moved (or was reset) and there is more; a directory in
            # the file's place, or an unreadable file, moves nothing: no use asking 64 times.
            moved = reader.file.offset != before
            if reader.needs_reread or (
                moved and res.stat is not None and res.stat.size > reader.file.offset
            ):
                behind.append(reader)
        pending = behind


class MetricsCache:
    """Runs' ``metrics.csv`` rows, kept read between calls: Compare recomputes as a group's
    runs progress, so each call reads only the bytes appended since the last one (a run read
    the first time is read whole, 4 MiB a batch, every run of the call in each batch) and
    parses only the new rows. Only the runs of the latest call are kept: memory is one
    group's rows, whichever groups were compared before."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._runs: dict[str, MetricsReader] = {}

    def rows(self, refs: Sequence[RunRef]) -> dict[str, list[MetricsRow]]:
        """Every row of each run's ``metrics.csv``, by run id (none before it exists)."""
        readers = {
            ref.run_id: self._runs.get(ref.run_id) or MetricsReader(ref.file(METRICS_FILE))
            for ref in refs
        }
        self._runs = readers
        catch_up(self.executor, list(readers.values()))
        return {run_id: reader.rows for run_id, reader in readers.items()}


class Follower:
    """The followed run's logs (of its latest attempt), metrics, progress and telemetry."""

    def __init__(self, ref: RunRef, job_id: str | None, *, nodes: int = 1) -> None:
        self.job_id = job_id
        out, err = attempt_logs(job_id or "none")
        self.out = LogReader(ref.file(out))
        self.err = LogReader(ref.file(err))
        self.metrics = MetricsReader(ref.file(METRICS_FILE), sample=True)
        self.progress = ProgressReader(ref.file(PROGRESS_FILE))
        self.telemetry = TelemetryReaders(ref, nodes)
        self.accounting: str | None = None

    def readers(self) -> list[Feedable]:
        """Every file a follow reads, in the order their results come back."""
        return [self.out, self.err, self.metrics, self.progress, *self.telemetry.files]


class FollowPass:
    """One round of reads for the followed run (possibly spread over two batches)."""

    def __init__(
        self, ref: RunRef, follower: Follower, detail: RunDetail, gens: tuple[int, int]
    ) -> None:
        self.ref = ref
        self.follower = follower
        self.detail = detail
        self.gens = gens
        f = follower
        self.pending: list[Feedable] = f.readers()
        self._run_json = FileRead(ref.file(RUN_JSON))
        #: Each rank's heartbeat file, read in the first round only (a stalled run's
        #: silent ranks; set by the facade for running trainer runs).
        self.heartbeat_reads: list[FileRead] = []
        self.heartbeats: list[ReadResult] = []
        #: The metrics reader stopped short of its file's end (4 MiB a read).
        self.metrics_behind = False
        self._round = 0

    def requests(self) -> list[FileRead]:
        extra = self.heartbeat_reads if self._round == 0 else []
        return [r.request() for r in self.pending] + [self._run_json, *extra]

    def feed(self, reads: Sequence[ReadResult]) -> None:
        f, d = self.follower, self.detail
        n = len(self.pending)
        for reader, res in zip(self.pending, reads[:n], strict=False):
            before = reader.file.offset if reader is f.metrics else 0
            new = reader.read_new(res)
            if reader is f.metrics:
                offset = f.metrics.file.offset
                self.metrics_behind = (
                    offset != before and res.stat is not None and res.stat.size > offset
                )
            if reader is f.out:
                d.out_lines += new
            elif reader is f.err:
                d.err_lines += new
        if len(reads) > n:
            doc = json_or_none(reads[n])
            # Run detail shows what run.json holds of the right type (see run_damage).
            d.run_json = check_run_json(doc)[0] if doc is not None else d.run_json
        if self._round == 0:
            self.heartbeats = list(reads[n + 1 :])
        self._round += 1
        self.pending = [r for r in f.readers() if r.needs_reread]
