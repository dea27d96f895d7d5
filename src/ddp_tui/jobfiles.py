"""The run-directory files a job writes, shared by the trainer and a user script's wrapper.

``run.json`` (written whole and atomically, counting attempts), ``metrics.csv``'s columns and
cell format, ``requeue.request``, the trainer's per-rank ``heartbeats/rank-N.json``, where
the resource sampler (``ddp_tui.telemetry``) writes ``telemetry/node-K.jsonl``, and each rank's
signal-triggered stack dump (``stacks/live/``, :func:`register_stack_dump`); and the facts
both sides of the run directory must agree on: the names the trainer takes (``BUILTIN_MODELS``,
``BACKENDS``, ...), rank ranges (:func:`format_ranks`), Slurm host lists.
Standard library only: it is copied into every run as
``code/ddp_tui/jobfiles.py`` and imported there by ``ddp_tui.trainer`` and
``ddp_tui.scriptrun``, so that the two writers of one contract cannot drift apart
(docs/architecture.md, "The run directory").

A record that cannot be written (a full, read-only or over-quota disk) is fatal for the job:
the writers raise :class:`RunWriteError`, whose :meth:`~RunWriteError.message` is the one line
the job prints (:data:`WRITE_FAILED_PREFIX`, the path, the error, the free space) and the
diagnosis reads back; the process then exits with :data:`EXIT_WRITE_FAILED`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

RUN_JSON: Final = "run.json"
REQUEUE_FILE: Final = "requeue.request"
#: One ``rank-<N>.json`` per rank in here (:class:`Heartbeater`).
HEARTBEAT_DIR: Final = "heartbeats"
#: One ``node-<K>.jsonl`` per node in here (``ddp_tui.telemetry``): a file per node, because
#: appends from several hosts to one file on NFS are not atomic.
TELEMETRY_DIR: Final = "telemetry"
#: The sampler's default interval, seconds (the spec's ``telemetry_sec``).
TELEMETRY_DEFAULT_SEC: Final = 5
#: The exit code that asks for a requeue: the trainer's, and a script's (it reads it from
#: ``DDP_TUI_REQUEUE_EXIT_CODE``).
EXIT_REQUEUE: Final = 3
#: The exit code of a job process that could not write a run-directory record.
EXIT_WRITE_FAILED: Final = 4
#: How the one line about such a failure starts (:meth:`RunWriteError.message`).
WRITE_FAILED_PREFIX: Final = "[ddp-tui] cannot write "

#: ``metrics.csv``'s columns, in order; a writer may add its own after them.
METRICS_COLUMNS: Final = (
    "epoch",
    "train_loss",
    "train_acc",
    "val_loss",
    "val_acc",
    "val_mae",
    "val_rmse",
    "lr",
    "epoch_time_sec",
    "throughput_samples_per_sec",
    "data_load_time_sec",
    "compute_time_sec",
    "gpu_mem_peak_mib",
    "gpu_util_avg",
    "cpu_util_avg",
    "world_size",
    "mfu",
    # The step breakdown (docs/step-breakdown.md): data + compute + comm + other = epoch time.
    "comm_time_sec",
    "other_time_sec",
    # Steps beside epochs: the optimizer step at the end of the row's window. A script with no
    # epochs (an iteration loop) has one row per logged window, its ``epoch`` cell empty.
    "step",
    # Where the model's input has a sequence dimension: batch x sequence length, per second.
    "tokens_per_sec",
)
#: Rank 0's per-epoch, per-rank step times (docs/step-breakdown.md), one JSON line per epoch.
STEP_TIMES_FILE: Final = "step_times.jsonl"

# -- The names the trainer takes (``python -m ddp_tui.trainer``'s models, datasets and option
# choices), which a spec offers (ddp_tui.spec.vocabulary). Here because this is the one module
# both may import, so that the form never offers what the trainer refuses.

#: Models the trainer builds by name. Any other name is a torchvision classification model, or
#: ``pkg.module:function``.
BUILTIN_MODELS: Final = ("mlp", "simple_cnn")
BUILTIN_DATASETS: Final = (
    "synthetic",
    "mnist",
    "fashion_mnist",
    "cifar10",
    "cifar100",
    "imagefolder",
    "tabular",
)
#: Datasets the trainer reads from (or, with ``download``, downloads into) the data root: a job
#: without one fails at start.
DATASETS_NEEDING_ROOT: Final = tuple(d for d in BUILTIN_DATASETS if d != "synthetic")
#: The shape of a synthetic sample (C,H,W) when none is given.
SYNTHETIC_DEFAULT_SHAPE: Final = (1, 28, 28)
#: The synthetic task's noise, in units of its class patterns' std, when none is given: enough
#: that validation accuracy climbs over the default epochs instead of reaching 1.0 in the first.
SYNTHETIC_DEFAULT_NOISE: Final = 9.0
#: Where image folders' JPEGs are decoded: "auto" is the GPU on a CUDA device, else the CPU.
DECODE_MODES: Final = ("auto", "cpu", "gpu")
BACKENDS: Final = ("auto", "nccl", "gloo")
LR_SCALINGS: Final = ("none", "linear")
OPTIMIZERS: Final = ("sgd", "adamw")
SCHEDULES: Final = ("none", "step", "cosine")
#: "auto": bf16 autocast on a GPU that supports it, fp32 on the CPU (the trainer decides).
PRECISIONS: Final = ("auto", "off", "bf16", "fp16")


def utc_now() -> str:
    """ISO 8601 UTC time, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def csv_cell(value: Any) -> str:
    """One ``metrics.csv`` cell: empty for None, 10 significant digits for a float."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def row_position(row: Mapping[str, float | None]) -> float | None:
    """Where a parsed ``metrics.csv`` row lies on a plot's x axis: its epoch, or, for a step
    window of a script with no epochs, its step (None: neither, or not finite)."""
    for column in ("epoch", "step"):
        value = row.get(column)
        if value is not None:
            return value if value == value and abs(value) != float("inf") else None
    return None


def json_objects(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON objects among a ``.jsonl`` file's ``lines``; blank, broken and non-object
    lines are skipped (a writer killed mid-line must not stop its readers)."""
    out: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def byte_size(count: int) -> str:
    """``0 B``, ``512 B``, ``12.0 KiB``, ``3.4 GiB``: a size in the units ``df -h`` uses."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def free_space(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(bytes free to this user, filesystem size) of the filesystem holding ``path`` (or,
    where it does not exist, its nearest existing parent); None where it cannot be asked."""
    where = Path(path)
    for candidate in (where, *where.parents):
        try:
            st = os.statvfs(candidate)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return None


class RunWriteError(OSError):
    """A run-directory record could not be written: fatal for the job that writes it.

    An ``OSError`` (same ``errno``, ``strerror``, ``filename``), so that code which already
    goes past a failed write (heartbeats, the sampler) keeps doing so; ``free`` is the
    filesystem's (free, size) in bytes, asked when the write failed.
    """

    def __init__(self, path: str | os.PathLike[str], cause: BaseException) -> None:
        errno = getattr(cause, "errno", None)
        strerror = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        super().__init__(errno, strerror, str(path))
        self.path = str(path)
        self.free = free_space(path)

    def message(self) -> str:
        """The one line a job prints: the path, the error, and the free space there."""
        error = f"[Errno {self.errno}] {self.strerror}" if self.errno else str(self.strerror)
        if self.free is None:
            room = "free space unknown"
        else:
            room = f"{byte_size(self.free[0])} free of {byte_size(self.free[1])} on its filesystem"
        return f"{WRITE_FAILED_PREFIX}{self.path}: {error}; {room}"


def os_error_in(exc: BaseException) -> OSError | None:
    """``exc`` if it is an ``OSError``, else the first one it was raised from or during
    (``torch.save`` answers a full disk with a ``RuntimeError`` raised while handling one)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into a :class:`RunWriteError` naming ``path``."""
    try:
        yield
    except RunWriteError:
        raise
    except OSError as exc:
        raise RunWriteError(path, exc) from exc


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` in one rename, so a reader never sees half a file.

    Raises :class:`RunWriteError` when it cannot."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with writing(path):
            tmp.write_text(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, path)
    except BaseException:
        # A full disk must not leave a half-written temporary file behind.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file, or {} when it is missing or not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunRecord:
    """The in-memory ``run.json``; every :meth:`update` rewrites the file."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def start(cls, path: Path, data: dict[str, Any], *, keep: Iterable[str] = ()) -> RunRecord:
        """Write an attempt's start. A later attempt keeps the first start time, counts the
        attempts, and keeps the earlier values of ``keep`` that ``data`` does not set."""
        previous = read_json(path)
        merged = dict(data)
        if previous.get("started_at"):
            merged["started_at"] = previous["started_at"]
            merged["attempts"] = int(previous.get("attempts") or 1) + 1
        else:
            merged.setdefault("started_at", utc_now())
            merged["attempts"] = 1
        for name in keep:
            if merged.get(name) is None:
                merged[name] = previous.get(name)
        merged["attempt_started_at"] = utc_now()
        record = cls(path, merged)
        write_json_atomic(path, merged)
        return record

    def update(self, **changes: Any) -> None:
        self.data.update(changes)
        write_json_atomic(self.path, self.data)


def write_requeue_request(run_dir: Path, reason: str, **where: Any) -> None:
    """Ask the job script to requeue the job (it does so only after its own pre-timeout
    signal): ``reason`` and where the run stopped (``epoch``, ``step``)."""
    record = {"reason": reason, "time": time.time(), **where}
    path = run_dir / REQUEUE_FILE
    with writing(path):
        path.write_text(json.dumps(record) + "\n")


def clear_requeue_request(run_dir: Path) -> None:
    """A (re)started attempt removes the previous attempt's request."""
    path = run_dir / REQUEUE_FILE
    with writing(path):
        path.unlink(missing_ok=True)


def telemetry_file(node: int) -> str:
    """``telemetry/node-<node>.jsonl``, relative to the run directory (K = ``SLURM_NODEID``)."""
    return f"{TELEMETRY_DIR}/node-{node}.jsonl"


def heartbeat_path(run_dir: Path, rank: int) -> Path:
    """``<run>/heartbeats/rank-<rank>.json``."""
    return Path(run_dir) / HEARTBEAT_DIR / f"rank-{rank}.json"


class Heartbeater:
    """One rank's heartbeat: ``heartbeats/rank-<N>.json`` =
    ``{"rank", "host", "pid", "t", "epoch", "step", "phase"}`` (``t``: epoch seconds).

    Called from the training loop itself, never from a thread, so that a rank stuck in a
    collective or a data loader stops beating and can be named as the silent one. Each file
    is replaced by a rename inside ``heartbeats/``, so the directory's mtime is the time of
    the newest beat of any rank: a reader can stat one directory instead of reading every
    rank's file. :meth:`beat` writes at most every ``every_sec`` seconds, except when the
    phase changes or ``force`` is given, and never raises: a full disk must not end training.
    """

    def __init__(self, run_dir: Path, rank: int, host: str, *, every_sec: float = 15.0) -> None:
        self.path = heartbeat_path(run_dir, rank)
        self.rank = rank
        self.host = host
        self.every_sec = every_sec
        # time.monotonic() and phase of the last write (or failed try)
        self._written_at: float | None = None
        self._phase = ""

    def beat(self, epoch: int, step: int, phase: str, *, force: bool = False) -> bool:
        """Record where this rank is; returns whether the file was written."""
        now = time.monotonic()
        if (
            not force
            and phase == self._phase
            and self._written_at is not None
            and now - self._written_at < self.every_sec
        ):
            return False
        record = {
            "rank": self.rank,
            "host": self.host,
            "pid": os.getpid(),
            "t": time.time(),
            "epoch": epoch,
            "step": step,
            "phase": phase,
        }
        # A failed write is throttled too: a full disk is not retried on every step.
        self._written_at, self._phase = now, phase
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, record)
        except (OSError, ValueError):
            # ValueError: a path the OS refuses outright (a NUL byte); training goes on.
            return False
        return True


# -- every rank's stack on demand (docs/stacks.md) -----------------------------------------
#: The run directory's folder of stack dumps: ``<time>.json`` (+ ``.txt``) per taking, and
#: ``live/`` with one file per registered process.
STACKS_DIR: Final = "stacks"
#: ``stacks/live/<job key>-<host>-<pid>.txt``: a JSON header line, then faulthandler's dumps.
STACKS_LIVE_DIR: Final = "stacks/live"
#: The dump signal is ``SIGRTMIN + STACK_SIGNAL_OFFSET``: a real-time signal, because USR2 is
#: the pre-timeout signal, USR1 Lightning's requeue (and NCCL's), and no library of a training
#: job is known to use RTMIN+6. Its default action ends the process, so ddp-tui signals only a
#: process that provably registered (alive, and holding its own file open at the recorded fd).
STACK_SIGNAL_OFFSET: Final = 6
#: Set by a registered process to its pid; a process that finds another pid there was started
#: by a rank (a spawned DataLoader worker inherits the rank's ``RANK``), so it is no rank itself.
STACK_OWNER_ENV: Final = "DDP_TUI_STACK_OWNER"

# pid -> (the open dump file, its path): kept open for faulthandler, which writes to its fd
# from the signal handler; one registration per process.
_STACK_FILES: dict[int, tuple[Any, Path]] = {}


def stack_signal() -> int | None:
    """The dump signal's number on this platform (None where there are no real-time signals)."""
    import signal

    base = getattr(signal, "SIGRTMIN", None)
    return None if base is None else int(base) + STACK_SIGNAL_OFFSET


def job_key(env: Mapping[str, str]) -> str:
    """The job as ddp-tui names it: ``1234_5`` for an array task (ddp-tui's job id for it),
    else ``SLURM_JOB_ID``; ``nojob`` outside a job."""
    master, index = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if master and index:
        return f"{master}_{index}"
    return env.get("SLURM_JOB_ID") or "nojob"


def stack_file_name(key: str, host: str, pid: int) -> str:
    """``<job key>-<host>-<pid>.txt``: the live file of one process of one attempt."""
    return f"{key}-{host}-{pid}.txt"


def is_helper_process(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process was started by a registered rank (it inherited the rank's
    :data:`STACK_OWNER_ENV`): a DataLoader worker, a subprocess, never a rank itself."""
    owner = (os.environ if env is None else env).get(STACK_OWNER_ENV)
    return bool(owner) and owner != str(os.getpid())


def register_stack_dump(
    run_dir: str | os.PathLike[str],
    *,
    rank: int | None,
    local_rank: int | None = None,
    host: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Path | None:
    """Make this process dump every thread's Python stack into
    ``stacks/live/<job key>-<host>-<pid>.txt`` on :func:`stack_signal` (faulthandler, in C:
    it works while the main thread is stuck in a collective or in C code).

    The file's first line is a JSON header: ``rank``, ``local_rank``, ``host`` (the node's
    name as Slurm knows it), ``hostname``, ``pid``, ``fd``, ``path`` (as the kernel shows it
    in ``/proc/PID/fd/FD``), ``signal``, ``main_thread`` (the ident faulthandler prints for
    it), ``job`` (the job key), ``slurm_job_id``, ``argv``, ``time`` and ``python`` (the
    interpreter's version, ``3.11.7``). Idempotent per
    process; returns the path, or None where it could not register (it never fails the job:
    a note on stderr).
    """
    pid = os.getpid()
    if pid in _STACK_FILES:
        return _STACK_FILES[pid][1]
    env = os.environ if env is None else env
    sig = stack_signal()
    if sig is None:
        return None
    try:
        import faulthandler
        import socket
        import sys
        import threading

        hostname = socket.gethostname()
        node = host or env.get("SLURMD_NODENAME") or hostname
        key = job_key(env)
        folder = Path(run_dir) / STACKS_LIVE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = Path(os.path.realpath(folder / stack_file_name(key, node, pid)))
        handle = open(path, "a", buffering=1)  # noqa: SIM115 - kept open for faulthandler
        header = {
            "rank": rank,
            "local_rank": local_rank,
            "host": node,
            "hostname": hostname,
            "pid": pid,
            "fd": handle.fileno(),
            "path": str(path),
            "signal": sig,
            "main_thread": threading.main_thread().ident,
            "job": key,
            "slurm_job_id": env.get("SLURM_JOB_ID"),
            "argv": sys.argv[:4],
            "time": time.time(),
            # A stuck forked worker is a CPython bug of some versions (diagnosis/fork_hang.py).
            "python": ".".join(map(str, sys.version_info[:3])),
        }
        handle.write(json.dumps(header) + "\n")
        handle.flush()
        faulthandler.register(sig, file=handle, all_threads=True, chain=False)
    except Exception as exc:  # a full disk, a platform without it: the job goes on
        import sys

        sys.stderr.write(f"[ddp-tui] stack dumps off in this process: {exc!r}\n")
        return None
    _STACK_FILES[pid] = (handle, path)
    # What this process starts inherits it, and so knows it is no rank (is_helper_process).
    os.environ[STACK_OWNER_ENV] = str(pid)
    return path


# -- Rank lists as ranges (``0-3,6``): the ``ranks`` of a telemetry line (ddp_tui.telemetry) and
# the ranks a diagnosis names (ddp_tui.diagnosis). Here because this is the one module both may
# import.


def format_ranks(ranks: Iterable[int], sep: str = ",") -> str:
    """``"0-3"``, ``"0,2"``, ``"0-3,6"``; ``""`` for none. Sorted, each rank once; ``sep``
    joins the ranges (``", "`` in prose: ``"0-3, 6"``)."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return sep.join(parts)


# -- Slurm host lists (``gpu[01-03,07],n[1-2]``) without Slurm binaries. Here because this is
# the one module both sides may import: the trainer (its rendezvous host) and the app (the
# node a shell opens on, ddp_tui.remote.backends.hostlist).


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested brackets in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _expand_range(spec: str, whole: str) -> list[str]:
    """``01-03,07`` -> ``['01', '02', '03', '07']``; zero padding follows the lower bound."""
    out: list[str] = []
    for piece in spec.split(","):
        piece = piece.strip()
        if not piece:
            raise ValueError(f"empty range in host list {whole!r}")
        low, sep, high = piece.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"bad range {piece!r} in host list {whole!r}")
        if not sep:
            out.append(low)
            continue
        start, stop = int(low), int(high)
        if stop < start:
            raise ValueError(f"descending range {piece!r} in host list {whole!r}")
        width = len(low)
        out.extend(str(n).zfill(width) for n in range(start, stop + 1))
    return out


def _expand_host(pattern: str) -> list[str]:
    """One host pattern, possibly with several bracket groups (``r[1-2]n[1-2]``)."""
    pieces: list[list[str]] = []
    rest = pattern
    while "[" in rest:
        head, _, tail = rest.partition("[")
        inner, closed, rest = tail.partition("]")
        if not closed:
            raise ValueError(f"unbalanced '[' in host list {pattern!r}")
        pieces.append([head])
        pieces.append(_expand_range(inner, pattern))
    if "]" in rest:
        raise ValueError(f"unbalanced ']' in host list {pattern!r}")
    pieces.append([rest])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm node list into host names, in order (duplicates kept, as Slurm does)."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_host(item))
    return hosts
