"""What the facade reads to diagnose a run and to notice a stall, batched like every read.

The rules themselves are pure (:mod:`ddp_tui.diagnosis`); this module only says which
files they need, as :class:`~ddp_tui.remote.backends.executor.FileRead` requests that join the
refresh's one batch, and turns the answers into :class:`~ddp_tui.diagnosis.RunFacts`:

- an ended attempt: the last :data:`~ddp_tui.diagnosis.TAIL_BYTES` of its ``.out`` and
  ``.err``, ``run.json``, whether ``checkpoints/latest.pt`` exists, and the note ddp-tui
  leaves when it cancels a stalled job itself (:data:`STALL_FILE`);
- an ended script run in snapshot mode also: its ``snapshot.json`` (what the snapshot left
  out, for a file the script could not find);
- where the caller asks (``ddp-tui why``, a refresh that diagnoses), the free space of the
  runs root's filesystem: a command in the same batch (:func:`~ddp_tui.remote.store.space.
  free_space_command`), since a full disk keeps the job's own last words out of its logs;
- an ended NCCL attempt also: its ranks' flight recorder dumps,
  ``nccl_trace/<job id>/rank_<N>`` (:class:`FlightReads`: the first :data:`MAX_DUMP_RANKS`
  ranks, at most :data:`DUMP_BUDGET` bytes in all; a missing dump costs a failed open);
- a running attempt: only the sizes and times of its logs, ``progress.jsonl`` and the
  ``heartbeats/`` directory (whose time moves with every rank's beat), never their bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.diagnosis import TAIL_BYTES, Diagnosis, Evidence, LogTail, RunFacts
from ddp_tui.diagnosis.flight_recorder import (
    Dump,
    FlightDumpError,
    FlightReport,
    analyse,
    dump_path,
    load_dump,
)
from ddp_tui.diagnosis.stall import Heartbeat, Stall, stall_of
from ddp_tui.jobfiles import HEARTBEAT_DIR
from ddp_tui.remote.backends.executor import FileRead, FileStat, ReadResult
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.observe.followers import Feedable, JsonFileReader
from ddp_tui.remote.store.runs import (
    CHECKPOINT_FILE,
    PROGRESS_FILE,
    RUN_JSON,
    SNAPSHOT_FILE,
    RunRef,
    attempt_logs,
)
from ddp_tui.spec import ExperimentSpec

#: Written by ddp-tui before it cancels a stalled job (profile ``cancel_stalled``), so
#: that the cancel is told apart from the user's own.
STALL_FILE = "stall.json"


class StatRead:
    """A file's size and time, without its bytes."""

    needs_reread = False

    def __init__(self, path: str) -> None:
        self.path = path
        self.stat: FileStat | None = None
        self.done = False

    def request(self) -> FileRead:
        return FileRead(self.path, max_bytes=0)

    def read_new(self, result: ReadResult) -> None:
        self.stat = result.stat
        self.done = True


class TailRead:
    """The last :data:`TAIL_BYTES` of a log."""

    needs_reread = False

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self.name = name
        self.tail: LogTail | None = None
        self.bytes_read = 0
        self.done = False

    def request(self) -> FileRead:
        return FileRead(self.path, offset=-TAIL_BYTES)

    def read_new(self, result: ReadResult) -> None:
        self.done = True
        self.bytes_read = len(result.data)
        if result.stat is not None:
            whole = result.stat.size <= TAIL_BYTES
            self.tail = LogTail.of(self.name, result.data, whole=whole)


#: The most ranks whose flight recorder dumps one diagnosis reads (the first ones), and the
#: most bytes of dumps in all. torch 2.15 writes about 320 KB for a full buffer of 2,000
#: entries with 16 frames each (measured), so 64 ranks fit.
MAX_DUMP_RANKS = 64
DUMP_BUDGET = 32 * 1024 * 1024
#: Each dump may use its share of the budget, within these bounds.
MIN_DUMP_BYTES = 512 * 1024
MAX_DUMP_BYTES = 8 * 1024 * 1024


def flight_ranks(spec: ExperimentSpec) -> int:
    """How many ranks' flight recorder dumps a diagnosis of ``spec``'s run looks for: its
    world size for an NCCL run (the job script turns the recorder on), else none."""
    return min(spec.world_size, MAX_DUMP_RANKS) if spec.backend == "nccl" else 0


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


class DumpRead:
    """One rank's flight recorder dump, loaded (never unpickling anything but plain values)."""

    needs_reread = False

    def __init__(self, ref: RunRef, job_id: str, rank: int, max_bytes: int) -> None:
        self.rank = rank
        self.name = dump_path(job_id, rank)
        self.path = ref.file(self.name)
        self.max_bytes = max_bytes
        self.dump: Dump | None = None
        self.error = ""
        self.done = False

    def request(self) -> FileRead:
        return FileRead(self.path, max_bytes=self.max_bytes)

    def read_new(self, result: ReadResult) -> None:
        self.done = True
        if result.stat is None:
            self.error = f"{self.name}: {result.error}" if result.error else ""
            return  # no dump: the rank wrote none
        if result.stat.size > len(result.data):
            self.error = (
                f"{self.name}: {_mib(result.stat.size)}, more than the {_mib(self.max_bytes)} "
                "ddp-tui reads of one dump; read it with torchfrtrace"
            )
            return
        try:
            self.dump = load_dump(result.data, rank=self.rank, name=self.name)
        except FlightDumpError as exc:
            self.error = str(exc)


class FlightReads:
    """The first ranks' flight recorder dumps of one attempt, each within its share of
    :data:`DUMP_BUDGET`."""

    def __init__(self, ref: RunRef, job_id: str, ranks: int, world_size: int) -> None:
        self.world_size = world_size
        share = DUMP_BUDGET // max(1, ranks)
        cap = max(MIN_DUMP_BYTES, min(MAX_DUMP_BYTES, share))
        self.dumps = [DumpRead(ref, job_id, r, cap) for r in range(ranks)]

    def readers(self) -> list[Feedable]:
        return list(self.dumps)

    def report(self) -> FlightReport | None:
        """The dumps' analysis; None where no rank left one (or they were not read)."""
        found = {d.rank: d.dump for d in self.dumps if d.dump is not None}
        bad = {d.rank: d.error for d in self.dumps if d.error}
        if not found and not bad:
            return None
        return analyse(
            found,
            world_size=self.world_size,
            unreadable=bad,
            looked_for=[d.rank for d in self.dumps],
        )


class DiagnosisReads:
    """What diagnosing one ended attempt reads, in one batch."""

    def __init__(self, ref: RunRef, job_id: str, *, spec: ExperimentSpec | None = None) -> None:
        self.job_id = job_id
        out, err = attempt_logs(job_id)
        self.out = TailRead(ref.file(out), out)
        self.err = TailRead(ref.file(err), err)
        self.run_json = JsonFileReader(ref.file(RUN_JSON))
        self.checkpoint = StatRead(ref.file(CHECKPOINT_FILE))
        self.stall_note = JsonFileReader(ref.file(STALL_FILE))
        snapshot = spec is not None and spec.entry == "script" and spec.code_mode == "snapshot"
        self.snapshot = JsonFileReader(ref.file(SNAPSHOT_FILE)) if snapshot else None
        #: Set by the caller from a free-space command in the same batch; None: not asked.
        self.runs_root_free: int | None = None
        self.runs_root = ""
        ranks = flight_ranks(spec) if spec is not None else 0
        self.flight = (
            FlightReads(ref, job_id, ranks, spec.world_size) if spec is not None and ranks else None
        )

    def readers(self) -> list[Feedable]:
        found: list[Feedable] = [self.out, self.err, self.run_json, self.checkpoint]
        found.append(self.stall_note)
        if self.snapshot is not None:
            found.append(self.snapshot)
        return found + (self.flight.readers() if self.flight is not None else [])

    @property
    def done(self) -> bool:
        return self.out.done and self.err.done and self.checkpoint.done

    @property
    def bytes_read(self) -> int:
        return self.out.bytes_read + self.err.bytes_read


def facts_of(spec: ExperimentSpec, status: JobStatus, reads: DiagnosisReads) -> RunFacts:
    """The classifier's input for one ended attempt."""
    rj = reads.run_json.data or {}
    hosts = rj.get("hosts")
    script = spec.entry == "script"
    return RunFacts(
        state=status.state.value,
        raw_state=status.raw_state,
        exit_code=status.exit_code,
        reason=status.reason,
        run_json=rj or None,
        out=reads.out.tail,
        err=reads.err.tail,
        entry=spec.entry,
        script=spec.script,
        nodes=spec.nodes,
        world_size=spec.world_size,
        hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
        # A script keeps its checkpoints where it likes: unknown, rather than "none".
        checkpoint=None if script else reads.checkpoint.stat is not None,
        requeue=spec.requeue,
        python=spec.python,
        dataset=spec.dataset,
        data_root=spec.data_root,
        flight=reads.flight.report() if reads.flight is not None else None,
        snapshot=reads.snapshot.data if reads.snapshot is not None else None,
        runs_root_free=reads.runs_root_free,
        runs_root=reads.runs_root,
    )


def diagnose(spec: ExperimentSpec, status: JobStatus, reads: DiagnosisReads) -> Diagnosis | None:
    """Why the attempt ended as it did; a cancel ddp-tui made of a stall says so."""
    note = reads.stall_note.data
    if (
        status.state is JobState.CANCELLED
        and note is not None
        and str(note.get("job_id")) == status.job_id
    ):
        flight = reads.flight.report() if reads.flight is not None else None
        return stall_cancel_diagnosis(note, nccl=spec.backend == "nccl", flight=flight)
    from ddp_tui.diagnosis.classifier import classify  # its rules load on first use

    return classify(facts_of(spec, status, reads))


def stall_note(job_id: str, stall: Stall, *, stuck: str = "") -> bytes:
    """The :data:`STALL_FILE` written before ddp-tui cancels a stalled job; ``stuck``: the
    stuck-ranks summary of the stacks taken just before (docs/stacks.md)."""
    doc: dict[str, Any] = {
        "job_id": job_id,
        "quiet_sec": round(stall.quiet_sec),
        "summary": stall.summary,
    }
    if stuck:
        doc["stuck"] = stuck
    return (json.dumps(doc) + "\n").encode()


def stall_cancel_diagnosis(
    note: Mapping[str, Any], *, nccl: bool = False, flight: FlightReport | None = None
) -> Diagnosis:
    summary = str(note.get("summary", ""))
    minutes = round(float(note.get("quiet_sec", 0) or 0) / 60)
    cause = f"ddp-tui cancelled the job after it stalled: {summary}"
    stuck = note.get("stuck")
    if isinstance(stuck, str) and stuck:
        cause += f". Where its ranks were, from their stacks taken before the cancel: {stuck}"
    advice = (
        "Look at the last lines of the logs and at the silent ranks; a rank stuck in "
        "a collective usually waits for one that crashed or hangs in data loading. "
        "Set NCCL_DEBUG=INFO to see where a collective waits."
    )
    if flight is not None and flight.hangs:
        cause += f". The NCCL flight recorder's dumps: {flight.hangs[0].sentence}"
    elif nccl:
        advice += (
            " The NCCL flight recorder dumps (nccl_trace/) only when a collective times out "
            "(the process group's timeout), never on a cancel: a stall shorter than that "
            "timeout leaves none."
        )
    return Diagnosis(
        code="stalled",
        short=f"stalled {minutes} min, cancelled",
        cause=cause,
        advice=advice,
        evidence=(Evidence(STALL_FILE, None, summary),),
    )


class Activity:
    """Whether a running attempt still moves: the times of its outputs, read as stats."""

    def __init__(self, ref: RunRef, job_id: str, *, heartbeats: bool) -> None:
        self.job_id = job_id
        out, err = attempt_logs(job_id)
        paths = [ref.file(out), ref.file(err), ref.file(PROGRESS_FILE)]
        if heartbeats:  # a user's script writes none: its logs and progress must do
            paths.append(ref.file(HEARTBEAT_DIR))
        self.stats = [StatRead(p) for p in paths]

    def readers(self) -> list[Feedable]:
        return list(self.stats)

    def times(self) -> list[float | None]:
        return [s.stat.mtime if s.stat is not None else None for s in self.stats]

    def stall(
        self,
        now: float,
        after_sec: float,
        world_size: int | None,
        heartbeats: Sequence[Heartbeat] = (),
    ) -> Stall | None:
        if not any(s.done for s in self.stats):
            return None  # not read yet: no verdict
        return stall_of(
            now=now,
            activity=self.times(),
            after_sec=after_sec,
            heartbeats=heartbeats,
            world_size=world_size,
        )


def heartbeat_reads(ref: RunRef, world_size: int) -> list[FileRead]:
    """One read per rank's heartbeat file (the followed run only)."""
    return [FileRead(ref.file(f"{HEARTBEAT_DIR}/rank-{r}.json")) for r in range(world_size)]


def heartbeats_of(results: Sequence[ReadResult]) -> list[Heartbeat]:
    out: list[Heartbeat] = []
    for res in results:
        if res.stat is None or not res.data:
            continue
        try:
            doc = json.loads(res.data.decode("utf-8", "replace"))
        except ValueError:
            continue  # being replaced right now
        hb = Heartbeat.from_dict(doc) if isinstance(doc, dict) else None
        if hb is not None:
            out.append(hb)
    return out
