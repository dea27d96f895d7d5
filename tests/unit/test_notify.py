"""Notifications: the escape sequences (pure), the exactly-once claim (real mkdir, real
threads), and recovery from a recorder that died between its end line and its claim (a real
facade over the local scheduler and real run directories)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.cli.watch import exit_status
from ddp_tui.config import Profile
from ddp_tui.diagnosis.stall import Stall
from ddp_tui.notify_delivery import (
    NotifyCommand,
    desktop_sequence,
    event_json,
    osc9,
    osc777,
    pick_osc,
    sanitize,
    tmux_wrap,
)
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.events import GROUP_FINISHED, RUN_END, RUN_STALLED, NotifyEvent
from ddp_tui.remote.runs.reactions.notify import GROUP_CLAIMS, Notifier
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.spec import ExperimentSpec

ESC, BEL = "\x1b", "\x07"

# -- the terminal's sequences -------------------------------------------------------------


def test_osc9_and_osc777_carry_the_text_between_their_fences() -> None:
    assert osc9("run ok") == f"{ESC}]9;run ok{BEL}"
    assert osc777("ddp-tui: a", "exit 0") == f"{ESC}]777;notify;ddp-tui: a;exit 0{BEL}"


def test_text_can_never_end_the_sequence_early_or_add_a_field() -> None:
    evil = f"a{ESC}]0;title{BEL}b\nc;d\x9cE"
    seq = osc777(evil, evil)
    body = seq[len(f"{ESC}]777;notify;") : -1]
    assert ESC not in body and BEL not in body and "\n" not in body and "\x9c" not in body
    assert body.count(";") == 1  # only the separator between title and body
    assert ";" in sanitize("c;d") and ";" not in sanitize("c;d", field=True)
    assert len(sanitize("x" * 1000)) == 200


def test_tmux_passthrough_doubles_every_inner_escape() -> None:
    seq = osc9("hi")
    wrapped = tmux_wrap(seq)
    assert wrapped == f"{ESC}Ptmux;{ESC}{ESC}]9;hi{BEL}{ESC}\\"
    # Inside the wrapper every ESC comes in pairs: tmux would end the passthrough at a lone one.
    inner = wrapped[len(f"{ESC}Ptmux;") : -2]
    assert inner.replace(ESC + ESC, "").count(ESC) == 0


@pytest.mark.parametrize(
    ("mode", "env", "kind"),
    [
        ("auto", {"TERM_PROGRAM": "iTerm.app"}, "osc9"),
        ("auto", {"TERM_PROGRAM": "WezTerm"}, "osc9"),
        ("auto", {"TERM_PROGRAM": "ghostty"}, "osc9"),
        ("auto", {"VTE_VERSION": "7600", "TERM": "xterm-256color"}, "osc777"),
        ("auto", {"TERM": "foot"}, "osc777"),
        ("auto", {"TERM": "xterm-256color"}, None),
        ("auto", {}, None),
        ("osc9", {}, "osc9"),
        ("osc777", {"TERM_PROGRAM": "iTerm.app"}, "osc777"),
        ("off", {"TERM_PROGRAM": "iTerm.app"}, None),
    ],
)
def test_auto_picks_the_sequence_by_terminal(
    mode: str, env: dict[str, str], kind: str | None
) -> None:
    assert pick_osc(mode, env) == kind


def test_desktop_sequence_is_wrapped_under_tmux_only() -> None:
    plain = desktop_sequence("t", "b", "osc777", {})
    assert plain == osc777("t", "b")
    assert desktop_sequence("t", "b", "osc777", {"TMUX": "/tmp/tmux-1/default,1,0"}) == (
        tmux_wrap(osc777("t", "b"))
    )
    assert desktop_sequence("t", "b", "off", {"TMUX": "x"}) is None


def test_event_json_is_one_object_with_the_promised_fields() -> None:
    event = NotifyEvent(
        kind=RUN_END,
        claim="/r/notified/7.end",
        name="bert",
        state="FAILED",
        time="2026-01-01T00:00:00+00:00",
        run_id="20260101-000000-bert-abcd",
        job_id="7",
        exit_code=1,
        diagnosis="cuda out of memory",
        group="g",
        elapsed_sec=61.0,
    )
    raw = event_json(event)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    doc = json.loads(raw)
    for key in ("run_id", "name", "state", "exit_code", "diagnosis", "group", "elapsed_sec"):
        assert key in doc
    assert (doc["event"], doc["job_id"], doc["exit_code"]) == ("run_end", "7", 1)
    assert event.title == "ddp-tui: bert FAILED" and "exit 1" in event.body


def test_watch_exit_status_is_the_worst_end() -> None:
    assert exit_status(["COMPLETED", "COMPLETED"]) == 0
    assert exit_status(["COMPLETED", "CANCELLED"]) == 3
    assert exit_status(["CANCELLED", "FAILED"]) == 1
    assert exit_status(["TIMEOUT"]) == 1 and exit_status(["LOST"]) == 1


def test_a_failing_or_hanging_notify_command_is_reported_not_raised(tmp_path: Path) -> None:
    errors: list[str] = []
    event = NotifyEvent(kind=RUN_END, claim="c", name="r", state="COMPLETED", time="t")
    NotifyCommand("echo nope >&2; exit 4", on_error=errors.append).send(event)
    slow = NotifyCommand("sleep 30", on_error=errors.append, timeout_sec=0.5)
    slow.send(event)
    assert slow.wait(10)
    got = tmp_path / "got.json"
    ok = NotifyCommand(f"cat > {got}", on_error=errors.append)
    ok.send(event)
    assert ok.wait(10)
    assert json.loads(got.read_text())["name"] == "r"
    deadline = 100
    while len(errors) < 2 and deadline:  # the failing one's thread reports on its own
        threading.Event().wait(0.1)
        deadline -= 1
    assert sorted(errors) == [
        "notify_command for r COMPLETED: exit 4: nope",
        "notify_command for r COMPLETED: killed after 0.5 s",
    ]


# -- claims over real run directories -------------------------------------------------------


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


NOW = datetime.now(timezone.utc)


def _store(tmp_path: Path) -> RunStore:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True)
    (code / "__init__.py").write_text("")
    (code / "trainer" / "__init__.py").write_text("")
    return RunStore(LocalExecutor(), str(tmp_path / "runs"), code_source=code)


def _ended_run(
    store: RunStore,
    name: str,
    *,
    group: str | None = None,
    job_id: str = "1",
    state: str = "COMPLETED",
    recorded: datetime = NOW,
) -> RunRef:
    """A run whose job ended and whose end line is in jobs.jsonl, but nobody claimed its
    notification: what a recorder killed between its append and its claim leaves."""
    spec = ExperimentSpec(name=name, model="mlp", device="cpu", backend="gloo")
    ref = store.create_run(spec.to_dict(), name, "#!/bin/bash\n", group=group)
    _attempt(store, ref, job_id, state, recorded)
    return ref


def _attempt(store: RunStore, ref: RunRef, job_id: str, state: str, recorded: datetime) -> None:
    store.append_job(ref, {"job_id": job_id, "scheduler": "local", "submitted_at": _iso(recorded)})
    end: dict[str, Any] = {
        "event": "end",
        "job_id": job_id,
        "state": state,
        "raw_state": state,
        "exit_code": 0 if state == "COMPLETED" else 1,
        "elapsed_sec": 12.0,
        "recorded_at": _iso(recorded),
    }
    store.append_job(ref, end)


def _open(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", check_python=False)
    return Cluster.open(profile, runs_root=str(tmp_path / "runs"))


def _events(cluster: Cluster) -> list[NotifyEvent]:
    """Everything one process would send from two refreshes and its exit."""
    got = list(cluster.refresh().events) + list(cluster.refresh().events)
    late = cluster.take_events(final=True)
    assert set(got) <= set(late)  # the CLI's view holds what the snapshots carried
    return late


def test_an_unclaimed_recent_end_is_sent_once_by_the_next_refresher(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ok = _ended_run(store, "ok")
    _ended_run(store, "bad", state="FAILED", job_id="2")
    _ended_run(store, "old", job_id="3", recorded=NOW - timedelta(hours=2))
    first = _open(tmp_path)
    try:
        events = _events(first)
    finally:
        first.close()
    assert sorted((e.kind, e.name, e.state) for e in events) == [
        (RUN_END, "bad", "FAILED"),
        (RUN_END, "ok", "COMPLETED"),
    ]  # never the end recorded two hours ago
    assert (Path(ok.path) / "notified" / "1.end" / "by").is_file()
    # Another process (a second app, a CLI) sees the same ends: claimed, so nothing.
    second = _open(tmp_path)
    try:
        assert _events(second) == []
    finally:
        second.close()


def test_a_group_finishes_once_per_set_of_ends_and_again_after_a_retry(tmp_path: Path) -> None:
    store = _store(tmp_path)
    a = _ended_run(store, "a", group="sweep", job_id="1")
    _ended_run(store, "b", group="sweep", job_id="2", state="FAILED")
    cluster = _open(tmp_path)
    try:
        groups = [e for e in _events(cluster) if e.kind == GROUP_FINISHED]
        assert [(g.name, g.state, len(g.runs)) for g in groups] == [("sweep", "FAILED", 2)]
        assert groups[0].summary == "2 runs: 1 COMPLETED, 1 FAILED"
        assert len(list((tmp_path / "runs" / GROUP_CLAIMS).iterdir())) == 1
        # A retry of one member that ends again: the group finished anew.
        _attempt(store, a, "3", "COMPLETED", datetime.now(timezone.utc))
        again = _events(cluster)
        assert sorted(e.kind for e in again) == [GROUP_FINISHED, RUN_END]
    finally:
        cluster.close()
    assert len(list((tmp_path / "runs" / GROUP_CLAIMS).iterdir())) == 2
    assert len(list((tmp_path / "runs").iterdir())) == 3  # the listing skipped .notified


def test_many_claimers_of_one_event_make_exactly_one_sender(tmp_path: Path) -> None:
    """16 notifiers (as 16 processes would), each with its own mkdir, all at once."""
    store = _store(tmp_path)
    _ended_run(store, "race", group="g", job_id="9")
    _ended_run(store, "race2", group="g", job_id="10")
    infos = store.list_runs()
    start = threading.Barrier(16)
    won: list[NotifyEvent] = []
    lock = threading.Lock()

    def claimer() -> None:
        notifier = Notifier(LocalExecutor(), store.root)
        start.wait()
        for _ in range(DIAGNOSIS_ROUNDS):  # the ends wait for a diagnosis, then go
            events, error = notifier.after_refresh(infos, [], {}, scope=lambda: None)
            assert error is None
            with lock:
                won.extend(events)

    threads = [threading.Thread(target=claimer) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    kinds = sorted((e.kind, e.name) for e in won)
    assert kinds == [(GROUP_FINISHED, "g"), (RUN_END, "race"), (RUN_END, "race2")]


DIAGNOSIS_ROUNDS = 4


def test_a_stall_is_claimed_once_per_attempt(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ref = store.create_run(ExperimentSpec(name="hang").to_dict(), "hang", "#!/bin/bash\n")
    store.append_job(ref, {"job_id": "5", "scheduler": "local", "submitted_at": _iso(NOW)})
    cluster = _open(tmp_path)
    try:
        view = cluster.refresh().runs[0]
        infos = store.list_runs()
        stalled = replace(view, stall=Stall(quiet_sec=720.0, last_activity=0.0))
        a = Notifier(LocalExecutor(), store.root).after_refresh(
            infos, [stalled], {}, scope=lambda: None
        )
        b = Notifier(LocalExecutor(), store.root).after_refresh(
            infos, [stalled], {}, scope=lambda: None
        )
    finally:
        cluster.close()
    assert [(e.kind, e.diagnosis) for e in a[0]] == [(RUN_STALLED, "stalled 12 min")]
    assert b == ((), None)
