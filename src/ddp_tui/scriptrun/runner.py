"""``python -m ddp_tui.scriptrun [options] -- (SCRIPT.py | -m MODULE) [ARGS...]``.

Every rank sets up the environment and logs itself in ``ranks.jsonl``; ranks other than 0
become the script (``os.execv``: no wrapper left, no overhead). Rank 0 runs the script as a
child, forwards the pre-emption and interrupt signals to it, copies its stdout (and, when the
metrics source reads tqdm bars, its stderr) byte for byte, parses them into the run directory's
files, and exits with the child's status.

A record the wrapper cannot write (``metrics.csv``, ``progress.jsonl``, ``run.json``,
``ranks.jsonl``: a full, read-only or over-quota disk) ends the job, as it ends the trainer: one
line on stderr names the file, the error and the free space there, the script is stopped
(SIGTERM, then SIGKILL after :data:`WRITE_FAILED_GRACE_SEC`), and the wrapper exits with
``EXIT_WRITE_FAILED``, on which the launcher ends the other ranks.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import select
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from ddp_tui.jobfiles import EXIT_WRITE_FAILED, RunRecord, RunWriteError

from .budget import steps_budget
from .columns import EXIT_REQUEUE
from .csvsource import CsvSource
from .merge import ObservedRows
from .observe import BOOT_DIR, ENV_FLAG
from .observed import Observations
from .presets import CSV_PREFIX, check_metrics_source
from .records import EpochRecord, Record
from .reportfiles import read_reports
from .rows import EpochNumbering, MetricsFile, ProgressFile, note_sources
from .runinfo import (
    RUN_JSON,
    append_rank_line,
    clear_requeue_request,
    rank_hosts,
    utc_now,
    write_requeue_request,
)
from .step_rows import StepRows
from .stream import BarParser, StdoutParser

if TYPE_CHECKING:
    import subprocess

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
_READ_SIZE = 1 << 16  # larger reads cost more (fresh pages) than they save
_PIPE_SIZE = 1 << 20  # fewer, larger reads at high output rates (Linux only; best effort)
_TICK_SEC = 1.0  # CSV polls and throttled progress lines
#: How long a script stopped for a failed write may take to end on SIGTERM before SIGKILL.
WRITE_FAILED_GRACE_SEC = 10.0
# The child's pipe fd -> (our fd it is copied to, its parser, the name a parsing bug reports).
_Streams = dict[int, tuple[int, Callable[[bytes], None], str]]


@dataclass(frozen=True)
class Options:
    run_dir: Path
    cwd: Path
    metrics: str
    columns: dict[str, str]
    samples_per_epoch: int | None
    epochs: int | None
    world_size: int | None
    backend: str | None
    local_env_from_slurm: bool
    observe: bool
    command: list[str]  # SCRIPT.py ARGS... or -m MODULE ARGS...
    max_steps: int | None = None  # the spec's; else read from the script's arguments


def _column(text: str) -> tuple[str, str]:
    src, sep, dst = text.partition("=")
    if not sep or not src or not dst:
        raise argparse.ArgumentTypeError(f"expected SRC=DST, got {text!r}")
    return src, dst


def parse_args(argv: Sequence[str]) -> Options:
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    own, command = argv[:split], argv[split + 1 :]
    p = argparse.ArgumentParser(
        prog="python -m ddp_tui.scriptrun",
        usage="%(prog)s --run-dir DIR [options] -- (SCRIPT.py | -m MODULE) [ARGS...]",
        description=__doc__,
    )
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--cwd", type=Path, default=Path("."), help="where the script runs")
    p.add_argument("--metrics", default="auto", help="preset, regex:PATTERN or csv:PATH")
    p.add_argument("--column", type=_column, action="append", default=[], metavar="SRC=DST")
    p.add_argument("--samples-per-epoch", type=int, default=None)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="the script's step budget")
    p.add_argument("--world-size", type=int, default=None)
    p.add_argument("--backend", default=None)
    p.add_argument("--local-env-from-slurm", action="store_true")
    p.add_argument(
        "--observe",
        choices=("on", "off"),
        default="on",
        help="observe every rank from inside (ddp_tui.scriptrun.observe); off: parse output only",
    )
    ns = p.parse_args(own)
    problem = check_metrics_source(ns.metrics)
    if problem:
        p.error(f"--metrics: {problem}")
    if not command or command == ["-m"]:
        p.error("nothing to run: give -- SCRIPT.py [ARGS...] or -- -m MODULE [ARGS...]")
    return Options(
        run_dir=ns.run_dir.resolve(),
        cwd=ns.cwd.resolve(),
        metrics=ns.metrics,
        columns=dict(ns.column),
        samples_per_epoch=ns.samples_per_epoch,
        epochs=ns.epochs,
        world_size=ns.world_size,
        backend=ns.backend,
        local_env_from_slurm=ns.local_env_from_slurm,
        observe=ns.observe == "on",
        command=command,
        max_steps=ns.max_steps,
    )


def _leading_int(text: str | None) -> str | None:
    """Slurm's ``4(x2),3`` -> ``4``."""
    m = re.match(r"\d+", text or "")
    return m.group(0) if m else None


def env_from_slurm(env: dict[str, str]) -> None:
    """The srun launcher: one task per GPU, ranks from Slurm's variables."""
    ntasks = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or "1"
    per_node = (
        _leading_int(env.get("SLURM_NTASKS_PER_NODE"))
        or _leading_int(env.get("SLURM_STEP_TASKS_PER_NODE"))
        or ntasks
    )
    env["RANK"] = env.get("SLURM_PROCID", "0")
    env["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
    env["WORLD_SIZE"] = ntasks
    env["LOCAL_WORLD_SIZE"] = per_node


def launcher(opts: Options, env: dict[str, str]) -> str:
    if opts.local_env_from_slurm:
        return "srun"
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun"
    return "env" if "RANK" in env else "single"


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ
    if opts.local_env_from_slurm:
        slurm = dict(env)
        env_from_slurm(slurm)
        for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
            env[name] = slurm[name]
    rank = int(env.get("RANK") or 0)
    local_rank = int(env.get("LOCAL_RANK") or 0)
    job_id = env.get("SLURM_JOB_ID") or None
    checkpoints = opts.run_dir / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    env["DDP_TUI_RUN_DIR"] = str(opts.run_dir)
    env["DDP_TUI_CHECKPOINT_DIR"] = str(checkpoints)
    env["DDP_TUI_REQUEUE_EXIT_CODE"] = str(EXIT_REQUEUE)
    env["DDP_TUI_ATTEMPT"] = job_id or ""
    if opts.observe:
        # Every Python process of the script (not the launcher) starts the observation layer.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(BOOT_DIR), env.get("PYTHONPATH"))))
        env[ENV_FLAG] = "1"
    os.chdir(opts.cwd)
    try:
        append_rank_line(opts.run_dir, rank, local_rank, job_id)
    except RunWriteError as exc:
        _say(exc.message())
        return EXIT_WRITE_FAILED
    argv = [sys.executable, *opts.command]
    if rank != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)
    return Rank0(opts, argv, job_id, launcher(opts, dict(env))).run()


class Rank0:
    """The parent of rank 0's script: copy, parse, record, and pass the exit status on."""

    def __init__(self, opts: Options, argv: list[str], job_id: str | None, how: str) -> None:
        self.opts = opts
        self.argv = argv
        self.job_id = job_id
        self.run_dir = opts.run_dir
        self.child_pid: int | None = None
        self.signals: list[int] = []  # received (and forwarded), in order
        self.start = time.monotonic()
        self.wall = time.time()  # journals older than this are an earlier attempt's
        self.launcher = how
        self.closed_outputs: set[int] = set()  # our fds whose reader is gone
        self.parse_failed = False
        self.observations: Observations | None = None
        self.rows = ObservedRows()
        self._observed_shape: tuple[int, ...] = ()

    # -- signals -------------------------------------------------------------------------
    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if self.child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child_pid, signum)

    def _install_signals(self) -> None:
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, self._forward)

    # -- outputs -------------------------------------------------------------------------
    def _open_outputs(self) -> None:
        clear_requeue_request(self.run_dir)
        opts = self.opts
        self.info = RunRecord.start(
            self.run_dir / RUN_JSON,
            {
                "state": "running",
                "entry": "script",
                "script": shlex.join(opts.command),
                "cwd": str(opts.cwd),
                "metrics_source": opts.metrics,
                "world_size": opts.world_size or int(os.environ.get("WORLD_SIZE") or 1),
                "backend": opts.backend,
                "launcher": self.launcher,
                "hosts": [],
                "rank_hosts": [],
                "epochs": opts.epochs,
                "job_id": self.job_id,
                "exit_code": None,
                "finished_at": None,
                "epoch_offset": None,
            },
            keep=("epoch_offset",),  # how a requeued attempt numbers its epochs
        )
        self.numbering = EpochNumbering(
            self.info.data.get("epoch_offset"),
            lambda offset: self.info.update(epoch_offset=offset),
        )
        self.parser = StdoutParser("none" if opts.metrics.startswith(CSV_PREFIX) else opts.metrics)
        # tqdm draws its bars on stderr, and Python's logging writes there by default (timm's
        # "Train: 0 [ 1/2 (100%)]  Loss: 1.57 (1.50)"): with `auto` stderr gets every preset
        # but the helper's lines (report.py prints those to stdout), each only on the lines it
        # recognises, so a traceback is no metric. `tqdm` reads its bars there, nothing else;
        # a named line preset or a regex reads stdout only, as asked.
        self.bars: BarParser | StdoutParser | None = None
        if opts.metrics == "auto":
            self.bars = StdoutParser("auto", stream="stderr")
        elif opts.metrics == "tqdm":
            self.bars = BarParser()
        self.csv: CsvSource | None = None
        extras = self.parser.extra_columns
        if opts.metrics.startswith(CSV_PREFIX):
            self.csv = CsvSource(
                opts.metrics[len(CSV_PREFIX) :], opts.cwd, opts.columns, time.time()
            )
            extras = self.csv.extra_columns
        self.metrics = MetricsFile(
            self.run_dir / "metrics.csv",
            self.numbering,
            extras,
            world_size=self.info.data["world_size"],
            samples_per_epoch=opts.samples_per_epoch,
            start=self.start,
        )
        self.info.update(epochs_completed=self.metrics.epochs_completed)
        offset = self.numbering.offset
        self.rows.loader_base = self.metrics.earlier_epochs + 1 - (1 if offset is None else offset)
        self.progress = ProgressFile(
            self.run_dir / "progress.jsonl",
            self.numbering,
            lambda: self.metrics.epochs_completed + 1,
            samples_per_epoch=opts.samples_per_epoch,
        )
        self.steps = StepRows(
            self.metrics, self.progress, self.info, opts.max_steps or steps_budget(opts.command)
        )

    def _records(self, records: Sequence[Record]) -> None:
        """Parsed records: rows and progress, unless observed epochs and steps are the rows."""
        rows: list[EpochRecord] = []
        for record in records:
            if isinstance(record, EpochRecord):
                observed = self.rows.parsed_epoch(record)
                rows += observed if self._observed_rows() else [record]
            elif record.epoch is None and record.values and self.steps.on and not record.helper:
                # A loop with no epochs: a logged step line is a step window (a tqdm bar's
                # redraws, which carry no values of their own, stay progress).
                self.steps.line(record)
            elif not (self.rows.steps_seen and self._observed_rows()):
                self.progress.add(record)
        self._rows(rows)

    def _observed_rows(self) -> bool:
        """Observed epochs make the rows, unless the script reports through the helper."""
        return self.rows.active and not self.parser.helper_seen

    def _rows(self, rows: Sequence[EpochRecord]) -> None:
        done = self.metrics.epochs_completed
        for row in rows:
            self.metrics.add(row)
        self._note_sources(rows)
        if self.metrics.epochs_completed != done:
            self.steps.epochs_seen()
            self.info.update(epochs_completed=self.metrics.epochs_completed, **self._hosts())

    def _note_sources(self, rows: Sequence[EpochRecord]) -> None:
        found: dict[str, str] = {}
        implied: dict[str, str] = {}
        for row in rows:
            if row.source:  # the wrapper times a parsed epoch by when its lines appeared
                implied.setdefault("epoch_time_sec", row.source)
            found.update({column: row.source_of(column) for column in (*row.values, *row.extras)})
        note_sources(self.info, found, implied)

    def _read_reports(self) -> None:
        """The files the script wrote about itself (reportfiles.py), once it has ended: with
        ``auto`` only, as one more source after its lines. A file's epoch that neither an
        observed epoch nor a line made a row makes none: its time would be the wrapper's."""
        if self.opts.metrics != "auto" or self.parser.helper_seen:
            return
        found = read_reports(self.opts.cwd, self.wall, skip=self.run_dir)
        joined = self._observed_rows()
        epochs = [r for r in found.epochs if joined or r.epoch in self.rows.parsed]
        if joined and not self.rows.parsed:
            # Joined by order to this attempt's observed epochs: a file that holds a resumed
            # run's whole history gives its last epochs, the ones this attempt trained.
            epochs = _last_epochs(epochs, len(self.rows.epochs))
        self._records(epochs)
        for finals in found.finals:
            order = self.rows.parsed_order
            epoch = finals.epoch if finals.epoch is not None else (order[-1] if order else None)
            have = self.rows.parsed.get(epoch) if epoch is not None else None
            if have is None:
                continue
            values = {k: v for k, v in finals.values.items() if k not in have.values}
            if values:
                self._records([EpochRecord(have.epoch, values, source=finals.source)])

    def _observe(self) -> None:
        """Read the journals: the main one's epochs and steps, everyone's group for run.json.
        A bug here stops observing, never the copy, the parsing or the training."""
        if self.observations is None:
            return
        try:
            self._read_observations()
        except Exception as exc:
            self.observations = None
            sys.stderr.write(f"[ddp-tui] observation stopped: {exc!r}\n")

    def _read_observations(self) -> None:
        assert self.observations is not None
        for record in self.observations.poll():
            before = self._observed_rows()
            made = self.rows.observed(record)
            if self.parser.helper_seen:
                continue
            if made and not before:
                # Parsed rows give way to the observed epochs, and so does the numbering a
                # parsed line decided ("Train Epoch: 1 [0/60000]" is a 1-based progress line;
                # observed epochs count from 0).
                self.metrics.forget_attempt()
                self.numbering.forget_attempt()
            # At once, record by record: the numbering is decided again by the first observed
            # epoch, before a step of the next epoch (in the same read) can decide it.
            self._rows(made)
            self.steps.journal(record, self.rows.world_size)
            step = self.rows.step(record)
            if step is not None and not (step.epoch is None and self.steps.on):
                self.progress.add(step)
        shape = self.observations.shape()
        if shape != self._observed_shape:  # a group formed, a framework spoke: say so now
            self._observed_shape = shape
            self.info.update(observed=self._observed_summary())

    def _observed_summary(self) -> dict[str, object]:
        assert self.observations is not None
        launched = self.opts.world_size or int(os.environ.get("WORLD_SIZE") or 1)
        return self.observations.summary(launched)

    def _hosts(self) -> dict[str, list[str]]:
        by_rank = rank_hosts(self.run_dir, self.job_id)
        return {"hosts": list(dict.fromkeys(by_rank)), "rank_hosts": by_rank}

    def _guarded(self, step: str, work: Callable[[], None]) -> None:
        """Run one parsing step; a parsing bug must never stop the copy or the training."""
        if self.parse_failed:
            return
        try:
            work()
        except RunWriteError:
            raise  # not a parsing bug: the job cannot record what it does (run())
        except Exception as exc:  # reported once, then parsing stops
            self.parse_failed = True
            sys.stderr.write(f"[ddp-tui] metrics parsing stopped ({step}): {exc!r}\n")

    # -- the copy loop -------------------------------------------------------------------
    def _copy(self, target: int, data: bytes) -> None:
        if target in self.closed_outputs:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(target, view) :]
        except OSError:  # our stdout/stderr is gone: keep draining the child, stop copying
            self.closed_outputs.add(target)

    def _feed(self, data: bytes) -> None:
        before = self.parser.helper_seen
        records = self.parser.feed(data)
        if self.parser.helper_seen and not before:
            self.metrics.forget_attempt()
        self._records(records)

    def _feed_bars(self, data: bytes) -> None:
        if self.bars is not None and not self.parser.helper_seen:  # helper lines overrule
            self._records(self.bars.feed(data))

    def _finish_parsing(self) -> None:
        self._records(self.parser.finish())
        if self.bars is not None and not self.parser.helper_seen:
            self._records(self.bars.finish())
        if self.csv is not None:
            self._records(self.csv.finish())

    def _tick(self) -> None:
        self.steps.tick()
        self.progress.tick()
        if self.csv is not None:
            self._records(self.csv.poll())

    def run(self) -> int:
        import subprocess  # only rank 0 needs it

        self._install_signals()
        try:
            self._open_outputs()
        except RunWriteError as exc:
            _say(exc.message())
            return EXIT_WRITE_FAILED
        sys.stdout.flush()
        stderr = subprocess.PIPE if self.bars is not None else None  # else inherited
        proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        self.child_pid = proc.pid
        if self.opts.observe:
            self.observations = Observations(
                self.run_dir, os.environ.get("DDP_TUI_ATTEMPT", ""), proc.pid, since=self.wall
            )
        self.metrics.restart_clock(time.monotonic())  # the first epoch counts from here
        for signum in self.signals:  # arrived while the child was being started
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signum)
        assert proc.stdout is not None
        with contextlib.suppress(AttributeError, OSError):
            import fcntl

            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        streams: _Streams = {proc.stdout.fileno(): (1, self._feed, "stdout")}
        if proc.stderr is not None:
            streams[proc.stderr.fileno()] = (2, self._feed_bars, "stderr")
        try:
            self._pump(streams)
        except RunWriteError as exc:
            return self._write_failed(exc, proc, streams)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
        code = proc.wait()
        try:
            self._guarded("end", self._finish_parsing)
            self._observe()
            self._guarded("end", self.steps.finish)
            self._guarded("report files", self._read_reports)
            self.progress.tick(float("inf"))
            self.progress.close()
            return self._finish(code)
        except RunWriteError as exc:
            return self._write_failed(exc, proc, {})

    def _write_failed(
        self, exc: RunWriteError, proc: subprocess.Popen[bytes], streams: _Streams
    ) -> int:
        """A record could not be written: say so, stop the script, and end the job.

        The script is not left to run on with nothing recorded, and nothing is retried: a
        full disk stays full. Its output is still copied (not parsed) until it has ended, so
        that it never blocks on a full pipe while it stops.
        """
        import threading

        _say(exc.message())
        self.parse_failed = True  # the pump now only copies
        self.observations = None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            killer = threading.Timer(WRITE_FAILED_GRACE_SEC, _kill, (proc,))
            killer.daemon = True
            killer.start()
            try:
                self._pump(streams)
                proc.wait()
            finally:
                killer.cancel()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        proc.wait()
        # Best effort: the disk that refused a write may refuse this one too.
        with contextlib.suppress(OSError):
            self.info.update(
                state="failed", error=exc.message(), exit_code=EXIT_WRITE_FAILED,
                finished_at=utc_now(),
            )  # fmt: skip
        return EXIT_WRITE_FAILED

    def _pump(self, streams: _Streams) -> None:
        """Copy and parse the child's pipes until both are at EOF: all the child (and any
        process it left holding them) wrote is passed on, a last traceback included."""
        next_tick = time.monotonic() + _TICK_SEC
        while streams:
            wait = max(next_tick - time.monotonic(), 0.0)
            ready, _, _ = select.select(list(streams), [], [], wait)
            for fd in ready:
                data = os.read(fd, _READ_SIZE)
                target, feed, name = streams[fd]
                if not data:
                    del streams[fd]
                    continue
                self._copy(target, data)
                self._guarded(name, functools.partial(feed, data))
            if time.monotonic() >= next_tick:
                self._observe()
                self._guarded("tick", self._tick)
                next_tick = time.monotonic() + _TICK_SEC

    def _finish(self, code: int) -> int:
        status = 128 - code if code < 0 else code
        done = self.metrics.epochs_completed
        end: dict[str, object] = {
            "exit_code": status,
            "epochs_completed": done,
            "finished_at": utc_now(),
            **self._hosts(),
        }
        if self.observations is not None:
            end["observed"] = self._observed_summary()
        if status == 0:
            end["state"] = "completed"
        elif status == EXIT_REQUEUE:
            reason = signal.Signals(self.signals[-1]).name if self.signals else "exit 3"
            write_requeue_request(self.run_dir, reason, epoch=done)
            end.update(state="preempted", stopped_at=utc_now())
        else:
            end["state"] = "failed"
            end["error"] = (
                f"the script was killed by {_signal_name(-code)}"
                if code < 0
                else f"the script exited with code {code}"
            )
        self.info.update(**end)
        return status


def _last_epochs(records: Sequence[EpochRecord], count: int) -> list[EpochRecord]:
    """Of each source's records, those of its last ``count`` epoch numbers."""
    kept: list[EpochRecord] = []
    for source in dict.fromkeys(r.source for r in records):
        mine = [r for r in records if r.source == source]
        last = sorted({r.epoch for r in mine})[-count:] if count > 0 else []
        kept += [r for r in mine if r.epoch in last]
    return kept


def _say(text: str) -> None:
    """One line to stderr, best effort (it may be on the disk that is full)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
