"""Take every rank's Python stack from a running job, and save it in the run directory.

Each rank registered a faulthandler dump on a real-time signal when it started
(:func:`ddp_tui.jobfiles.register_stack_dump`), leaving ``stacks/live/<job>-<host>-<pid>.txt``
with a JSON header. Taking the stacks (docs/stacks.md):

1. list the latest attempt's registrations (``stacks/live/<job id>-*``) and read their headers;
2. per node, one command beside the job (:meth:`Scheduler.node_argv`: ``srun --jobid --overlap
   --nodelist=HOST`` on Slurm, the command itself on the local scheduler) runs
   :data:`NODE_SCRIPT`: for each pid it checks that the process is alive *and* holds its own
   dump file open at the recorded fd (an unregistered process would be killed by the signal),
   then runs ``py-spy dump`` where py-spy is on the node's PATH, else signals it and waits
   until its file stops growing. The dumps come back on the command's stdout, read on the node
   itself (a login node reading the file over NFS may see stale sizes);
3. parse, group and save ``stacks/<UTC time>.json`` and ``.txt``.

Every value reaches the shell as a positional argument (``"$1"``), never inside the script.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ddp_tui.diagnosis.fork_hang import fork_hang_cause, python_of
from ddp_tui.diagnosis.stacks import (
    FAULTHANDLER,
    OK,
    PY_SPY,
    ProcessStack,
    StackGroup,
    group_stacks,
    parse_process,
    stacks_text,
)
from ddp_tui.diagnosis.stuck import (
    RankProgress,
    StuckRank,
    progress_from_heartbeats,
    progress_from_journal,
    stuck_ranks,
    stuck_summary,
)
from ddp_tui.errors import DdpTuiError
from ddp_tui.jobfiles import HEARTBEAT_DIR, STACKS_DIR, STACKS_LIVE_DIR, json_objects
from ddp_tui.remote.backends.executor import Batch, Executor, ExecutorError, FileRead
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.observe.diagnosing import heartbeats_of
from ddp_tui.remote.store.runs import RunRef
from ddp_tui.scriptrun.observe import OBSERVE_DIR
from ddp_tui.scriptrun.observe.journal import journal_name

#: ``--py-spy``: ``auto`` uses py-spy where the node has it (falling back to the signal for a
#: process it cannot read), ``never`` always signals.
PY_SPY_MODES = ("auto", "never")
#: The whole call's default deadline, seconds (the done-when: well within 10 s).
DEFAULT_TIMEOUT_SEC = 8.0
_HEADER_BYTES = 8192
_JOURNAL_TAIL = 16384
_TICK_SEC = 0.05  # how often the node script looks at the dump files' sizes

#: Run on each node as ``sh -c NODE_SCRIPT ddp-tui-stacks NONCE MODE TICKS [PID FD PATH SIG]...``.
#: Per process it prints ``@@NONCE PID STATUS HOW``, the dump, then ``@@NONCE end``.
NODE_SCRIPT = r"""
nonce=$1 mode=$2 ticks=$3
shift 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddp-tui-stacks.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
spy=
if [ "$mode" = auto ] && command -v py-spy >/dev/null 2>&1; then spy=1; fi
size() { wc -c < "$1" 2>/dev/null | tr -d ' ' || echo 0; }
check() {
  while [ $# -ge 4 ]; do
    if [ ! -d "/proc/$1" ]; then echo gone > "$tmp/st.$1"
    elif [ "$(readlink "/proc/$1/fd/$2" 2>/dev/null)" != "$3" ]; then
      echo unregistered > "$tmp/st.$1"
    elif [ -n "$spy" ]; then
      ( { py-spy dump --native --full-filenames --pid "$1" > "$tmp/spy.$1" 2>&1 ||
          py-spy dump --full-filenames --pid "$1" > "$tmp/spy.$1" 2>&1; } &&
        echo ok > "$tmp/spyok.$1" ) &
    fi
    shift 4
  done
  wait
}
poke() {
  while [ $# -ge 4 ]; do
    if [ ! -e "$tmp/st.$1" ] && [ ! -e "$tmp/spyok.$1" ]; then
      size "$3" > "$tmp/start.$1"
      if kill "-$4" "$1" 2>/dev/null; then echo signalled > "$tmp/st.$1"
      else echo gone > "$tmp/st.$1"; fi
    fi
    shift 4
  done
}
settled() {
  rc=0
  while [ $# -ge 4 ]; do
    if [ "$(cat "$tmp/st.$1" 2>/dev/null)" = signalled ]; then
      now=$(size "$3"); start=$(cat "$tmp/start.$1")
      last=$(cat "$tmp/last.$1" 2>/dev/null || echo -1)
      echo "$now" > "$tmp/last.$1"
      if [ "$now" -le "$start" ] || [ "$now" != "$last" ]; then rc=1; fi
    fi
    shift 4
  done
  return $rc
}
emit() {
  while [ $# -ge 4 ]; do
    st=$(cat "$tmp/st.$1" 2>/dev/null || echo failed)
    if [ -e "$tmp/spyok.$1" ]; then
      printf '@@%s %s ok py-spy\n' "$nonce" "$1"; cat "$tmp/spy.$1"
    elif [ "$st" = signalled ]; then
      start=$(cat "$tmp/start.$1"); end=$(size "$3")
      if [ "$end" -gt "$start" ]; then
        printf '@@%s %s ok faulthandler\n' "$nonce" "$1"
        tail -c +$((start + 1)) "$3" | head -c $((end - start))
      else
        printf '@@%s %s silent faulthandler\n' "$nonce" "$1"
      fi
    else
      printf '@@%s %s %s -\n' "$nonce" "$1" "$st"
      [ -e "$tmp/spy.$1" ] && cat "$tmp/spy.$1"
    fi
    printf '\n@@%s end\n' "$nonce"
    shift 4
  done
}
check "$@"
poke "$@"
n=0
while [ "$n" -lt "$ticks" ]; do
  sleep 0.05
  n=$((n + 1))
  if settled "$@"; then break; fi
done
emit "$@"
"""

_NO_STACK_WORDS = {
    "gone": "the process has ended",
    "unregistered": "the pid is no longer the registered process (never signalled)",
    "silent": "signalled, but it wrote no stack in time (stopped, or blocking the signal)",
    "failed": "the node command failed",
}


class StacksUnavailable(DdpTuiError):
    """The stacks cannot be taken: the run is not running, or none of its ranks registered."""

    title = "Stacks"


@dataclass(frozen=True)
class Registration:
    """One process's header in ``stacks/live/`` (see ``jobfiles.register_stack_dump``)."""

    name: str
    header: Mapping[str, Any]

    @property
    def pid(self) -> int:
        return int(self.header["pid"])

    @property
    def host(self) -> str:
        return str(self.header.get("host") or "")

    @property
    def rank(self) -> int | None:
        rank = self.header.get("rank")
        return rank if isinstance(rank, int) and not isinstance(rank, bool) else None

    @property
    def time(self) -> float:
        t = self.header.get("time")
        return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else 0.0

    def args(self) -> list[str]:
        """PID FD PATH SIG for the node script."""
        h = self.header
        return [str(int(h["pid"])), str(int(h["fd"])), str(h["path"]), str(int(h["signal"]))]


def registration_of(name: str, data: bytes) -> Registration | None:
    """A registration from its file's first line; None for anything else (damaged, a file
    from a later version with fields of other types)."""
    first = data.split(b"\n", 1)[0].decode("utf-8", "replace")
    try:
        header = json.loads(first)
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    for key in ("pid", "fd", "signal"):
        value = header.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None
    if not isinstance(header.get("path"), str) or not header["path"].startswith("/"):
        return None
    return Registration(name, header)


def latest_registrations(regs: Sequence[Registration]) -> list[Registration]:
    """The newest registration of each rank (a requeued Slurm job keeps its id, so its
    earlier attempt's files share the prefix); processes without a rank all stay."""
    newest: dict[int, Registration] = {}
    rest: list[Registration] = []
    for r in regs:
        if r.rank is None:
            rest.append(r)
        elif r.rank not in newest or r.time > newest[r.rank].time:
            newest[r.rank] = r
    return sorted(newest.values(), key=lambda r: r.rank or 0) + rest


def parse_node_output(nonce: str, stdout: str, regs: Sequence[Registration]) -> list[ProcessStack]:
    """The node script's answer: one :class:`ProcessStack` per registration (a pid the
    answer does not name failed)."""
    blocks: dict[int, tuple[str, str, list[str]]] = {}
    current: list[str] | None = None
    mark = f"@@{nonce} "
    for line in stdout.splitlines():
        if line.startswith(mark):
            words = line[len(mark) :].split()
            if words == ["end"]:
                current = None
            elif len(words) == 3 and words[0].isdigit():
                current = []
                blocks[int(words[0])] = (words[1], words[2], current)
            continue
        if current is not None:
            current.append(line)
    out = []
    for r in regs:
        status, how, lines = blocks.get(r.pid, ("failed", "-", []))
        text = "\n".join(lines).strip("\n")
        how = PY_SPY if how == PY_SPY else FAULTHANDLER
        detail = "" if status == OK else _NO_STACK_WORDS.get(status, status)
        out.append(parse_process(r.header, status, how, text + "\n" if text else "", detail))
    return out


@dataclass(frozen=True)
class StacksTaken:
    """One taking of every rank's stack."""

    run_id: str
    job_id: str
    taken_at: str  # ISO 8601 UTC
    seconds: float  # how long the taking took
    processes: tuple[ProcessStack, ...]
    stuck: tuple[StuckRank, ...] = ()
    saved: tuple[str, ...] = ()  # the files written
    notes: tuple[str, ...] = field(default=())
    cause: str = ""  # a likely cause the stacks show (diagnosis/fork_hang.py), or ""

    @property
    def groups(self) -> list[StackGroup]:
        return group_stacks(self.processes)

    @property
    def stuck_summary(self) -> str:
        return stuck_summary(self.stuck)

    def text(self) -> str:
        """The human copy (``stacks/<time>.txt``): the groups, the stuck-ranks table, then
        every process's stack."""
        head = [f"job {self.job_id}, taken in {self.seconds:.2f} s"]
        head += [f"note: {n}" for n in self.notes]
        head += [self.cause] if self.cause else []
        table = ["", "which ranks are stuck:"] + [f"  {r.summary}" for r in self.stuck]
        return stacks_text(self.processes, taken_at=self.taken_at, head=head, after=table)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "taken_at": self.taken_at,
            "seconds": round(self.seconds, 3),
            "groups": [
                {
                    "ranks": g.ranks_label,
                    "summary": g.summary,
                    "frames": [f.to_dict() for f in g.frames],
                }
                for g in self.groups
            ],
            "stuck": [r.to_dict() for r in self.stuck],
            "stuck_summary": self.stuck_summary,
            "cause": self.cause,
            "processes": [p.to_dict() for p in self.processes],
            "saved": list(self.saved),
            "notes": list(self.notes),
        }


def _stamp(now: float) -> tuple[str, str]:
    """(ISO time, file stem ``20260102T030405.678Z``) of ``now``."""
    t = datetime.fromtimestamp(now, timezone.utc)
    iso = t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return iso, t.strftime("%Y%m%dT%H%M%S.") + f"{t.microsecond // 1000:03d}Z"


def take_stacks(
    executor: Executor,
    scheduler: Scheduler,
    ref: RunRef,
    job_id: str | None,
    *,
    timeout: float = DEFAULT_TIMEOUT_SEC,
    py_spy: str = "auto",
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> StacksTaken:
    """Take, parse and save the stacks of every registered rank of running job ``job_id``.

    Raises :class:`StacksUnavailable` when the job is not running or no rank registered."""
    if py_spy not in PY_SPY_MODES:
        raise StacksUnavailable(
            f"--py-spy must be one of {', '.join(PY_SPY_MODES)}, not {py_spy!r}"
        )
    began = monotonic()
    if not job_id:
        raise StacksUnavailable(f"run {ref.run_id} was never submitted: no job to take stacks of")
    status = scheduler.poll([job_id]).get(job_id)
    if status is None or status.state is not JobState.RUNNING:
        state = status.state.value if status is not None else "unknown to the scheduler"
        raise StacksUnavailable(
            f"run {ref.run_id}: job {job_id} is {state}; stacks are taken from a running job"
        )
    regs = read_registrations(executor, ref, job_id)
    if not regs:
        raise StacksUnavailable(
            f"run {ref.run_id}: no rank of job {job_id} registered for stack dumps yet "
            f"(none in {ref.file(STACKS_LIVE_DIR)}): a rank registers as it starts; a script "
            "run with --observe off never does"
        )
    processes, notes = dump_stacks(
        executor,
        lambda host, argv: scheduler.node_argv(job_id, host, argv),
        regs,
        deadline=began + timeout,
        py_spy=py_spy,
        monotonic=monotonic,
    )
    now = clock()
    progress = _progress(executor, ref, regs)
    started = {r.rank: r.time for r in regs if r.rank is not None}
    stuck = tuple(stuck_ranks(progress, processes, now=now, started=started))
    headers = {r.pid: r.header for r in regs}
    cause = fork_hang_cause(
        processes,
        python={p.pid: python_of(headers.get(p.pid, {}), p.text) for p in processes},
        quiet={r.rank: r.quiet_sec for r in stuck},
    )
    iso, stem = _stamp(now)
    taken = StacksTaken(
        run_id=ref.run_id,
        job_id=job_id,
        taken_at=iso,
        seconds=monotonic() - began,
        processes=tuple(processes),
        stuck=stuck,
        notes=tuple(notes),
        cause=cause,
    )
    return _save(executor, ref, stem, taken)


def read_registrations(executor: Executor, ref: RunRef, job_id: str) -> list[Registration]:
    """The newest registration of each rank of job ``job_id`` (its key: ``1234_5`` for an
    array task) in the run's ``stacks/live/``; [] where there is none."""
    live = ref.file(STACKS_LIVE_DIR)
    try:
        names = sorted(n for n in executor.listdir(live) if n.startswith(f"{job_id}-"))
    except (OSError, ExecutorError):
        return []
    reads = [FileRead(f"{live}/{n}", 0, _HEADER_BYTES) for n in names]
    result = executor.run_batch(Batch(reads=reads))
    regs = [registration_of(n, r.data) for n, r in zip(names, result.reads, strict=True)]
    return latest_registrations([r for r in regs if r is not None])


def dump_stacks(
    executor: Executor,
    node_argv: Callable[[str, list[str]], list[str]],
    regs: Sequence[Registration],
    *,
    deadline: float,
    py_spy: str = "auto",
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[list[ProcessStack], list[str]]:
    """Each registered process's stack, and notes on what failed. One command per host
    (``node_argv(host, argv)``: the command that runs ``argv`` beside the job there), in
    turn; each waits at most what is left before ``deadline`` (``monotonic`` seconds)."""
    by_host: dict[str, list[Registration]] = {}
    for r in regs:
        by_host.setdefault(r.host, []).append(r)
    out: list[ProcessStack] = []
    notes: list[str] = []
    for host, members in by_host.items():
        left = deadline - monotonic()
        nonce = secrets.token_hex(6)
        ticks = max(2, int(min(left - 1.0, 5.0) / _TICK_SEC))
        argv = ["sh", "-c", NODE_SCRIPT, "ddp-tui-stacks", nonce, py_spy, str(ticks)]
        for r in members:
            argv += r.args()
        try:
            res = executor.run(node_argv(host, argv), timeout=max(left, 2.0) + 2.0)
            stdout = res.stdout
            if not res.ok:
                notes.append(f"on {host}: exit {res.returncode}: {res.stderr.strip()[-300:]}")
        except (ExecutorError, SchedulerError) as exc:
            notes.append(f"on {host}: {exc}")
            stdout = ""
        out += parse_node_output(nonce, stdout, members)
    return out, notes


def _progress(executor: Executor, ref: RunRef, regs: Sequence[Registration]) -> list[RankProgress]:
    """Each registered rank's last progress: its heartbeat (the trainer), else its
    observation journal's last step or epoch (a user's script)."""
    ranked = [r for r in regs if r.rank is not None]
    beats = [FileRead(ref.file(f"{HEARTBEAT_DIR}/rank-{r.rank}.json")) for r in ranked]
    journals = [
        FileRead(
            ref.file(
                f"{OBSERVE_DIR}/"
                + journal_name(
                    str(r.header.get("slurm_job_id") or ""),
                    str(r.header.get("hostname") or r.host),
                    r.pid,
                )
            ),
            -_JOURNAL_TAIL,
        )
        for r in ranked
    ]
    try:
        result = executor.run_batch(Batch(reads=beats + journals))
    except ExecutorError:
        return []
    heartbeats = heartbeats_of(result.reads[: len(beats)])
    if heartbeats:
        return progress_from_heartbeats(heartbeats)
    progress = []
    for r, res in zip(ranked, result.reads[len(beats) :], strict=True):
        lines = res.data.decode("utf-8", "replace").splitlines()
        assert r.rank is not None
        progress.append(progress_from_journal(json_objects(lines), r.rank, r.host))
    return progress


def _save(executor: Executor, ref: RunRef, stem: str, taken: StacksTaken) -> StacksTaken:
    """``stacks/<stem>.json`` and ``.txt``; a failed write is a note, never a lost answer."""
    folder = ref.file(STACKS_DIR)
    paths = (f"{folder}/{stem}.json", f"{folder}/{stem}.txt")
    try:
        executor.makedirs(folder)
        saved = StacksTaken(**{**taken.__dict__, "saved": paths})
        executor.write_atomic(paths[0], (json.dumps(saved.to_dict(), indent=1) + "\n").encode())
        executor.write_atomic(paths[1], saved.text().encode())
        return saved
    except (OSError, ExecutorError) as exc:
        return StacksTaken(**{**taken.__dict__, "notes": (*taken.notes, f"not saved: {exc}")})


__all__ = [
    "DEFAULT_TIMEOUT_SEC",
    "NODE_SCRIPT",
    "PY_SPY_MODES",
    "Registration",
    "StacksTaken",
    "StacksUnavailable",
    "dump_stacks",
    "latest_registrations",
    "parse_node_output",
    "read_registrations",
    "registration_of",
    "take_stacks",
]


@dataclass(frozen=True)
class SavedStacks:
    """The newest taking saved in a run (what a stalled run's ``why`` recalls)."""

    path: str
    taken_at: str
    job_id: str
    stuck_summary: str  # "" when no rank was behind
    cause: str = ""  # a likely cause the stacks showed, or ""


def last_saved(executor: Executor, ref: RunRef) -> SavedStacks | None:
    """The newest ``stacks/<time>.json`` of the run (names sort by time); None when there is
    none, or it cannot be read as one."""
    folder = ref.file(STACKS_DIR)
    try:
        names = sorted(n for n in executor.listdir(folder) if n.endswith(".json"))
    except (OSError, ExecutorError):
        return None
    if not names:
        return None
    path = f"{folder}/{names[-1]}"
    try:
        doc = json.loads(executor.read_range(path).decode("utf-8", "replace"))
    except (OSError, ExecutorError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return SavedStacks(
        path=path,
        taken_at=str(doc.get("taken_at", "")),
        job_id=str(doc.get("job_id", "")),
        stuck_summary=str(doc.get("stuck_summary") or ""),
        cause=str(doc.get("cause") or ""),
    )


#: How long a stall's cancel waits for the stacks it takes first.
BEFORE_CANCEL_TIMEOUT_SEC = 5.0


def stacks_before_cancel(executor: Executor, scheduler: Scheduler, ref: RunRef, job_id: str) -> str:
    """Take and save every rank's stack of a stalled job about to be cancelled (the profile's
    ``cancel_stalled``), since the cancel ends the processes that could tell where they
    waited; returns the stuck-ranks summary for the stall note, "" where none could be taken
    (a script run with ``--observe off``, a node out of reach): the cancel goes on anyway.
    A likely cause the stacks show follows the summary."""
    try:
        taken = take_stacks(executor, scheduler, ref, job_id, timeout=BEFORE_CANCEL_TIMEOUT_SEC)
    except (DdpTuiError, ExecutorError, SchedulerError):
        return ""
    return "; ".join(text for text in (taken.stuck_summary, taken.cause) if text)
