"""PyTorch's NCCL flight recorder: its per-rank dumps, read safely, and the hang they show.

With the recorder on (the job script turns it on for NCCL jobs; docs/flight-recorder.md),
every rank keeps its last collectives in a ring buffer. When a collective times out, the
NCCL watchdog writes that buffer to ``nccl_trace/<job id>/rank_<global rank>`` and the
other ranks are asked to do the same. torch writes a pickle of plain containers (the JSON
variant of its dump API is read too):

- ``version`` ("2.10" in torch 2.15), ``pg_config`` (group name -> ``name``, ``desc``,
  ``ranks``: the global ranks as the text ``"[0, 1]"``), ``pg_status``;
- ``entries``, oldest first, one per collective or point-to-point call: ``record_id``,
  ``process_group`` (name, desc), ``collective_seq_id`` / ``p2p_seq_id`` (per group),
  ``profiling_name`` (``nccl:all_reduce``, ``nccl:send 0->1``, ``nccl:recv 1<-0``),
  ``input_sizes``/``output_sizes``/``*_dtypes``, ``state`` (``scheduled``, ``started``,
  ``completed``), ``retired``, ``is_p2p``, ``timeout_ms``, ``time_created_ns``, and
  ``frames`` (the Python stack at the call, innermost first: ``name``, ``filename``,
  ``line``).

A pickle can name any callable, and loading one runs it: these dumps are loaded by an
unpickler that builds only the plain containers and scalars the opcodes themselves make,
and refuses every class or function a file names (:class:`FlightDumpError`). The one
exception is torch's own list tags (``torch.jit._pickle.build_intlist`` and its kin, which
older writers emitted), mapped to identity functions here: torch is never imported.

:func:`analyse` reads a set of ranks' dumps and names, per process group, the first
collective that did not complete, the ranks that never entered it (their last entry on
that group is older, or they left no dump), and where each of them last was.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ddp_tui.diagnosis.text import rank_ranges
from ddp_tui.errors import DdpTuiError

#: Where the job script points the recorder, under the run directory: one directory per
#: job attempt (a retry's dumps never mix with its predecessor's), one file per rank.
DUMP_DIR: Final = "nccl_trace"
DUMP_PREFIX: Final = "rank_"
#: How many of a rank's last entries a hang keeps for each rank that never entered it.
LAST_ENTRIES: Final = 3
#: How many ranks a sentence names before it only counts the rest.
NAMED_RANKS: Final = 4

_DONE_STATE: Final = "completed"


def dump_path(job_id: str, rank: int) -> str:
    """``nccl_trace/<job id>/rank_<rank>``: a rank's dump, relative to the run directory."""
    return f"{DUMP_DIR}/{job_id}/{DUMP_PREFIX}{rank}"


class FlightDumpError(DdpTuiError):
    """A flight recorder dump that cannot be read: not a dump, cut short, or a pickle that
    names a class or function (which is never loaded)."""

    title = "Flight recorder dump"


# ----------------------------------------------------------------------------- loading


def _same(value: Any, *_: Any) -> Any:
    return value


#: The only globals a dump may name: torch's list tags, which return their argument.
_ALLOWED_GLOBALS: Final[Mapping[tuple[str, str], Callable[..., Any]]] = {
    ("torch.jit._pickle", name): _same
    for name in (
        "build_intlist",
        "build_doublelist",
        "build_boollist",
        "build_tensorlist",
        "restore_type_tag",
    )
}


class _PlainUnpickler(pickle.Unpickler):
    """Builds what the pickle opcodes build (dicts, lists, tuples, strings, numbers, None)
    and nothing a file names, so loading a hostile file runs none of its code."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(io.BytesIO(data))
        self._name = name

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED_GLOBALS.get((module, name))
        if found is None:
            raise FlightDumpError(
                f"{self._name}: refused: the pickle names {module}.{name}; a flight recorder "
                "dump holds only plain values (dicts, lists, strings, numbers), and ddp-tui "
                "loads nothing else"
            )
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise FlightDumpError(
            f"{self._name}: refused: the pickle refers to an external object; a flight "
            "recorder dump holds only plain values"
        )


def _decode(data: bytes, name: str) -> Any:
    if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
        try:
            return json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise FlightDumpError(f"{name}: not a flight recorder dump: bad JSON ({exc})") from exc
    if not data.startswith(b"\x80"):
        raise FlightDumpError(f"{name}: not a flight recorder dump (neither a pickle nor JSON)")
    try:
        return _PlainUnpickler(data, name).load()
    except FlightDumpError:
        raise
    except EOFError as exc:
        raise FlightDumpError(f"{name}: the dump is cut short (written only in part)") from exc
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, IndexError) as exc:
        if "truncated" in str(exc):
            raise FlightDumpError(f"{name}: the dump is cut short (written only in part)") from exc
        raise FlightDumpError(f"{name}: not a readable pickle ({exc})") from exc
    except (MemoryError, RecursionError) as exc:
        raise FlightDumpError(f"{name}: the pickle is too deep or too large to load") from exc


@dataclass(frozen=True)
class Frame:
    """One frame of the Python stack at a collective's call."""

    name: str
    filename: str
    line: int

    @property
    def label(self) -> str:
        """``train_step at train.py:88``."""
        base = self.filename.rsplit("/", 1)[-1] or self.filename
        return f"{self.name} at {base}:{self.line}"

    @property
    def in_library(self) -> bool:
        """torch itself, an installed package, Python's import machinery, or no file at
        all: not the user's code (``python -c`` code, ``<string>``, is)."""
        f = self.filename
        return (
            not f
            or f.startswith("<frozen")
            or "/torch/" in f
            or "/site-packages/" in f
            or "/dist-packages/" in f
        )


@dataclass(frozen=True)
class Entry:
    """One collective or point-to-point call as a rank recorded it."""

    record_id: int
    group: str  # the process group's name ("0" is the default group)
    group_desc: str  # "default_pg", or what new_group(group_desc=...) said
    collective_seq: int
    p2p_seq: int
    profiling_name: str  # "nccl:all_reduce", "nccl:send 0->1"
    is_p2p: bool
    state: str  # "scheduled", "started", "completed"
    retired: bool = False
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    time_created_ns: int | None = None
    timeout_ms: int | None = None
    frames: tuple[Frame, ...] = ()

    @property
    def op(self) -> str:
        """``all_reduce`` of ``nccl:all_reduce``, ``send`` of ``nccl:send 0->1``."""
        name = self.profiling_name.rpartition(":")[2]
        return name.split(" ", 1)[0] or self.profiling_name

    @property
    def call(self) -> str:
        """The op with its peers for a point-to-point call: ``send 0->1``."""
        return self.profiling_name.rpartition(":")[2] or self.profiling_name

    @property
    def seq(self) -> int:
        return self.p2p_seq if self.is_p2p else self.collective_seq

    @property
    def done(self) -> bool:
        # NCCL marks a finished call "completed"; gloo leaves "scheduled" and retires it.
        return self.state == _DONE_STATE or self.retired

    @property
    def state_word(self) -> str:
        return _DONE_STATE if self.done else self.state or "unknown"

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code (else the innermost at all)."""
        for frame in self.frames:
            if not frame.in_library:
                return frame
        return self.frames[0] if self.frames else None

    @property
    def shape(self) -> str:
        """``[3, 4] Float``: what it moves, for telling a mismatch."""
        sizes = ", ".join(_list(s) for s in self.input_sizes) or "no tensors"
        dtypes = "/".join(dict.fromkeys(self.input_dtypes))
        return f"{sizes} {dtypes}".strip()

    def label(self, *, group: bool = False) -> str:
        """``all_reduce #411 completed, in train_step at train.py:88``."""
        text = f"{self.call} #{self.seq}"
        if self.is_p2p:
            text = f"{self.call} (p2p #{self.seq})"
        if group:
            text += f" on {group_label(self.group, self.group_desc)}"
        text += f" {self.state_word}"
        frame = self.user_frame
        return f"{text}, in {frame.label}" if frame is not None else text

    def peers(self) -> tuple[int, int] | None:
        """(source, destination) group ranks of a send or recv; None otherwise."""
        meta = self.call.partition(" ")[2]
        m = re.fullmatch(r"(\d+)->(\d+)", meta)
        if m:
            return int(m.group(1)), int(m.group(2))
        m = re.fullmatch(r"(\d+)<-(\d+)", meta)
        if m:
            return int(m.group(2)), int(m.group(1))
        return None


def _list(sizes: Iterable[int]) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


def group_label(name: str, desc: str) -> str:
    """``group 0 (default_pg)``."""
    if desc and desc not in ("undefined", name):
        return f"group {name} ({desc})"
    return f"group {name}" if name else "the default group"


@dataclass(frozen=True)
class Group:
    """A process group as a dump's ``pg_config`` describes it."""

    name: str
    desc: str
    ranks: tuple[int, ...]  # global ranks; () where the dump does not say


@dataclass(frozen=True)
class Dump:
    """One rank's dump."""

    rank: int
    name: str  # where it was read, for evidence: "nccl_trace/12/rank_3"
    version: str
    groups: Mapping[str, Group]
    entries: tuple[Entry, ...]  # oldest first
    skipped: int = 0  # entries too damaged to use


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        return int(value)
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _sizes(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list | tuple):
        return ()
    out = []
    for dims in value:
        if isinstance(dims, list | tuple):
            out.append(tuple(d for d in (_int(x) for x in dims) if d is not None))
    return tuple(out)


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list | tuple) else ()


def _frames(value: Any) -> tuple[Frame, ...]:
    if not isinstance(value, list | tuple):
        return ()
    out = []
    for f in value:
        if isinstance(f, Mapping):
            out.append(
                Frame(_text(f.get("name")), _text(f.get("filename")), _int(f.get("line")) or 0)
            )
    return tuple(out)


def _entry(doc: Any) -> Entry | None:
    """The entry in ``doc``, or None where a field it cannot do without is missing."""
    if not isinstance(doc, Mapping):
        return None
    group = doc.get("process_group")
    name = _text(doc.get("profiling_name"))
    record, coll, p2p = (_int(doc.get(k)) for k in ("record_id", "collective_seq_id", "p2p_seq_id"))
    if not isinstance(group, list | tuple) or len(group) != 2 or not name:
        return None
    if record is None or coll is None or p2p is None:
        return None
    is_p2p = doc.get("is_p2p")
    op = name.rpartition(":")[2].split(" ", 1)[0]
    return Entry(
        record_id=record,
        group=str(group[0]),
        group_desc=str(group[1]),
        collective_seq=coll,
        p2p_seq=p2p,
        profiling_name=name,
        # Older dumps have no is_p2p: a send or recv is one.
        is_p2p=is_p2p if isinstance(is_p2p, bool) else op in ("send", "recv"),
        state=_text(doc.get("state")),
        retired=doc.get("retired") is True,
        input_sizes=_sizes(doc.get("input_sizes")),
        output_sizes=_sizes(doc.get("output_sizes")),
        input_dtypes=_texts(doc.get("input_dtypes")),
        output_dtypes=_texts(doc.get("output_dtypes")),
        time_created_ns=_int(doc.get("time_created_ns")),
        timeout_ms=_int(doc.get("timeout_ms")),
        frames=_frames(doc.get("frames")),
    )


def _ranks(value: Any) -> tuple[int, ...]:
    """``"[0, 1, 2]"`` (how torch writes them) or a list: the ranks; never ``eval``."""
    if isinstance(value, str):
        if not re.fullmatch(r"\s*\[[\d,\s]*\]\s*", value):
            return ()
        return tuple(int(x) for x in re.findall(r"\d+", value))
    if isinstance(value, list | tuple):
        return tuple(r for r in (_int(x) for x in value) if r is not None)
    return ()


def _groups(value: Any) -> dict[str, Group]:
    out: dict[str, Group] = {}
    if not isinstance(value, Mapping):
        return out
    for key, doc in value.items():
        if not isinstance(doc, Mapping):
            continue
        name = _text(doc.get("name")) or str(key)
        out[name] = Group(name, _text(doc.get("desc")), _ranks(doc.get("ranks")))
    return out


def dump_of(doc: Any, *, rank: int, name: str) -> Dump:
    """The dump in a decoded document (from the pickle or the JSON)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("entries"), list | tuple):
        raise FlightDumpError(f"{name}: not a flight recorder dump (no list of entries)")
    raw = doc["entries"]
    entries = tuple(e for e in (_entry(d) for d in raw) if e is not None)
    return Dump(
        rank=rank,
        name=name,
        version=str(doc.get("version", "")),
        groups=_groups(doc.get("pg_config")),
        entries=entries,
        skipped=len(raw) - len(entries),
    )


def load_dump(data: bytes, *, rank: int, name: str) -> Dump:
    """Rank ``rank``'s dump from its bytes (pickle or JSON); ``name`` is where it was read,
    for messages and evidence. Raises :class:`FlightDumpError` for anything else, and for
    a pickle that names any class or function."""
    return dump_of(_decode(data, name), rank=rank, name=name)


# ----------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Absent:
    """A rank that never entered the stuck call, and where it last was."""

    rank: int
    last: tuple[Entry, ...]  # its last entries on any group, newest last; () if none


@dataclass(frozen=True)
class Hang:
    """The first call of one process group that did not complete, and who is missing."""

    group: Group
    entry: Entry  # as the lowest entering rank recorded it
    entered: tuple[int, ...]
    absent: tuple[Absent, ...]  # dumped, but never entered it
    no_dump: tuple[int, ...]  # members whose dump is missing or could not be read
    #: Entering ranks whose call differs from ``entry`` (another op, other sizes).
    mismatched: tuple[tuple[int, Entry], ...] = ()

    @property
    def what(self) -> str:
        """``NCCL all_reduce #412 on group 0 (default_pg)``."""
        e = self.entry
        call = f"{e.call} (p2p #{e.seq})" if e.is_p2p else f"{e.op} #{e.seq}"
        return f"NCCL {call} on {group_label(self.group.name, self.group.desc)}"

    @property
    def sentence(self) -> str:
        """What the dumps say of this hang, in one sentence."""
        parts = []
        if self.absent:
            ranks = [a.rank for a in self.absent]
            who = f"{_ranks_word(len(ranks))} {rank_ranges(ranks)} never entered it"
            if len(self.absent) == 1:
                parts.append(f"{who} ({_last_words(self.absent[0], self.group.name)})")
            else:
                lasts = [
                    f"rank {a.rank}{' ' if a.last else ': '}{_last_words(a, self.group.name)}"
                    for a in self.absent[:NAMED_RANKS]
                ]
                if len(self.absent) > NAMED_RANKS:
                    lasts.append(f"{len(self.absent) - NAMED_RANKS} more")
                parts.append(f"{who} ({'; '.join(lasts)})")
        if self.mismatched:
            mine = f"rank {self.entered[0]} called {self.entry.op} with {self.entry.shape}"
            other = "; ".join(
                f"rank {r} called {e.op} with {e.shape}" for r, e in self.mismatched[:NAMED_RANKS]
            )
            parts.append(f"the ranks disagree on it: {mine}; {other}")
        if self.no_dump:
            parts.append(
                f"{_ranks_word(len(self.no_dump))} {rank_ranges(self.no_dump)} left no dump"
            )
        if not parts:
            parts.append(
                f"every rank entered it ({len(self.entered)} of them) and it still did not "
                "finish: the network or a GPU stalled, not the ranks' code"
            )
        return f"{self.what} did not complete: " + "; ".join(parts)

    @property
    def short(self) -> str:
        """For the Jobs reason column: ``rank 3 missed all_reduce #412``."""
        call = f"{self.entry.op} #{self.entry.seq}"
        if self.absent:
            ranks = rank_ranges([a.rank for a in self.absent])
            return f"{_ranks_word(len(self.absent))} {ranks} missed {call}"
        if self.mismatched:
            return f"mismatched {call}"
        return f"NCCL {call} hung"


def _ranks_word(n: int) -> str:
    return "rank" if n == 1 else "ranks"


def _last_words(absent: Absent, group: str) -> str:
    if not absent.last:
        return "its dump has no entries"
    last = absent.last[-1]
    return f"last: {last.label(group=last.group != group)}"


@dataclass(frozen=True)
class FlightReport:
    """What a set of ranks' dumps say: the hangs, the earliest first."""

    hangs: tuple[Hang, ...]
    dumps: Mapping[int, Dump] = field(default_factory=dict)
    unreadable: Mapping[int, str] = field(default_factory=dict)  # rank -> why
    world_size: int = 0
    not_read: tuple[int, ...] = ()  # ranks whose dumps were not looked for (a bound)


def _members(name: str, dumps: Mapping[int, Dump], world_size: int) -> tuple[int, ...]:
    for dump in dumps.values():
        group = dump.groups.get(name)
        if group is not None and group.ranks:
            return group.ranks
    if name in ("0", ""):  # the default group: every rank of the job
        return tuple(range(world_size))
    return tuple(sorted(r for r, d in dumps.items() if any(e.group == name for e in d.entries)))


def _group(name: str, desc: str, members: tuple[int, ...], dumps: Mapping[int, Dump]) -> Group:
    for dump in dumps.values():
        group = dump.groups.get(name)
        if group is not None and group.desc:
            return Group(name, group.desc, members)
    return Group(name, desc, members)


def _same_call(a: Entry, b: Entry) -> bool:
    return a.op == b.op and a.input_sizes == b.input_sizes and a.input_dtypes == b.input_dtypes


def _collective_hang(
    group: Group,
    dumps: Mapping[int, Dump],
    missing: Collection[int],
) -> Hang | None:
    mine = {
        r: [e for e in dumps[r].entries if e.group == group.name and not e.is_p2p]
        for r in group.ranks
        if r in dumps
    }
    pending = [e.seq for entries in mine.values() for e in entries if not e.done]
    if not pending:
        return None
    stuck = min(pending)
    entered: dict[int, Entry] = {}
    absent: list[Absent] = []
    for rank, entries in sorted(mine.items()):
        at = next((e for e in entries if e.seq == stuck), None)
        if at is not None:
            entered[rank] = at
        elif not entries or max(e.seq for e in entries) < stuck:
            absent.append(Absent(rank, dumps[rank].entries[-LAST_ENTRIES:]))
        # else: its buffer no longer holds the call, but it went past it
    first = min(entered)
    entry = entered[first]
    return Hang(
        group=group,
        entry=entry,
        entered=tuple(sorted(entered)),
        absent=tuple(absent),
        no_dump=tuple(r for r in group.ranks if r in missing),
        mismatched=tuple((r, e) for r, e in entered.items() if not _same_call(e, entry)),
    )


def _p2p_hang(group: Group, dumps: Mapping[int, Dump], missing: Collection[int]) -> Hang | None:
    members = sorted(group.ranks)
    for rank in members:
        if rank not in dumps:
            continue
        for e in dumps[rank].entries:
            if e.group != group.name or not e.is_p2p or e.done:
                continue
            ends = e.peers()
            if ends is None:
                continue
            src, dst = ends
            peer_local = dst if e.op == "send" else src
            if not 0 <= peer_local < len(members):
                continue
            peer = members[peer_local]
            want = "recv" if e.op == "send" else "send"
            if peer not in dumps:
                no_dump = (peer,) if peer in missing else ()
                return Hang(group, e, (rank,), (), no_dump)
            matched = any(
                p.group == group.name and p.op == want and p.peers() == ends and not p.done
                for p in dumps[peer].entries
            )
            absent = () if matched else (Absent(peer, dumps[peer].entries[-LAST_ENTRIES:]),)
            entered = (rank, peer) if matched else (rank,)
            return Hang(group, e, tuple(sorted(entered)), absent, ())
    return None


def analyse(
    dumps: Mapping[int, Dump],
    *,
    world_size: int,
    unreadable: Mapping[int, str] | None = None,
    looked_for: Collection[int] | None = None,
) -> FlightReport:
    """The hangs in the ranks' ``dumps`` (rank -> dump), the earliest first.

    ``looked_for``: the ranks whose dumps were looked for (default: every rank below
    ``world_size``); a member looked for that has no dump "left no dump", one not looked
    for is only counted as not read. ``unreadable``: rank -> why its dump could not be read.
    """
    bad = dict(unreadable or {})
    wanted = set(range(world_size) if looked_for is None else looked_for)
    names: dict[str, str] = {}
    for dump in dumps.values():
        for e in dump.entries:
            names.setdefault(e.group, e.group_desc)
    hangs: list[Hang] = []
    for name, desc in names.items():
        members = _members(name, dumps, world_size)
        missing = {r for r in members if r not in dumps and (r in wanted or r in bad)}
        group = _group(name, desc, members, dumps)
        for find in (_collective_hang, _p2p_hang):
            hang = find(group, dumps, missing)
            if hang is not None:
                hangs.append(hang)
    hangs.sort(key=lambda h: (_created(h.entry), h.group.name))
    not_read = tuple(r for r in range(world_size) if r not in wanted and r not in dumps)
    return FlightReport(tuple(hangs), dict(dumps), bad, world_size, not_read)


def _created(entry: Entry) -> float:
    return float(entry.time_created_ns) if entry.time_created_ns is not None else math.inf
