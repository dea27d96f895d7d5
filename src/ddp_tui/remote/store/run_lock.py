"""One submitter at a time per run directory: the ``.submit.lock`` directory.

Two app instances and the CLI may press retry on one run within a second; without a lock
each reads "attempt 2 ended", and each submits attempt 3. The lock is a directory made with
``mkdir(2)``, which fails when the directory exists. That one system call is atomic on local
filesystems and on NFS (the server decides), needs nothing running on the cluster, and works
the same through SFTP as on the login node. ``flock`` was not chosen: on NFS it depends on
the client's lock daemon, and over SSH it would need a process on the far side to hold it.

The directory holds ``owner.json`` (host, pid, time, token). A lock whose owner is gone is
broken by the next taker: on the same host when its pid no longer runs, from anywhere once
it is older than :data:`STALE_SEC`. No submit holds the lock that long; a crash (``kill -9``
between the intent and the job id) is what leaves one behind.

A job array submits for many runs at once and holds all their locks (:class:`RunLocks`):
taken in the order of their paths, so that two takers of overlapping sets never wait on each
other, in one round trip while none is held, and given back together. A refresh's intent
reconciler only ever *tries* a lock (:meth:`RunLock.try_acquire`) and leaves a held run
alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.local.processes import pid_alive
from ddp_tui.remote.store.runs import RunRef, RunStoreError

LOCK_DIR = ".submit.lock"
OWNER_FILE = "owner.json"
#: After this long a lock is broken whoever holds it: a submit takes seconds, and a lost
#: answer is chased for at most a minute
#: (:data:`ddp_tui.remote.submit.submission.RECOVER_SUBMIT_SEC`).
STALE_SEC = 300.0
#: A lock without an owner file (its maker died between mkdir and the write) counts as
#: stale after this long.
OWNERLESS_SEC = 30.0
#: How long a taker waits for the lock before it gives up.
WAIT_SEC = 30.0


# One round trip: mkdir fails when another holds the lock (told apart from a read-only or
# vanished directory by its message, in the C locale); the owner file follows.
_HELD = 3
_MKDIR = (
    'if out=$(LC_ALL=C mkdir -- "$1" 2>&1); then printf %s "$2" > "$1/owner.json"; exit; fi; '
    'case $out in *"File exists"*) exit 3;; esac; echo "$out" >&2; exit 1'
)


class RunLocked(RunStoreError):
    """Another live process is submitting this run."""

    title = "Run busy"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    at: float
    token: str

    def describe(self) -> str:
        age = max(0.0, time.time() - self.at)
        return f"process {self.pid} on {self.host} (for {age:.0f} s)"


def _owner_of(data: bytes) -> Owner | None:
    try:
        doc: Any = json.loads(data.decode("utf-8", "replace"))
        return Owner(str(doc["host"]), int(doc["pid"]), float(doc["at"]), str(doc["token"]))
    except (ValueError, KeyError, TypeError):
        return None


class RunLock:
    """The submit lock of one run directory (a context manager via :meth:`held`)."""

    def __init__(
        self,
        executor: Executor,
        ref: RunRef,
        *,
        wait_sec: float = WAIT_SEC,
        token: str | None = None,
    ) -> None:
        self.executor = executor
        self.ref = ref
        self.path = ref.file(LOCK_DIR)
        self.wait_sec = wait_sec
        self.token = token or secrets.token_hex(8)
        self.host = socket.gethostname()

    def owner_doc(self) -> str:
        """What ``owner.json`` says while this lock is held."""
        return json.dumps(
            {"host": self.host, "pid": os.getpid(), "at": time.time(), "token": self.token}
        )

    def owner(self) -> Owner | None:
        """Who holds the lock now (None: nobody, or an owner that wrote nothing yet)."""
        try:
            return _owner_of(self.executor.read_range(f"{self.path}/{OWNER_FILE}"))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, ExecutorError):
            return None

    def _mkdir(self) -> bool:
        """Make the lock directory: True when made, False when it exists (held)."""
        res = self.executor.run(["sh", "-c", _MKDIR, "sh", self.path, self.owner_doc()], timeout=30)
        if res.returncode == _HELD:
            return False
        if not res.ok:
            # Not "exists": the run directory is read-only, full, or gone.
            why = res.stderr.strip().rpartition(": ")[2] or f"exit {res.returncode}"
            raise RunStoreError(
                f"cannot lock {self.ref.run_id} for a submit in {self.ref.path}: {why}; "
                "nothing was submitted"
            )
        return True

    def try_acquire(self) -> bool:
        """Take the lock if it is free or stale; never waits."""
        if self._mkdir():
            return True
        st = self.executor.stat(self.path)
        if st is None:
            return self._mkdir()  # released meanwhile
        if self._stale(st.mtime):
            self._break()
            return self._mkdir()
        return False

    def _stale(self, mtime: float) -> bool:
        owner = self.owner()
        if owner is None:
            return time.time() - mtime > OWNERLESS_SEC
        if owner.host == self.host and not pid_alive(owner.pid, None):
            return True
        return time.time() - owner.at > STALE_SEC

    def _break(self) -> None:
        # Renamed away first, so that two breakers cannot both remove a lock that a third
        # process has just taken: only one rename of the stale directory succeeds.
        aside = f"{self.path}.stale-{self.token}"
        try:
            self.executor.rename(self.path, aside)
        except (OSError, ExecutorError):
            return
        self.executor.remove_tree(aside)

    def acquire(self) -> None:
        """Wait up to ``wait_sec`` for the lock; :class:`RunLocked` names the holder."""
        deadline = time.monotonic() + self.wait_sec
        delay = 0.05
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                owner = self.owner()
                who = owner.describe() if owner else "another process"
                raise RunLocked(
                    f"{self.ref.run_id} is being submitted by {who}; nothing was submitted. "
                    f"If no ddp-tui runs there, remove {self.path}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def release(self) -> None:
        owner = self.owner()
        if owner is not None and owner.token != self.token:
            return  # ours was broken as stale and another holds it now: leave theirs
        with contextlib.suppress(OSError, ExecutorError):
            self.executor.remove_tree(self.path)

    @contextlib.contextmanager
    def held(self) -> Iterator[RunLock]:
        self.acquire()
        try:
            yield self
        finally:
            self.release()


# Takes the locks $2... in order, each with its owner file $1, until one cannot be made (held,
# or the directory refuses it); prints how many it took. A lock whose owner file could not be
# written is removed again, so that one taken is always one owned.
_MKDIR_MANY = (
    'doc=$1; shift; n=0; for p do LC_ALL=C mkdir -- "$p" 2>/dev/null || break; '
    'if ! printf %s "$doc" 2>/dev/null > "$p/owner.json"; then rm -rf -- "$p"; break; fi; '
    "n=$((n+1)); done; echo $n"
)
# Removes each of the locks $2... whose owner file names the token $1: never another's.
_RELEASE_MANY = (
    'tok=$1; shift; for p do case $(cat -- "$p/owner.json" 2>/dev/null) in *"$tok"*) '
    'rm -rf -- "$p";; esac; done'
)
#: At most this many locks per command line (a sweep of thousands stays under ARG_MAX).
_PER_CALL = 256


class RunLocks:
    """The submit locks of several runs, held together (a job array's members).

    They are taken in the order of their paths: two takers of overlapping sets then never
    hold one each of two locks the other waits for. The free ones are taken in one round
    trip; a held one is waited for (or broken when stale) as :class:`RunLock` does, then
    the rest follow. All share one token, and are given back in one round trip, also when
    taking them failed halfway."""

    def __init__(
        self, executor: Executor, refs: Sequence[RunRef], *, wait_sec: float = WAIT_SEC
    ) -> None:
        self.executor = executor
        token = secrets.token_hex(8)
        by_path = {r.path: r for r in refs}
        self.locks = [
            RunLock(executor, by_path[p], wait_sec=wait_sec, token=token) for p in sorted(by_path)
        ]
        self.token = token

    def acquire(self) -> None:
        """Take every lock, waiting up to ``wait_sec`` for each one held
        (:class:`RunLocked` names its holder); on any failure none is kept."""
        taken = 0
        try:
            while taken < len(self.locks):
                chunk = self.locks[taken : taken + _PER_CALL]
                got = self._take_free(chunk)
                taken += got
                if got < len(chunk):  # held, stale, or refused: as one lock is taken
                    self.locks[taken].acquire()
                    taken += 1
        except BaseException:
            self.release()
            raise

    def _take_free(self, locks: Sequence[RunLock]) -> int:
        """Take ``locks`` in order up to the first that cannot be taken at once; how many."""
        doc = locks[0].owner_doc()
        res = self.executor.run(
            ["sh", "-c", _MKDIR_MANY, "sh", doc, *(lock.path for lock in locks)], timeout=30
        )
        try:
            return int(res.stdout.strip() or 0) if res.ok else 0
        except ValueError:
            return 0

    def release(self) -> None:
        """Give back every lock of the set still held under this set's token."""
        for i in range(0, len(self.locks), _PER_CALL):
            paths = [lock.path for lock in self.locks[i : i + _PER_CALL]]
            with contextlib.suppress(OSError, ExecutorError):
                self.executor.run(["sh", "-c", _RELEASE_MANY, "sh", self.token, *paths], timeout=30)

    @contextlib.contextmanager
    def held(self) -> Iterator[RunLocks]:
        self.acquire()
        try:
            yield self
        finally:
            self.release()
