"""A sampler that cannot read ``/proc`` never fails the job, and the parsing of ``/proc``
files with states a real process cannot be put in on demand: a fake ``/proc`` tree
(``fake_proc``) and a fake clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ddp_tui.jobfiles import telemetry_file
from ddp_tui.telemetry.procs import ProcScanner, parse_stat

from .members import sampler_env

HZ = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int, comm: str, ticks: int, start: int, rss_pages: int) -> str:
    # Fields 3.. of /proc/<pid>/stat: utime is 14, stime 15, starttime 22, rss 24.
    rest = ["S"] + ["0"] * 49
    rest[14 - 3], rest[15 - 3] = str(ticks - ticks // 3), str(ticks // 3)
    rest[22 - 3], rest[24 - 3] = str(start), str(rss_pages)
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


def _fake_process(root: Path, pid: int, env: dict[str, str], **stat: int) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    (d / "stat").write_text(_stat(pid, "py (worker) 1", **stat))


def _sampler(run: Path, fake_proc: Path) -> subprocess.CompletedProcess[str]:
    argv = ["--once", "--run-dir", str(run), "--proc-root", str(fake_proc)]
    return subprocess.run(
        [sys.executable, "-m", "ddp_tui.telemetry", *argv],
        env=sampler_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_or_unreadable_proc_is_a_note_and_exit_0(tmp_path: Path) -> None:
    run = tmp_path / "run"
    missing = tmp_path / "fake_proc_missing"
    unreadable = tmp_path / "fake_proc_a_file"  # root reads any directory: a file cannot be
    unreadable.write_text("")
    for fake_proc in (missing, unreadable):
        done = _sampler(run, fake_proc)
        assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in (run / telemetry_file(0)).read_text().splitlines()]
    # (On a machine with GPUs there are gpu lines, and perhaps notes about them, too.)
    proc_lines = [x for x in lines if x["kind"] == "start" or "cannot read" in x.get("message", "")]
    assert [x["kind"] for x in proc_lines] == ["start", "note", "start", "note"]
    notes = [x["message"] for x in proc_lines if x["kind"] == "note"]
    assert notes[0].startswith(f"cannot read {missing}:")
    assert notes[1].startswith(f"cannot read {unreadable}:")


def test_an_unwritable_run_directory_is_exit_0(tmp_path: Path) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("")  # the run directory is a file: no telemetry/ under it
    done = _sampler(blocker, tmp_path / "fake_proc_missing")
    assert done.returncode == 0


def test_bad_arguments_are_exit_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ddp_tui.telemetry", "--interval", "soon"],
        env=sampler_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert "--run-dir" in done.stderr


def test_parse_stat_counts_fields_after_the_last_parenthesis() -> None:
    stat = parse_stat(_stat(7, "a) (b c", ticks=300, start=1234, rss_pages=99))
    assert (stat.cpu_ticks, stat.start_ticks, stat.rss_pages) == (300, 1234, 99)


def test_cpu_share_from_deltas_per_process_never_negative(tmp_path: Path) -> None:
    fake_proc = tmp_path / "fake_proc"
    job = {"DDP_TUI_RUN_DIR": "/runs/r", "RANK": "0"}
    _fake_process(fake_proc, 100, job, ticks=10 * HZ, start=50, rss_pages=256)
    _fake_process(fake_proc, 101, {"DDP_TUI_RUN_DIR": "/runs/other"}, ticks=0, start=1, rss_pages=1)
    (fake_proc / "102").mkdir()  # a process that went away mid-scan: no files
    (fake_proc / "self").mkdir()  # not a pid
    now = [1000.0]
    scanner = ProcScanner("/runs/r", proc_root=str(fake_proc), monotonic=lambda: now[0])
    first = scanner.sample()
    assert (first.procs, first.cpu_pct, first.ranks) == (1, None, (0,))
    assert first.rss_mib == round(256 * PAGE / 2**20, 1)

    # Two seconds later the rank used one more CPU second: 50 % of one core.
    _fake_process(fake_proc, 100, job, ticks=11 * HZ, start=50, rss_pages=256)
    now[0] += 2.0
    assert scanner.sample().cpu_pct == 50.0

    # Pid 100 exits and the pid is reused by a new job process with fewer ticks: the old
    # process's ticks are never subtracted.
    _fake_process(fake_proc, 100, job, ticks=2, start=60, rss_pages=10)
    now[0] += 2.0
    again = scanner.sample()
    assert again.procs == 1 and again.cpu_pct is not None and again.cpu_pct >= 0.0

    # The reused pid is no longer the job's: its environ is read afresh.
    other = {"DDP_TUI_RUN_DIR": "/runs/other"}
    _fake_process(fake_proc, 100, other, ticks=5, start=70, rss_pages=1)
    now[0] += 2.0
    assert scanner.sample().procs == 0


def test_the_caches_hold_only_live_pids(tmp_path: Path) -> None:
    fake_proc = tmp_path / "fake_proc"
    scanner = ProcScanner("/runs/r", proc_root=str(fake_proc))
    for pid in range(200, 230):
        _fake_process(fake_proc, pid, {"DDP_TUI_RUN_DIR": "/runs/r"}, ticks=1, start=1, rss_pages=1)
    assert scanner.sample().procs == 30
    for pid in range(200, 229):
        for f in (fake_proc / str(pid)).iterdir():
            f.unlink()
        (fake_proc / str(pid)).rmdir()
    assert scanner.sample().procs == 1
    assert list(scanner._known) == [229] and len(scanner._ticks) == 1
