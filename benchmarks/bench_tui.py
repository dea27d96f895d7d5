"""ddp-tui's UI benchmarks, each next to a reference measured in the same run.

    .venv/bin/python benchmarks/bench_tui.py [--runs 5] [--grow-seconds 5] [--log-gib 1]
    .venv/bin/python benchmarks/bench_tui.py --quick   # 1 start each, a 16 MiB log grown
        # for 1 s, 200 runs, short waits: seconds; targets printed, not enforced

Every app runs in its own process on a pseudo-terminal (Textual's real Linux driver,
real escape-sequence output), and this process times what appears on that terminal:

1. start to first paint: ``ddp-tui`` (the real CLI, local scheduler, empty runs root)
   against a bare Textual app, from process spawn to its first text on the terminal;
2. a 1 GiB log (real lines, page cache dropped): key press to its last line on screen,
   and the app's RSS growth (peak, VmHWM) -- against a 10-line log;
3. a log growing at 20 MB/s: how old the newest line on screen is, against a log growing
   at 20 kB/s; and a key press answered on screen (the app redraws a press counter),
   against the same key while nothing grows;
4. the jobs table with 2,000 runs: ``f5`` to every row's new values on screen, in the real
   ``DdpTuiApp`` fed by a fake cluster (named so: ``_FakeBenchCluster``) -- against a plain
   ``DataTable`` given the same ``update_cell`` calls.

It prints a table with ratios and pass/fail against the targets of issue 4, exits 1 if a
target failed (a quick run exits 0 whatever the targets say). The 1 GiB file lives in a
temporary directory that is always removed. A full run writes benchmarks/results/tui.json.
"""

from __future__ import annotations

import argparse
import bisect
import fcntl
import os
import pty
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from record import Record, add_quick_option

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import Snapshot

MIB = 1024 * 1024
COLS, ROWS = 120, 40
F5 = b"\x1b[15~"


@dataclass(frozen=True)
class Pace:
    """The waits and counts between the measurements (a quick run shortens them)."""

    warmup_starts: int = 1  # rounds of app starts before those measured
    settle: float = 0.5  # after the log app is up, and after opening a log
    idle_presses: int = 8  # key presses while nothing grows (the reference)
    key_gap: float = 0.2  # between key presses
    slow_seconds: float = 2.0  # how long the reference log grows
    follow_start: float = 0.3  # the follower is up and has read the empty file
    keys_start: float = 0.5  # growing, before the first key press
    drain: float = 1.5  # after growing: the last lines arrive
    fill_settle: float = 1.0  # after the jobs table's first fill
    refresh_gap: float = 0.3  # between f5 presses


FULL = Pace()
QUICK = Pace(
    warmup_starts=0,
    settle=0.1,
    idle_presses=2,
    key_gap=0.05,
    slow_seconds=0.5,
    follow_start=0.2,
    keys_start=0.2,
    drain=0.6,
    fill_settle=0.2,
    refresh_gap=0.05,
)

# ---------------------------------------------------------------------------------------
# A process on a pseudo-terminal, and what it has drawn so far
# ---------------------------------------------------------------------------------------


# Escape sequences that Textual writes: CSI, OSC, charset selection, keypad modes.
_ESCAPE = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\-_=>])"
)


class PtyApp:
    """Runs ``argv`` on a pty of COLS x ROWS and records the text it draws, with times.

    Escape sequences are removed as the output arrives, so text that Textual wrote as
    several styled segments, or with cursor moves between them, reads as one string.
    """

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self._buf = bytearray()  # everything drawn, without escape sequences
        self._ends: list[int] = []  # buffer length after each read ...
        self._times: list[float] = []  # ... and when that read returned
        self._cond = threading.Condition()
        self._master = master
        self._partial = b""  # an escape sequence cut by the end of a read
        #: Called from the reader thread with (new text, arrival time).
        self.on_output: Callable[[bytes, float], None] | None = None
        full_env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        full_env.update(env or {})
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=full_env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _plain(self, data: bytes) -> bytes:
        data = self._partial + data
        self._partial = b""
        last = data.rfind(b"\x1b")
        if last >= 0 and len(data) - last < 256 and _ESCAPE.match(data, last) is None:
            self._partial, data = data[last:], data[:last]
        return _ESCAPE.sub(b"", data)

    def _drain(self) -> None:
        carry = b""
        while True:
            try:
                raw = os.read(self._master, 1 << 16)
            except OSError:
                break
            if not raw:
                break
            now = time.monotonic()
            data = self._plain(raw)
            with self._cond:
                self._buf += data
                self._ends.append(len(self._buf))
                self._times.append(now)
                self._cond.notify_all()
            hook = self.on_output
            if hook is not None:
                hook(carry + data, now)
            carry = data[-32:]

    @property
    def position(self) -> int:
        with self._cond:
            return len(self._buf)

    def send(self, keys: bytes) -> tuple[float, int]:
        """Type ``keys``; returns when, and how much output had arrived before."""
        with self._cond:
            pos = len(self._buf)
        now = time.monotonic()
        os.write(self._master, keys)
        return now, pos

    def wait_for(self, marker: bytes, start: int, timeout: float) -> float | None:
        """When ``marker`` first arrived after byte ``start``; None on timeout."""
        deadline = time.monotonic() + timeout
        searched = start
        with self._cond:
            while True:
                found = self._buf.find(marker, searched)
                if found >= 0:
                    index = bisect.bisect_left(self._ends, found + len(marker))
                    return self._times[index]
                searched = max(start, len(self._buf) - len(marker))
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    return None
                self._cond.wait(min(remaining, 0.05))

    def screen_text(self, last: int = 3000) -> str:
        """The end of the output, for error messages."""
        with self._cond:
            return bytes(self._buf[-last:]).decode("utf-8", "replace")

    def rss(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the app in bytes."""
        fields: dict[str, int] = {}
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    fields[key] = int(value.split()[0]) * 1024
        return fields["VmRSS"], fields["VmHWM"]

    def reset_peak_rss(self) -> None:
        with open(f"/proc/{self.proc.pid}/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # 5: reset the peak RSS to the current RSS

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(timeout=5)
        os.close(self._master)


class BenchError(RuntimeError):
    pass


def _expect(app: PtyApp, marker: bytes, start: int, timeout: float, what: str) -> float:
    found = app.wait_for(marker, start, timeout)
    if found is None:
        raise BenchError(
            f"{what}: {marker!r} never appeared; screen ends with:\n{app.screen_text()}"
        )
    return found


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    value: float
    reference: float
    unit: str
    target: float | None  # the measured value must be at most this
    ref_factor: float | None = None  # ... and at most this many times the reference
    note: str = ""
    key: str = ""  # the name in the results file, when ``name`` holds a measured value

    @property
    def ratio(self) -> float:
        return self.value / self.reference if self.reference else float("inf")

    @property
    def passed(self) -> bool | None:
        if self.target is None and self.ref_factor is None:
            return None
        ok = self.target is None or self.value <= self.target
        if self.ref_factor is not None:
            ok = ok and self.ratio <= self.ref_factor
        return ok


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:g} {unit}"


def _target(r: Result) -> str:
    target = [] if r.target is None else [f"<= {_fmt(r.target, r.unit)}"]
    if r.ref_factor is not None:
        target.append(f"<= {r.ref_factor:g}x ref")
    return ", ".join(target) or "-"


def _verdict(r: Result) -> str:
    return {True: "PASS", False: "FAIL", None: "info"}[r.passed]


def print_table(results: Sequence[Result]) -> None:
    head = ("measurement", "value", "reference", "ratio", "target", "result")
    rows = []
    for r in results:
        rows.append(
            (
                r.name,
                _fmt(r.value, r.unit),
                _fmt(r.reference, r.unit),
                f"{r.ratio:.2f}x",
                _target(r),
                _verdict(r),
            )
        )
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    for row in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    notes = [f"- {r.name}: {r.note}" for r in results if r.note]
    if notes:
        print("\n".join(["", "notes:", *notes]))


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _p95(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# ---------------------------------------------------------------------------------------
# 1. Start to first paint
# ---------------------------------------------------------------------------------------

BARE_APP = """
from textual.app import App
from textual.widgets import Static
class Bare(App):
    def compose(self):
        yield Static("bare-app-ready")
Bare().run()
"""
BARE_MARKER = b"bare-app-ready"
# The real CLI on an empty runs root: the jobs screen's header is in its first frame.
REAL_APP = "import sys; from ddp_tui.cli import main; sys.exit(main(['--runs-root', sys.argv[1]]))"
REAL_MARKER = "ddp-tui · Jobs".encode()


def start_times(
    runs: int,
    tmp: Path,
    real_argv: Callable[[int], list[str]],
    real_marker: bytes,
    warmup: int = 1,
) -> dict[str, list[float]]:
    """Seconds from spawn to first sight of the marker: ``runs`` starts of a bare Textual
    app and of ``real_argv(i)``, interleaved, after ``warmup`` rounds that only warm the
    disk."""
    times: dict[str, list[float]] = {"bare": [], "real": []}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    for i in range(runs + warmup):
        for kind in ("bare", "real"):
            if kind == "bare":
                argv, marker = [sys.executable, "-c", BARE_APP], BARE_MARKER
            else:
                argv, marker = real_argv(i), real_marker
            app = PtyApp(argv, env=env)
            try:
                seen = _expect(app, marker, 0, 60.0, f"{kind} app start")
            finally:
                app.close()
            if i >= warmup:
                times[kind].append(seen - app.started)
    return times


def bench_startup(runs: int, tmp: Path, pace: Pace = FULL) -> list[Result]:
    times = start_times(
        runs,
        tmp,
        lambda i: [sys.executable, "-c", REAL_APP, str(tmp / f"runs-{i}")],  # an empty root
        REAL_MARKER,
        pace.warmup_starts,
    )
    bare, real = _median(times["bare"]), _median(times["real"])
    return [
        Result(
            "start to first paint (ddp-tui vs bare App)",
            real,
            bare,
            "s",
            0.6,
            2.0,
            note=f"median of {runs}; ddp-tui max {max(times['real']) * 1000:.0f} ms, "
            f"bare max {max(times['bare']) * 1000:.0f} ms",
        )
    ]


# ---------------------------------------------------------------------------------------
# 2 and 3. Logs: the child app
# ---------------------------------------------------------------------------------------

LOG_READY = b"log-bench-ready"
TINY_END = "tiny-log-end-marker"
BIG_END = "big-log-end-marker"


def _log_child(tiny: str, big: str, slow: str, fast: str, follow_interval: float) -> None:
    """The host app: a LogPane fed by the store's LogReader, as the detail screen feeds it."""
    from textual import work
    from textual.app import App, ComposeResult
    from textual.widgets import Static
    from textual.worker import get_current_worker

    from ddp_tui.remote.backends.executor import LocalExecutor
    from ddp_tui.remote.store.tail import LogReader
    from ddp_tui.tui.logview import LogPane

    executor = LocalExecutor()
    paths = {"tiny": tiny, "big": big, "slow": slow, "fast": fast}

    class LogBench(App[None]):
        BINDINGS = [
            ("k", "count", "count key presses"),
            ("t", "open('tiny')", "open tiny"),
            ("o", "open('big')", "open big"),
            ("s", "follow('slow')", "follow slow"),
            ("g", "follow('fast')", "follow fast"),
        ]

        presses = 0

        def compose(self) -> ComposeResult:
            yield Static(LOG_READY.decode(), id="keys")
            yield LogPane()

        def action_count(self) -> None:
            self.presses += 1
            self.query_one("#keys", Static).update(_key_marker(self.presses).decode())

        def on_mount(self) -> None:
            self.query_one(LogPane).view("out").focus()

        def action_open(self, which: str) -> None:
            self.open_log(paths[which])

        def action_follow(self, which: str) -> None:
            self.follow_log(paths[which])

        @work(thread=True, exclusive=True, group="log")
        def open_log(self, path: str) -> None:
            pane = self.query_one(LogPane)
            lines = LogReader(path).read_from(executor)
            pane.reset("out")
            pane.append("out", lines)

        @work(thread=True, exclusive=True, group="log")
        def follow_log(self, path: str) -> None:
            pane = self.query_one(LogPane)
            worker = get_current_worker()
            reader = LogReader(path)
            pane.reset("out")
            while not worker.is_cancelled:
                # One follow tick. Further behind than the reader's tail window, only
                # the tail can still show (the pane keeps max_lines), so start again
                # from the tail, as when opening a big log, and say what was skipped.
                behind = os.stat(path).st_size - reader.offset
                if reader.tail_bytes is not None and behind > reader.tail_bytes:
                    reader = LogReader(path)
                    pane.append(
                        "out",
                        [
                            f"[... {behind / 1e6:.1f} MB not shown: the log grows "
                            "faster than it can be read ...]"
                        ],
                    )
                pane.append("out", reader.read_from(executor))
                time.sleep(follow_interval)

    LogBench().run()


def _log_lines_block(size: int, tag: bytes) -> bytes:
    """About ``size`` bytes of realistic training-log lines; ``tag`` starts every line."""
    out = bytearray()
    i = 0
    while len(out) < size:
        i += 1
        if i % 50 == 0:
            bar = b"".join(
                b"\r%3d%%|%-20s| %d/100" % (p, b"#" * (p // 5), p) for p in (10, 50, 100)
            )
            out += tag + b" train " + bar + b"\n"
        elif i % 17 == 0:
            out += tag + b" \x1b[33mWARNING\x1b[0m NCCL: ring 0 reconnected after 12 ms\n"
        else:
            out += (
                tag + b" [rank%d] epoch 3 step %5d loss %.4f lr 0.0500 samples/s 18234.5 "
                b"data 0.003s compute 0.041s\n" % (i % 8, i, 2.0 / (1 + i % 97))
            )
    return bytes(out)


def _write_big_log(path: Path, gib: float) -> None:
    block = _log_lines_block(MIB, b"old-line")
    block = block[: block.rfind(b"\n") + 1]
    total = int(gib * 1024 * MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        written = 0
        while written < total:
            written += os.write(fd, block)
        os.write(fd, f"last line {BIG_END}\n".encode())
        os.fdatasync(fd)
        # Drop it from the page cache: the app reads the tail from disk, as it would
        # for a log written on another node.
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class _Writer(threading.Thread):
    """Appends ``rate`` bytes/s in 10 ms chunks; each line says which chunk it is in."""

    INTERVAL = 0.01

    def __init__(self, path: Path, rate: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.seconds = seconds
        self.template = _log_lines_block(max(1, int(rate * self.INTERVAL)), b"c=CCCCCCCC")
        self.written: dict[int, float] = {}
        self.bytes = 0

    def run(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            start = time.monotonic()
            chunk = 0
            while time.monotonic() - start < self.seconds:
                chunk += 1
                self.bytes += os.write(fd, self.template.replace(b"CCCCCCCC", b"%08d" % chunk))
                self.written[chunk] = time.monotonic()
                pause = start + chunk * self.INTERVAL - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
        finally:
            os.close(fd)


class _NewestSeen:
    """Watches the terminal for ``c=<chunk>`` and records when a newer chunk shows."""

    PATTERN = re.compile(rb"c=(\d{8})")

    def __init__(self) -> None:
        self.newest = 0
        self.seen: list[tuple[float, int]] = []

    def __call__(self, data: bytes, now: float) -> None:
        numbers = [int(m) for m in self.PATTERN.findall(data)]
        if numbers and max(numbers) > self.newest:
            self.newest = max(numbers)
            self.seen.append((now, self.newest))


def _key_marker(n: int) -> bytes:
    return b"key-press-%04d" % n


class _KeyPresser:
    """Presses ``k`` (the app counts presses on screen) and times until the count shows."""

    def __init__(self) -> None:
        self.count = 0

    def press(self, app: PtyApp, presses: int, gap: float) -> list[float]:
        out: list[float] = []
        for _ in range(presses):
            self.count += 1
            sent, pos = app.send(b"k")
            out.append(_expect(app, _key_marker(self.count), pos, 5.0, "key press") - sent)
            time.sleep(gap)
        return out


def _follow_latencies(
    app: PtyApp,
    path: Path,
    key: bytes,
    rate: float,
    seconds: float,
    keys: _KeyPresser | None,
    pace: Pace = FULL,
) -> tuple[list[float], list[float], float]:
    """Follow ``path`` while it grows at ``rate``: (line ages on screen, key latencies, MB/s)."""
    path.write_bytes(b"")
    watcher = _NewestSeen()
    app.send(key)
    time.sleep(pace.follow_start)  # the follower is up and has read the empty file
    app.on_output = watcher
    writer = _Writer(path, rate, seconds)
    writer.start()
    latencies: list[float] = []
    if keys is not None:
        time.sleep(pace.keys_start)
        while writer.is_alive():
            latencies.extend(keys.press(app, 1, pace.key_gap))
    writer.join()
    time.sleep(pace.drain)  # let the last lines arrive
    app.on_output = None
    ages = [now - writer.written[chunk] for now, chunk in watcher.seen if chunk in writer.written]
    if not ages:
        raise BenchError(f"no new log line ever showed; screen ends with:\n{app.screen_text()}")
    lag = max(writer.written) - watcher.newest
    if lag > 100:  # the newest chunk never showed: the pane fell behind for good
        ages.append(float("inf"))
    return ages, latencies, writer.bytes / seconds / 1e6


def bench_logs(
    tmp: Path, gib: float, grow_seconds: float, follow_interval: float, pace: Pace = FULL
) -> list[Result]:
    tiny, big, slow, fast = (tmp / n for n in ("tiny.out", "big.out", "slow.out", "fast.out"))
    tiny.write_text("".join(f"step {i}\n" for i in range(9)) + f"last line {TINY_END}\n")
    t0 = time.monotonic()
    _write_big_log(big, gib)
    gen_seconds = time.monotonic() - t0
    size_gib = big.stat().st_size / 1024**3
    argv = [
        sys.executable,
        __file__,
        "--child",
        "logs",
        str(tiny),
        str(big),
        str(slow),
        str(fast),
        str(follow_interval),
    ]
    app = PtyApp(argv)
    results: list[Result] = []
    try:
        _expect(app, LOG_READY, 0, 20.0, "log bench app start")
        time.sleep(pace.settle)
        opened: dict[str, tuple[float, float]] = {}
        for key, marker, name in ((b"t", TINY_END, "tiny"), (b"o", BIG_END, "big")):
            rss_before, _ = app.rss()
            app.reset_peak_rss()
            sent, pos = app.send(key)
            shown = _expect(app, marker.encode(), pos, 10.0, f"open {name} log")
            time.sleep(pace.settle)
            _, peak = app.rss()
            opened[name] = (shown - sent, (peak - rss_before) / 1e6)
        big.unlink()  # free the disk now
        results.append(
            Result(
                f"open a {size_gib:.2f} GiB log: tail on screen",
                opened["big"][0],
                opened["tiny"][0],
                "s",
                0.3,
                note=f"reference: a 10-line log; writing the file took "
                f"{gen_seconds:.1f} s; page cache dropped before opening",
            )
        )
        results.append(
            Result(
                f"open a {size_gib:.2f} GiB log: peak RSS growth",
                opened["big"][1],
                max(opened["tiny"][1], 0.001),
                "MB",
                50.0,
                note="VmHWM after minus VmRSS before; reference: the 10-line log",
            )
        )

        presser = _KeyPresser()
        idle_keys = presser.press(app, pace.idle_presses, pace.key_gap)
        slow_ages, _, slow_rate = _follow_latencies(
            app, slow, b"s", 20e3, pace.slow_seconds, None, pace
        )
        fast_ages, busy_keys, fast_rate = _follow_latencies(
            app, fast, b"g", 20e6, grow_seconds, presser, pace
        )
        results.append(
            Result(
                f"log growing at {fast_rate:.0f} MB/s: newest line age (max)",
                max(fast_ages),
                max(slow_ages),
                "s",
                1.0,
                note=f"median {_median(fast_ages) * 1000:.0f} ms over "
                f"{len(fast_ages)} updates; reference grows at "
                f"{slow_rate * 1000:.0f} kB/s; follow tick {follow_interval:g} s",
                key="log growing at 20 MB/s: newest line age (max)",
            )
        )
        results.append(
            Result(
                "key press while it grows: answered on screen (max)",
                max(busy_keys),
                max(idle_keys),
                "s",
                0.1,
                note=f"{len(busy_keys)} presses, median {_median(busy_keys) * 1000:.0f} ms, "
                f"p95 {_p95(busy_keys) * 1000:.0f} ms; reference: the same key, nothing growing",
            )
        )
    finally:
        app.close()
        for p in (big, slow, fast):
            p.unlink(missing_ok=True)
    return results


# ---------------------------------------------------------------------------------------
# 4. The jobs table with 2,000 runs
# ---------------------------------------------------------------------------------------


def _refresh_marker(k: int) -> str:
    return f"refresh-{k:04d}"


#: In the second half of the refreshes only this many runs change (the rest finished).
TYPICAL_CHANGING = 100


def _snapshot(n: int, k: int, refreshes: int) -> Snapshot:
    """Refresh ``k`` of ``n`` running runs. Up to ``refreshes`` every run changes its
    elapsed time, epoch, loss, metric and throughput (the worst case); after that only
    the first TYPICAL_CHANGING do. The first run is named ``refresh-k`` either way."""
    from ddp_tui.remote.backends.states import JobState
    from ddp_tui.remote.model.views import Attempt, RunView, Snapshot
    from ddp_tui.spec import ExperimentSpec

    spec = ExperimentSpec(name="bench", nodes=2, gpus_per_node=4)
    runs = []
    for i in range(n):
        v = k if k <= refreshes or i < TYPICAL_CHANGING else refreshes
        runs.append(
            RunView(
                run_id=f"20250101-000000-bench-{i:04x}",
                name=_refresh_marker(k) if i == 0 else f"bench-{i:04d}",
                run_dir="",
                group=None,
                created_at="",
                spec=spec,
                attempts=(Attempt(str(100000 + i), "slurm", "", None, 1),),
                state=JobState.RUNNING,
                elapsed_sec=60.0 + i + v,
                epochs_done=v % 10,
                epochs_total=10,
                last_train_loss=1.0 / (1 + i + v),
                last_val_metric=0.5 + v / 100,
                throughput=1000.0 + i + v,
            )
        )
    return Snapshot(time.time(), tuple(runs), "local scheduler", "bench", "ok")


class _FakeBenchCluster:
    """A fake facade: ``refresh()`` returns the next precomputed 2,000-run snapshot."""

    location = "local scheduler"

    def __init__(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = snapshots
        self.calls = 0

    def refresh(self, follow: str | None = None) -> Snapshot:
        snapshot = self.snapshots[min(self.calls, len(self.snapshots) - 1)]
        self.calls += 1
        return snapshot

    def close(self) -> None:
        pass


def _jobs_child(kind: str, n: int, refreshes: int) -> None:
    snapshots = [_snapshot(n, k, refreshes) for k in range(2 * refreshes + 1)]
    if kind == "app":
        from ddp_tui.tui.app import DdpTuiApp

        cluster = _FakeBenchCluster(snapshots)
        # refresh_interval 60 s: only f5 refreshes while we measure.
        DdpTuiApp(lambda _prompter: cluster, refresh_interval=60.0).run()  # type: ignore[arg-type,return-value]
        return

    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    from ddp_tui.tui.screens.jobs import COLUMNS, row_values

    class PlainTable(App[None]):
        """The reference: a DataTable with the same fixed-width columns and cells."""

        BINDINGS = [("f5", "next", "refresh")]

        def compose(self) -> ComposeResult:
            table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True)
            for key, label, width in COLUMNS:
                table.add_column(label, width=width, key=key)
            yield table

        def on_mount(self) -> None:
            self.k = 0
            self.rows = {run.run_id: row_values(run) for run in snapshots[0].runs}
            table = self.query_one(DataTable)
            for run_id, values in self.rows.items():
                table.add_row(*values, key=run_id)

        def action_next(self) -> None:
            self.k += 1
            table = self.query_one(DataTable)
            keys = [key for key, _, _ in COLUMNS]
            for run in snapshots[min(self.k, len(snapshots) - 1)].runs:
                new = row_values(run)
                old = self.rows[run.run_id]
                for index, column in enumerate(keys):
                    if old[index] != new[index]:
                        table.update_cell(run.run_id, column, new[index])
                self.rows[run.run_id] = new

    PlainTable().run()


def _jobs_latencies(
    kind: str, n: int, refreshes: int, pace: Pace = FULL
) -> tuple[list[float], list[float]]:
    """f5 to the new first row on screen: (every row changed, TYPICAL_CHANGING rows changed)."""
    argv = [sys.executable, __file__, "--child", "jobs", kind, str(n), str(refreshes)]
    app = PtyApp(argv)
    try:
        _expect(app, _refresh_marker(0).encode(), 0, 60.0, f"{kind} jobs table first fill")
        time.sleep(pace.fill_settle)
        out = []
        for k in range(1, 2 * refreshes + 1):
            sent, pos = app.send(F5)
            out.append(_expect(app, _refresh_marker(k).encode(), pos, 10.0, f"refresh {k}") - sent)
            time.sleep(pace.refresh_gap)
        return out[:refreshes], out[refreshes:]
    finally:
        app.close()


def bench_jobs(n: int, refreshes: int, pace: Pace = FULL) -> list[Result]:
    real_all, real_some = _jobs_latencies("app", n, refreshes, pace)
    plain_all, plain_some = _jobs_latencies("plain", n, refreshes, pace)
    reference = "reference: a plain DataTable given the same update_cell calls"
    return [
        Result(
            f"jobs table, {n:,} runs, all change: repainted (max)",
            max(real_all),
            max(plain_all),
            "s",
            0.1,
            note=f"{refreshes} f5 refreshes, 5 cells of every row change; median "
            f"{_median(real_all) * 1000:.0f} ms (reference {_median(plain_all) * 1000:.0f} ms); "
            + reference,
        ),
        Result(
            f"jobs table, {n:,} runs, {TYPICAL_CHANGING} change: repainted (max)",
            max(real_some),
            max(plain_some),
            "s",
            0.1,
            note=f"{refreshes} f5 refreshes; median {_median(real_some) * 1000:.0f} ms "
            f"(reference {_median(plain_some) * 1000:.0f} ms); " + reference,
        ),
    ]


# ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, help="app starts per kind (5; 1 with --quick)")
    parser.add_argument(
        "--log-gib", type=float, help="size of the big log (1; 1/64, 16 MiB, with --quick)"
    )
    parser.add_argument("--grow-seconds", type=float, help="5; 1 with --quick")
    parser.add_argument(
        "--follow-interval", type=float, help="log poll, seconds (0.5; 0.25 with --quick)"
    )
    parser.add_argument("--jobs", type=int, help="2000; 200 with --quick")
    parser.add_argument("--refreshes", type=int, help="5; 1 with --quick")
    parser.add_argument("--only", choices=("startup", "logs", "jobs"), action="append")
    add_quick_option(parser)
    args = parser.parse_args(argv)
    defaults = {  # name: (full, quick)
        "runs": (5, 1),
        "log_gib": (1.0, 1 / 64),
        "grow_seconds": (5.0, 1.0),
        "follow_interval": (0.5, 0.25),
        "jobs": (2000, 200),
        "refreshes": (5, 1),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    pace = QUICK if args.quick else FULL
    record = Record("tui", quick=args.quick)
    parts = args.only or ["startup", "logs", "jobs"]
    results: list[Result] = []
    start = time.monotonic()
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="ddp-tui-bench-"))
    try:
        if "startup" in parts:
            results += bench_startup(args.runs, tmp, pace)
        if "logs" in parts:
            results += bench_logs(tmp, args.log_gib, args.grow_seconds, args.follow_interval, pace)
        if "jobs" in parts:
            results += bench_jobs(args.jobs, args.refreshes, pace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\nddp-tui UI benchmark: {os.cpu_count()} CPUs, load average {load_before:.1f} before"
        f" and {os.getloadavg()[0]:.1f} after, {time.monotonic() - start:.0f} s\n"
    )
    print_table(results)
    for r in results:
        note = "; ".join(x for x in (r.note, f"target {_target(r)}: {_verdict(r)}") if x)
        record.figure(r.key or r.name, r.value, r.reference, unit=r.unit, note=note)
    record.save()
    passed = all(r.passed is not False for r in results)
    if args.quick and not passed:
        print("\n(a quick run: the targets are not enforced)")
        return 0
    return 0 if passed else 1


def child(args: list[str]) -> None:
    mode = args[0]
    if mode == "logs":
        _log_child(args[1], args[2], args[3], args[4], float(args[5]))
    elif mode == "jobs":
        _jobs_child(args[1], int(args[2]), int(args[3]))
    else:
        raise SystemExit(f"unknown child mode {mode!r}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        sys.exit(main())
