"""How a trainer process ends: flush everything, then ``os._exit`` with a meaningful code.

Why: a finished 2-rank gloo run (every epoch trained, every file written, weights identical on
all ranks) sometimes lost a rank to ``terminate called without an active exception`` (SIGABRT)
on the way out, and torchrun then reported the whole run FAILED. The abort comes from tearing
gloo down: ``destroy_process_group()`` and the interpreter's exit (module teardown, C++ static
destructors) destroy gloo's contexts and transport while its threads are still joinable, and a
``std::thread`` destroyed while joinable calls ``std::terminate``. A plain tutorial DDP loop that
calls ``destroy_process_group()`` and returns aborts the same way (see
``benchmarks/bench_clean_exit.py``).

So a process started from the command line (``python -m ddp_tui.trainer``, the ``ddp-train``
script, ``python -m ddp_tui.trainer.preflight``) runs its main through :func:`run_process`:

1. :func:`ending_process` becomes true, and :func:`~.distributed.close_world` then leaves the
   process group alone: destroying it is itself one of the places that abort, and the kernel
   closes its sockets when the process ends anyway;
2. the outcome becomes an exit code: main's return value (0 done, 3 requeue, 2 usage, 1
   failure), ``SystemExit``'s code, or for an uncaught exception its traceback on stderr and 1;
3. :func:`end_process` runs the atexit handlers (data-loader workers, ``multiprocessing``
   children, logging), flushes ``sys.stdout`` and ``sys.stderr``, and calls ``os._exit``, which
   skips interpreter teardown and C++ static destructors: where gloo aborts.

Neither step may hang or be skipped when the job's log cannot be written (its disk is full):
what goes to stderr on the way out is best effort, and the data-loader workers, which ignore
SIGTERM (``data._quiet_worker``), are killed before the atexit handlers, whose
``multiprocessing`` clean-up would otherwise terminate them with that SIGTERM and wait for
them forever. That wait held a failed rank, and with it the job, RUNNING long after the failure.

Main must therefore have written, flushed and closed every file before it returns (metrics.csv,
progress.jsonl, run.json, checkpoints); the ranks' final barrier makes sure no rank is still
talking to a peer that ends. Code that calls a main in-process (tests) passes an argv list and
gets the exit code back: it never reaches :func:`end_process`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from . import EXIT_FAILURE

_ending = False


def ending_process() -> bool:
    """True once :func:`run_process` runs: the process ends with ``os._exit``, teardown skipped."""
    return _ending


def exit_code(exc: SystemExit) -> int:
    """The process exit code Python gives a ``SystemExit``: None -> 0, int as is, else 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    say(str(code))  # sys.exit("message"): Python prints it and exits 1
    return EXIT_FAILURE


def say(text: str) -> None:
    """One line to stderr, best effort: a full disk under the job's log must not turn the
    way out into a second failure."""
    with contextlib.suppress(Exception):
        print(text, file=sys.stderr, flush=True)


def _print_traceback() -> None:
    with contextlib.suppress(Exception):  # see say()
        traceback.print_exc()


def run_process(main: Callable[[], int]) -> NoReturn:
    """Run a command-line entry point's ``main`` and end the process with its exit code."""
    global _ending
    _ending = True
    try:
        code = main()
    except SystemExit as exc:
        code = exit_code(exc)
    except KeyboardInterrupt:
        _print_traceback()
        code = 128 + signal.SIGINT
    except BaseException:  # a real failure: the traceback, then a non-zero exit
        _print_traceback()
        code = EXIT_FAILURE
    end_process(code)


def end_process(code: int) -> NoReturn:
    """Run the atexit handlers, flush the standard streams, then ``os._exit(code)``.

    The atexit handlers are Python's own clean-up (persistent data-loader workers shut down,
    ``multiprocessing`` children joined, logging flushed); what ``os._exit`` skips is the rest of
    a normal exit: interpreter teardown and C++ static destructors, where gloo aborts.
    Daemonic ``multiprocessing`` children (data-loader workers) are killed first: see above.
    """
    _kill_daemonic_children()
    atexit._run_exitfuncs()  # prints, and goes past, a handler's exception
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def _kill_daemonic_children() -> None:
    """SIGKILL this process's daemonic ``multiprocessing`` children, and reap them."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    with contextlib.suppress(Exception):  # on the way out: nothing here may stop the exit
        children = [p for p in mp.active_children() if p.daemon]
        for child in children:
            child.kill()
        for child in children:
            child.join(timeout=5)
