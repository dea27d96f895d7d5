"""A run's jobs.jsonl (the journal) and the submit locks that guard its intents: what the
lines say together, lines that never glue to a torn one, locks taken together in path
order, given back whatever happened, and a refresh that leaves a locked run alone.
Real files, a real local scheduler's state directory; no job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.store.journal import (
    Journal,
    attempt_record,
    fold,
    intent_record,
    void_record,
)
from ddp_tui.remote.store.run_jobs import IntentReconciler
from ddp_tui.remote.store.run_lock import LOCK_DIR, RunLock, RunLocked, RunLocks
from ddp_tui.remote.store.runs import RunRef, RunStore, RunStoreError


def test_fold_says_which_intents_still_wait_for_their_answer() -> None:
    answered, voided = intent_record(1, None), intent_record(1, None)
    waiting = intent_record(2, "7")
    attempt = {**attempt_record("7", "local", None, 1), "intent": answered["token"]}
    lines = fold(
        [
            answered,
            attempt,
            voided,
            void_record(voided["token"]),
            {"event": "end", "job_id": "7", "state": "LOST", "scope": "slurm:a"},
            {"event": "end", "job_id": "7", "state": "FAILED"},  # a real end wins over LOST
            waiting,
            {"event": "something-newer", "token": waiting["token"]},  # answers nothing
        ]
    )
    assert lines.job_ids == ["7"] and lines.attempts == [attempt]
    assert lines.ends["7"]["state"] == "FAILED"
    assert lines.pending == [waiting]


def test_a_line_never_lands_glued_to_a_torn_one(tmp_path: Path) -> None:
    journal = Journal(LocalExecutor(), str(tmp_path))
    Path(journal.path).write_text('{"job_id":"1","sched')  # a writer killed mid-line
    journal.append(attempt_record("2", "local", None, 1))
    journal.append(void_record("ab"))
    assert [r.get("job_id") for r in journal.read()] == ["2", None]
    assert Path(journal.path).read_text().endswith("\n")


def _refs(tmp_path: Path, n: int) -> list[RunRef]:
    refs = []
    for i in range(n):
        (tmp_path / f"run-{i}").mkdir()
        refs.append(RunRef(f"run-{i}", str(tmp_path / f"run-{i}")))
    return refs


def test_locks_are_taken_together_and_given_back_only_when_ours(tmp_path: Path) -> None:
    ex = LocalExecutor()
    refs = _refs(tmp_path, 3)
    locks = RunLocks(ex, list(reversed(refs)))
    assert [lock.ref for lock in locks.locks] == refs  # path order, whatever the caller's
    with locks.held():
        owners = [json.loads(Path(r.file(LOCK_DIR), "owner.json").read_text()) for r in refs]
        assert {o["token"] for o in owners} == {locks.token}
        assert not RunLock(ex, refs[1], wait_sec=0).try_acquire()  # a live holder: held
    assert not any(Path(r.file(LOCK_DIR)).exists() for r in refs)


def test_a_held_lock_stops_the_set_and_none_of_it_is_kept(tmp_path: Path) -> None:
    ex = LocalExecutor()
    refs = _refs(tmp_path, 3)
    other = RunLock(ex, refs[1])
    assert other.try_acquire()
    with pytest.raises(RunLocked, match="run-1 is being submitted by process"):
        RunLocks(ex, refs, wait_sec=0).acquire()
    assert not Path(refs[0].file(LOCK_DIR)).exists()  # taken before the held one, given back
    owner = other.owner()
    assert owner is not None and owner.token == other.token  # theirs stays
    other.release()


def test_a_run_directory_that_refuses_the_lock_says_why(tmp_path: Path) -> None:
    refs = _refs(tmp_path, 2)
    Path(refs[1].file(LOCK_DIR)).parent.rmdir()  # the second run's directory is gone
    with pytest.raises(RunStoreError, match="cannot lock run-1 for a submit in"):
        RunLocks(LocalExecutor(), refs, wait_sec=0).acquire()
    assert not Path(refs[0].file(LOCK_DIR)).exists()


def test_a_refresh_leaves_an_intent_alone_while_its_submit_holds_the_lock(
    tmp_path: Path,
) -> None:
    ex = LocalExecutor()
    store = RunStore(ex, str(tmp_path / "runs"))
    ref = store.create_run({"name": "r"}, "r", "#!/bin/bash\n")
    scheduler = LocalScheduler(tmp_path / "state")  # no job: an intent it voids at once
    intent = intent_record(1, None)
    with RunLocks(ex, [ref]).held():
        store.journal(ref).append(intent)
        assert IntentReconciler(scheduler, store).reconcile(ref) is False
        assert fold(store.journal(ref).read()).pending == [intent]
    # Its submitter gone without an answer, the next refresh voids it.
    assert IntentReconciler(scheduler, store).reconcile(ref) is True
    last = store.journal(ref).read()[-1]
    assert (last["event"], last["token"]) == ("intent_void", intent["token"])
