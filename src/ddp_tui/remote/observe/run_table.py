"""The jobs table: incremental readers of each run's files, and each run's row.

A row is rebuilt only when something it shows has changed (its attempts, its status,
its files as read so far), so a refresh of thousands of finished runs costs little.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.diagnosis.stall import STALL_AFTER_SEC
from ddp_tui.remote.backends.executor import FileRead, ReadResult
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.view_building import build_view, efficiency_of, latest_job_id, spec_of
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.diagnosing import Activity, DiagnosisReads, diagnose
from ddp_tui.remote.observe.followers import Feedable, TableReaders
from ddp_tui.remote.store.run_damage import (
    Damage,
    check_progress,
    check_run_json,
    load_object,
    read_problem,
)
from ddp_tui.remote.store.runs import RunInfo
from ddp_tui.spec import ExperimentSpec

#: Ended runs diagnosed from their logs per refresh when the app reads the runs in
#: batches; the rest wait for the next refresh, so a first table of thousands of old runs
#: does not wait for their logs.
DIAGNOSES_PER_REFRESH = 50


class _Watched:
    """A table reader whose results are checked on the way in: a file that cannot be read
    (a directory in its place, permission denied, a symlink loop) or, for a JSON object
    file, is not one, is named in ``problems`` (file name -> problem) until it is right."""

    def __init__(self, reader: Feedable, problems: dict[str, str]) -> None:
        self.reader = reader
        self.problems = problems
        self.name = reader.request().path.rsplit("/", 1)[-1]
        self.whole_json = self.name.endswith(".json")

    @property
    def needs_reread(self) -> bool:
        return self.reader.needs_reread

    def request(self) -> FileRead:
        return self.reader.request()

    def read_new(self, result: ReadResult) -> Any:
        problem = read_problem(result)
        if problem is None and self.whole_json and result.data:
            problem = load_object(result.data)[1]
        if problem is None:
            self.problems.pop(self.name, None)
        else:
            self.problems[self.name] = problem
        return self.reader.read_new(result)


class RunTable:
    """Readers and rows of the runs the facade lists."""

    def __init__(
        self,
        states: AttemptStates,
        *,
        stall_after_sec: float = STALL_AFTER_SEC,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.states = states
        #: Quiet time before a running job is called stalled (<= 0: never).
        self.stall_after_sec = stall_after_sec
        self.clock = clock
        #: Ended runs diagnosed from their logs per call of :meth:`requests` (None: all).
        self.diagnoses_per_refresh: int | None = None
        self._readers: dict[str, TableReaders] = {}
        self._specs: dict[str, ExperimentSpec] = {}
        self._rows: dict[str, tuple[tuple[object, ...], RunView]] = {}
        # run id -> (job id, diagnosis) computed in this process from the logs' tails
        self._diagnoses: dict[str, tuple[str, Diagnosis | None]] = {}
        self._diagnosing: dict[str, DiagnosisReads] = {}
        #: The runs root's free bytes, read in the refresh that read the logs' tails (the
        #: facade sets it); a diagnosis may need it (rules_disk.disk_full_by_space).
        self.runs_root_free: int | None = None
        self.runs_root = ""
        self._stored: dict[int, Diagnosis | None] = {}  # id(end record) -> its diagnosis
        self._activity: dict[str, Activity] = {}
        # run id -> its table readers, checked, and what they found wrong (by file name)
        self._watched: dict[str, list[Feedable]] = {}
        self._problems: dict[str, dict[str, str]] = {}

    def requests(self, infos: Sequence[RunInfo]) -> list[Feedable]:
        """Reads for the table: the files of runs not yet known to be finished, and one
        last read of each run whose end was learned since its files were last read; the
        logs' tails of ended runs not diagnosed yet; the stats that tell a stall."""
        out: list[Feedable] = []
        budget = self.diagnoses_per_refresh
        for info in infos:
            t = self._readers.get(info.run_id)
            if t is None:
                t = self._readers[info.run_id] = TableReaders(info.ref, info.kind)
                problems = self._problems[info.run_id] = {}
                self._watched[info.run_id] = [_Watched(r, problems) for r in t.readers()]
            final = self.states.end_of(info)
            if final is not None:
                self._activity.pop(info.run_id, None)
                if self._wants_diagnosis(info, final):
                    reads = DiagnosisReads(info.ref, final.job_id, spec=self.spec_of(info))
                    clean = final.state is JobState.COMPLETED and not final.exit_code
                    if clean and self.spec_of(info).entry != "script":
                        # A clean end of the trainer needs no logs: the rules say "completed"
                        # from the state alone, and most runs end so. A user's script's does:
                        # its ranks may have trained alone, or no epoch been recognised.
                        self._diagnoses[info.run_id] = (
                            final.job_id,
                            diagnose(self.spec_of(info), final, reads),
                        )
                    elif budget is None or budget > 0:
                        self._diagnosing[info.run_id] = reads
                        out += reads.readers()
                        budget = None if budget is None else budget - 1
                if t.read_after_end == final.job_id and not t.metrics.file.behind:
                    continue  # ended, and its files were read to their end since: done
                t.read_after_end = final.job_id  # this read catches the last rows
            else:
                out += self._activity_reads(info)
            out += self._watched[info.run_id]
        return out

    @property
    def diagnosing(self) -> bool:
        """Some ended run's logs are being read for its diagnosis."""
        return bool(self._diagnosing)

    def _wants_diagnosis(self, info: RunInfo, final: JobStatus) -> bool:
        if info.kind != "train" or self._stored_diagnosis(info, final.job_id) is not None:
            return False
        done = self._diagnoses.get(info.run_id)
        return done is None or done[0] != final.job_id

    def _stored_diagnosis(self, info: RunInfo, job_id: str) -> Diagnosis | None:
        """The diagnosis the attempt's end record carries (of this version of the rules)."""
        rec = info.ends.get(job_id)
        if rec is None:
            return None
        key = id(rec)
        if key not in self._stored:
            doc = rec.get("diagnosis")
            self._stored[key] = Diagnosis.from_dict(doc) if isinstance(doc, Mapping) else None
        return self._stored[key]

    def _activity_reads(self, info: RunInfo) -> list[Feedable]:
        status = self.states.status_of(info)
        job_id = latest_job_id(info)
        if (
            self.stall_after_sec <= 0
            or job_id is None
            or status is None
            or status.state is not JobState.RUNNING
            or info.kind != "train"
        ):
            self._activity.pop(info.run_id, None)
            return []
        act = self._activity.get(info.run_id)
        if act is None or act.job_id != job_id:
            trainer = str(info.spec.get("entry", "trainer")) != "script"
            act = self._activity[info.run_id] = Activity(info.ref, job_id, heartbeats=trainer)
        return act.readers()

    def diagnosis_of(self, info: RunInfo) -> Diagnosis | None:
        """The ended latest attempt's diagnosis: stored in its end record, or worked out
        here once its logs' tails have been read (None until then, or when unknown)."""
        final = self.states.end_of(info)
        if final is None or info.kind != "train":
            return None
        stored = self._stored_diagnosis(info, final.job_id)
        if stored is not None:
            return stored
        reads = self._diagnosing.get(info.run_id)
        if reads is not None and reads.job_id == final.job_id and reads.done:
            del self._diagnosing[info.run_id]
            reads.runs_root_free, reads.runs_root = self.runs_root_free, self.runs_root
            spec = self.spec_of(info)
            self._diagnoses[info.run_id] = (final.job_id, diagnose(spec, final, reads))
        done = self._diagnoses.get(info.run_id)
        return done[1] if done is not None and done[0] == final.job_id else None

    def end_extra(self, info: RunInfo) -> dict[str, Any]:
        """What the end record of the run's latest attempt carries beside its state."""
        diagnosis = self.diagnosis_of(info)
        return {"diagnosis": diagnosis.to_dict()} if diagnosis is not None else {}

    def spec_of(self, info: RunInfo) -> ExperimentSpec:
        """The run's spec, parsed once."""
        spec = self._specs.get(info.run_id)
        if spec is None:  # spec.json never changes: parse it once
            spec = self._specs[info.run_id] = spec_of(info)
        return spec

    def just_ended(self, infos: Sequence[RunInfo]) -> list[RunInfo]:
        """Runs whose end is known but whose files have not been read since."""
        return [
            info
            for info in infos
            if info.run_id in self._readers
            and (final := self.states.end_of(info)) is not None
            and self._readers[info.run_id].read_after_end != final.job_id
        ]

    def unread_end(self, infos: Sequence[RunInfo]) -> None:
        """The last read of these ended runs failed: make it again next time."""
        for info in infos:
            self._readers[info.run_id].read_after_end = None

    def view(self, info: RunInfo) -> RunView:
        """The run's row; rebuilt only when something it shows has changed."""
        t = self._readers.get(info.run_id)
        status = self.states.status_of(info)
        diagnosis = self.diagnosis_of(info)
        spec = self.spec_of(info)
        act = self._activity.get(info.run_id)
        stall = (
            # No heartbeats read here (the followed run's are): name no ranks.
            act.stall(self.clock(), self.stall_after_sec, None) if act is not None else None
        )
        problems = self._problems.get(info.run_id, {})
        key = (
            len(info.jobs),
            status,
            len(t.metrics.rows) if t else -1,
            id(t.progress.latest) if t else 0,
            id(t.run_json) if t else 0,
            id(t.preflight) if t else 0,
            id(diagnosis),
            stall,
            info.damage,
            tuple(problems.items()),
            efficiency_of(info),
        )
        cached = self._rows.get(info.run_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        view = build_view(
            info,
            spec,
            status,
            metrics=t.metrics.rows if t else (),
            progress=t.progress.latest if t else None,
            run_json=t.run_json if t else None,
            preflight=t.preflight if t else None,
            damage=self._file_damage(t, problems, status),
        )
        if diagnosis is not None or stall is not None:
            view = replace(view, diagnosis=diagnosis, stall=stall)
        self._rows[info.run_id] = (key, view)
        return view

    @staticmethod
    def _file_damage(
        t: TableReaders | None, problems: Mapping[str, str], status: JobStatus | None
    ) -> tuple[Damage, ...]:
        """What the table files of a run hold that cannot be right: files that cannot be
        read, run.json's wrong fields, and (while it runs) the latest progress line's."""
        out = [Damage(name, problem) for name, problem in problems.items()]
        if t is not None and t.run_json is not None:
            out += [Damage("run.json", p) for p in check_run_json(t.run_json)[1]]
        latest = t.progress.latest if t is not None else None
        if latest is not None and status is not None and status.state.is_active:
            out += [Damage("progress.jsonl", p) for p in check_progress(latest)[1]]
        return tuple(out)
