"""Rules for a process that crashed: killed by a signal, or any other Python exception.

These come last: a signal or a traceback is what most failures end with, so the more
specific rules (out of memory, NCCL, a missing module) must have had their say first.
"""

from __future__ import annotations

import os
import signal

from ddp_tui.diagnosis.logscan import Hit, Line, Scan, clue
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import clip, make, scheduler_evidence
from ddp_tui.diagnosis.tracebacks import Traceback, tracebacks, user_frame

# What shells, srun and Python print for a process killed by a signal:
#   "line 40: 1234 Segmentation fault      (core dumped) python ..."  (bash)
#   "srun: error: n1: task 0: Segmentation fault (core dumped)"        (srun)
#   "Fatal Python error: Segmentation fault"                            (faulthandler)
_SIGNAL_WORDS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Illegal instruction": "SIGILL",
    "Floating point exception": "SIGFPE",
    "Killed": "SIGKILL",
}
_SIGNAL_LINE = clue(
    r"(?:^|: |\b\d+ |Fatal Python error: )"
    r"(?P<word>Segmentation fault|Aborted|Bus error|Illegal instruction"
    r"|Floating point exception|Killed)(?: +\(core dumped\))?(?=\s|\.|$)",
    *_SIGNAL_WORDS,
)
# E1124 ... api.py:1002] failed (exitcode: -11) local_rank: 1 (pid: 16855) of binary: ...
_TORCHRUN_FAILED = clue(
    r"failed \(exitcode: (?P<code>-\d+)\) local_rank: (?P<local>\d+)", "failed (exitcode: -"
)
_TERMINATE = clue(
    r"terminate called after throwing an instance of '(?P<what>[^']+)'", "terminate called"
)
# A std::thread destroyed while joinable: in a finished gloo job, its teardown at exit.
_TERMINATE_AT_EXIT = clue(
    r"terminate called without an active exception", "terminate called without an active"
)
# The job script's own last words (sbatch_templates/_job.sbatch.j2).
_LAUNCHER_STATUS = clue(
    r"^\[ddp-tui\] launcher exited with status (?P<status>\d+)", "launcher exited with status"
)
#: Exit codes above 128 that mean "killed by signal N" (shells and the local scheduler).
_CRASH_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGKILL", "SIGTERM")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _advice(name: str) -> str:
    if name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"):
        bus = (
            " A bus error in data-loader workers often means /dev/shm is too small: use fewer "
            "workers."
            if name == "SIGBUS"
            else ""
        )
        return (
            "A crash in native code (a C/C++/CUDA extension, mismatched library builds, or "
            "memory corruption): check that torch, CUDA and compiled extensions match, and "
            "add `export PYTHONFAULTHANDLER=1` to env_setup to see the Python stack on the "
            f"next run.{bus}"
        )
    if name == "SIGABRT":
        return (
            "The process aborted (a C++ exception or a failed assertion): the lines just "
            "before it in the log say which."
        )
    if name == "SIGKILL":
        return (
            "SIGKILL usually comes from the host's OOM killer (ask for more mem, use fewer "
            "workers) or from the scheduler enforcing a limit."
        )
    return "It was stopped from outside (scancel --signal, or the node shutting down)."


def _signal_diagnosis(
    name: str, who: str, evidence: list[Hit | Line | Evidence | None], scan: Scan | None = None
) -> Diagnosis:
    """The diagnosis for signal ``name``; with ``scan``, C++'s last words where it aborted."""
    terminate = scan.find(_TERMINATE) if scan is not None else None
    at_exit = scan.find(_TERMINATE_AT_EXIT) if scan is not None and name == "SIGABRT" else None
    if at_exit is not None and terminate is None:
        return make(
            "signal",
            "aborted at exit (gloo)",
            f"{who or 'A process'} was killed by SIGABRT: 'terminate called without an "
            "active exception', which is how gloo's threads die when a finished job tears "
            "the process group down at exit (torch 2.x; about 1 run in 3 for a small job).",
            "If training had finished, the results are good and a retry runs the same way; "
            "to stop it, end the script by flushing stdout and stderr and calling "
            "os._exit(0) after the last barrier, instead of destroy_process_group() and "
            "returning (ddp-tui's own trainer ends so).",
            [*evidence, at_exit],
        )
    after = f", after an uncaught C++ exception {terminate.group('what')}" if terminate else ""
    return make(
        "signal",
        f"killed by {name}",
        f"{who or 'A process'} was killed by {name}{after}.",
        _advice(name),
        [*evidence, terminate],
    )


def signal_in_log(scan: Scan) -> Diagnosis | None:
    """torchrun's root cause with a negative exit code, or a shell's signal line."""
    root = scan.root
    if root is not None and root.exitcode is not None and root.exitcode < 0:
        name = root.signal or _signal_name(-root.exitcode)
        who = f"Rank {root.rank}" if root.rank is not None else "A rank"
        who += f" on {root.host}" if root.host and root.host != "localhost" else ""
        return _signal_diagnosis(name, who, list(root.lines), scan)
    hit = scan.find(_TORCHRUN_FAILED)
    if hit is not None:
        name = _signal_name(-int(hit.group("code")))
        return _signal_diagnosis(name, f"Local rank {hit.group('local')}", [hit], scan)
    hit = scan.find(_SIGNAL_LINE)
    if hit is not None:
        name = _SIGNAL_WORDS.get(hit.group("word"), "a signal")
        return _signal_diagnosis(name, "", [hit], scan)
    return None


def _chosen(scan: Scan) -> Traceback | None:
    """The first complete traceback that is not torchrun's own summary.

    :class:`~ddp_tui.diagnosis.logscan.Scan` already left out other ranks' lines where
    torchrun named the first failure, so "first" is that rank's.
    """
    for tb in tracebacks(scan):
        if not tb.is_launcher and tb.exception is not None:
            return tb
    return None


def python_exception(scan: Scan) -> Diagnosis | None:
    tb = _chosen(scan)
    if tb is None or tb.exception is None:
        return None
    exc = tb.exception_text
    kind = tb.exception_type
    message = exc.split(":", 1)[1].strip() if ":" in exc else ""
    frame = user_frame(tb, scan.facts)
    who = f"Rank {tb.rank}" if tb.rank is not None else "The run"
    where = ""
    if frame is not None:
        where = f" in {frame.func}() at {frame.where}"
    cause = f"{who} raised {kind}{': ' + message if message else ''}{where}."
    if frame is not None:
        advice = (
            f"Fix the error at {os.path.basename(frame.file)}:{frame.line} (the innermost "
            "frame in your own code); the full traceback is in the log."
        )
    else:
        advice = (
            f"Read the full traceback in {tb.header.log.name}; no frame of it is in your "
            "own code, so look at how it is called (arguments, data, versions)."
        )
    return make(
        "python-exception",
        clip(f"{kind}: {message}" if message else kind),
        cause,
        advice,
        [tb.exception, frame.src if frame is not None else None],
    )


def signal_from_exit(scan: Scan) -> Diagnosis | None:
    """Exit status 128+N and nothing else in the logs: the job script's last line or the
    scheduler's exit code says which signal."""
    hit = scan.find(_LAUNCHER_STATUS)
    code = int(hit.group("status")) if hit else scan.facts.exit_code
    if code is None or not 128 < code < 160:
        return None
    name = _signal_name(code - 128)
    if name not in _CRASH_SIGNALS:
        return None
    who = "The launcher (srun or torchrun)" if hit else "The job's main process"
    return _signal_diagnosis(name, who, [hit or scheduler_evidence(scan)])
