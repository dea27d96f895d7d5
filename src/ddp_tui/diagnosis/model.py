"""What a diagnosis is made of, and what it is made from.

The classifier (:func:`ddp_tui.diagnosis.classify`) reads a :class:`RunFacts`: the run's
state and exit code, its ``run.json``, the tails of the latest attempt's ``.out`` and
``.err``, a script's ``snapshot.json`` and the runs root's free space. It answers a
:class:`Diagnosis` whose every claim points at an :class:`Evidence` line, or None when it
recognises nothing (never a guess).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddp_tui.diagnosis.flight_recorder import FlightReport

#: Bumped whenever the rules change: a diagnosis stored in ``jobs.jsonl`` by an older
#: version is computed again from the logs instead of being trusted.
DIAGNOSIS_VERSION = 6
#: The most the facade reads of each log for a diagnosis: a tail, so that a 400 MB
#: ``.out`` costs the same as a small one.
TAIL_BYTES = 64 * 1024
#: Evidence text is cut here: a line of tqdm bars can be megabytes long.
MAX_EVIDENCE_CHARS = 300

SEVERITIES = ("fix", "info", "ok")
#: Evidence "files" that are read whole or are no file at all: no line number, no "(tail)".
WHOLE_FILES = ("scheduler", "run.json", "snapshot.json", "df")


@dataclass(frozen=True)
class Evidence:
    """One line that supports a diagnosis, and where it is."""

    file: str  # "slurm-12.err", "run.json", or "scheduler" for the job's state itself
    line: int | None  # 1-based; None where the tail read did not start at the file's start
    text: str

    @property
    def label(self) -> str:
        """``slurm-12.err:57``, or ``slurm-12.err (near the end)`` where the number is unknown."""
        if self.line is not None:
            return f"{self.file}:{self.line}"
        whole = self.file in WHOLE_FILES or self.file.startswith("nccl_trace/")
        return self.file if whole else f"{self.file} (tail)"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Evidence:
        line = doc.get("line")
        return cls(
            file=str(doc.get("file", "")),
            line=line if isinstance(line, int) else None,
            text=str(doc.get("text", ""))[:MAX_EVIDENCE_CHARS],
        )


@dataclass(frozen=True)
class Diagnosis:
    """Why a run ended as it did: a cause, the lines that show it, and what to do."""

    code: str  # a stable id: "missing-module", "cuda-oom", "time-limit", ...
    short: str  # at most 32 characters, for the Jobs reason column and `ddp-tui ls`
    cause: str  # one sentence
    advice: str  # what to do about it
    evidence: tuple[Evidence, ...] = ()
    #: "fix": something to fix before a retry; "info": nothing to fix (a cancel by the user,
    #: a requeue); "ok": it completed.
    severity: str = "fix"

    @property
    def needs_fix(self) -> bool:
        return self.severity == "fix"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": DIAGNOSIS_VERSION,
            "code": self.code,
            "short": self.short,
            "cause": self.cause,
            "advice": self.advice,
            "severity": self.severity,
            "evidence": [e.to_dict() for e in self.evidence],
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Diagnosis | None:
        """The stored diagnosis, or None where it is missing, malformed or from an older
        version of the rules (then it is computed again)."""
        if doc.get("version") != DIAGNOSIS_VERSION or not doc.get("code"):
            return None
        severity = str(doc.get("severity", "fix"))
        evidence = doc.get("evidence")
        return cls(
            code=str(doc["code"]),
            short=str(doc.get("short", "")),
            cause=str(doc.get("cause", "")),
            advice=str(doc.get("advice", "")),
            severity=severity if severity in SEVERITIES else "fix",
            evidence=tuple(Evidence.from_dict(e) for e in evidence if isinstance(e, Mapping))
            if isinstance(evidence, list)
            else (),
        )


@dataclass(frozen=True)
class LogTail:
    """The end of one log file, as read for a diagnosis."""

    name: str  # the file's name in the run directory, e.g. "slurm-12.err"
    text: str
    #: The line number of the first line of ``text``: 1 when the tail is the whole file,
    #: None when it starts mid-file (its first, partial line is then dropped).
    first_line: int | None = 1

    @classmethod
    def of(cls, name: str, data: bytes, *, whole: bool) -> LogTail:
        """A tail from raw bytes; ``whole`` says whether they start at the file's start."""
        text = data.decode("utf-8", "replace")
        if not whole:
            cut = text.find("\n")
            text = text[cut + 1 :] if cut >= 0 else ""
        return cls(name, text, 1 if whole else None)

    def lines(self) -> Iterator[tuple[int | None, str]]:
        """(line number or None, line) for each line; ``\\r``-redrawn bars keep their
        last frame, so a tqdm line reads as what the terminal showed."""
        # Only "\n" ends a line, as in the log view: splitlines() would also count every
        # "\r" frame of a progress bar, and the numbers would drift from the file's.
        for i, raw in enumerate(self.text.removesuffix("\n").split("\n")):
            # A trailing "\r" (CRLF, or a bar's last redraw) hides nothing.
            line = raw.rstrip("\r").rsplit("\r", 1)[-1] if "\r" in raw else raw
            yield (self.first_line + i if self.first_line is not None else None), line

    def evidence(self, line_no: int | None, text: str) -> Evidence:
        return Evidence(self.name, line_no, text.strip()[:MAX_EVIDENCE_CHARS])


@dataclass(frozen=True)
class RunFacts:
    """Everything the classifier may look at; all of it already read by the caller."""

    state: str  # a JobState value: "FAILED", "TIMEOUT", "CANCELLED", "COMPLETED", ...
    raw_state: str = ""  # the scheduler's own words: "CANCELLED by 0"
    exit_code: int | None = None
    reason: str = ""  # the scheduler's reason field
    run_json: Mapping[str, Any] | None = None
    out: LogTail | None = None
    err: LogTail | None = None
    entry: str = "trainer"  # or "script"
    script: str = ""  # a script run's script, to find the frame in the user's own code
    nodes: int = 1
    world_size: int = 1  # the ranks the spec asked for
    hosts: tuple[str, ...] = ()  # the hosts whose ranks reported (run.json, ranks.jsonl)
    checkpoint: bool | None = None  # a checkpoint exists; None: not known
    requeue: bool = False  # the spec asked for requeue on preemption and time limit
    python: str = "python3"
    dataset: str = ""
    data_root: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: What the NCCL flight recorder's dumps say, where the run left any (read by the facade).
    flight: FlightReport | None = None
    #: The run's ``snapshot.json`` (a script run in snapshot mode): what the snapshot left out.
    snapshot: Mapping[str, Any] | None = None
    #: Bytes free on the runs root's filesystem when the facts were read, and that root;
    #: None where not read (a full disk can keep the job's own last line out of its logs).
    runs_root_free: int | None = None
    runs_root: str = ""

    def logs(self) -> tuple[LogTail, ...]:
        """The tails to search, ``.err`` first: tracebacks land there."""
        return tuple(t for t in (self.err, self.out) if t is not None)
