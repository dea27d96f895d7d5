"""The log pane: what a user following a job's output sees and can do with the keys."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from ddp_tui.remote.model.views import RunDetail
from ddp_tui.tui.logtext import clean_line, clean_lines, strip_ansi, truncate_line
from ddp_tui.tui.logview import LogPane, LogView
from tests.tui.conftest import wait_until

# -- pure text hygiene ------------------------------------------------------------


def test_tqdm_bar_collapses_to_its_final_state() -> None:
    raw = "\r  0%|          | 0/100\r 50%|#####     | 50/100\r100%|##########| 100/100\r"
    assert clean_line(raw) == "100%|##########| 100/100"


def test_coloured_tqdm_bar_and_cursor_moves_are_removed() -> None:
    raw = "\x1b[32mepoch 1\x1b[0m\r\x1b[A\x1b[2K 99%|#########9| 99/100\x1b]0;title\x07"
    assert clean_line(raw) == " 99%|#########9| 99/100"


def test_ansi_colours_are_stripped_and_text_kept() -> None:
    assert strip_ansi("\x1b[1;31mERROR\x1b[0m: NCCL timeout") == "ERROR: NCCL timeout"
    assert strip_ansi("plain") == "plain"


def test_control_characters_never_split_or_garble_a_line() -> None:
    raw = "a\x00b\x07c\x0bd\x0ce\x1cf\x85g\u2028h\x7fi\tj\x08"
    cleaned = clean_line(raw)
    assert cleaned == "abcdefghi\tj"
    assert len(cleaned.splitlines()) == 1


def test_very_long_line_is_cut_and_says_how_much() -> None:
    line = "x" * 5000
    assert clean_line(line, max_chars=2000) == "x" * 2000 + "…[+3,000 chars]"
    assert truncate_line("short", 10) == "short"


def test_empty_line_survives_and_embedded_newlines_split() -> None:
    # Log.write_lines drops "", so an empty log line must become a blank one.
    assert clean_lines(["", "a\nb"]) == [" ", "a", "b"]


def test_invalid_utf8_replacement_char_is_kept_readable() -> None:
    assert clean_line(b"loss \xff\xfe 0.1".decode("utf-8", "replace")) == "loss �� 0.1"


# -- the widget --------------------------------------------------------------------


class LogHost(App[None]):
    """A tiny app holding only the pane."""

    def __init__(self, **pane_kwargs: Any) -> None:
        super().__init__()
        self.pane_kwargs = pane_kwargs

    def compose(self) -> ComposeResult:
        yield LogPane(**self.pane_kwargs)


def _pane(app: App[None]) -> LogPane:
    return app.query_one(LogPane)


async def _settle(pilot: Pilot[None], pane: LogPane) -> None:
    """Until the flush timer has moved every queued line into the tabs, then a repaint:
    a few flush intervals are usual, but a busy machine may run the timer later."""
    await pilot.pause(pane.flush_interval * 3)
    queued = lambda: any(p.touched for p in pane._pending.values())  # noqa: E731
    await wait_until(pilot, lambda: not queued(), "the flush timer", 30)
    await pilot.pause()


async def test_a_thousand_single_line_appends_arrive_in_few_writes() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        for i in range(1000):
            pane.append("out", [f"step {i}"])
        await _settle(pilot, pane)
        view = pane.view("out")
        assert view.line_count == 1000
        assert view.lines[0] == "step 0" and view.lines[-1] == "step 999"
        assert 1 <= view.writes <= 3
        assert pane.view("err").writes == 0


async def test_appends_from_a_worker_thread_are_safe() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)

        def produce() -> None:
            for i in range(2000):
                pane.append("err", [f"warn {i}"])

        threads = [threading.Thread(target=produce) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        await _settle(pilot, pane)
        assert pane.view("err").line_count == 4000


async def test_line_cap_is_respected_and_keeps_the_newest() -> None:
    app = LogHost(max_lines=100)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        pane.append("out", [f"line {i}" for i in range(250)])
        await _settle(pilot, pane)
        for i in range(250, 400):
            pane.append("out", [f"line {i}"])
            if i % 50 == 0:
                await _settle(pilot, pane)
        await _settle(pilot, pane)
        view = pane.view("out")
        assert view.line_count == 100
        assert view.lines[0] == "line 300" and view.lines[-1] == "line 399"
        assert "last 100 kept" in str(pane.query_one("#log-status").render())


async def test_reset_clears_the_pane_but_keeps_lines_appended_after_it() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        pane.append("out", ["old 1", "old 2"])
        await _settle(pilot, pane)
        assert pane.view("out").line_count == 2
        pane.append("out", ["stale, never shown"])
        pane.feed(RunDetail(run_id="r", out_lines=["new 1"], out_reset=True, err_lines=["e"]))
        await _settle(pilot, pane)
        assert list(pane.view("out").lines) == ["new 1"]
        assert list(pane.view("err").lines) == ["e"]


async def test_tqdm_and_long_lines_are_cleaned_in_the_pane() -> None:
    app = LogHost(max_line_chars=50)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        pane.append("err", ["\r 10%|#  |\r100%|###|\r", "y" * 80, "\x1b[31mred\x1b[0m"])
        await _settle(pilot, pane)
        assert list(pane.view("err").lines) == ["100%|###|", "y" * 50 + "…[+30 chars]", "red"]


async def test_follow_pauses_when_scrolling_up_and_end_resumes() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        view = pane.view("out")
        pane.append("out", [f"line {i}" for i in range(200)])
        await _settle(pilot, pane)
        assert view.following and view.is_vertical_scroll_end

        view.focus()
        await pilot.press("pageup")
        await pilot.pause()
        assert not view.following
        held = view.scroll_y
        pane.append("out", [f"more {i}" for i in range(50)])
        await _settle(pilot, pane)
        assert view.scroll_y == held  # paused: new lines do not move the view
        assert "follow: off" in str(pane.query_one("#log-status").render())

        await pilot.press("end")
        await _settle(pilot, pane)
        assert view.following and view.is_vertical_scroll_end
        pane.append("out", ["newest"])
        await _settle(pilot, pane)
        assert view.is_vertical_scroll_end and view.lines[-1] == "newest"

        await pilot.press("f")  # toggle off at the end: stays put while lines arrive
        await pilot.pause()
        assert not view.following
        held = view.scroll_y
        pane.append("out", [f"later {i}" for i in range(20)])
        await _settle(pilot, pane)
        assert view.scroll_y == held and not view.is_vertical_scroll_end
        await pilot.press("f")
        await _settle(pilot, pane)
        assert view.following and view.is_vertical_scroll_end


async def test_paused_view_keeps_its_text_while_the_cap_drops_old_lines() -> None:
    app = LogHost(max_lines=200)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        view = pane.view("out")
        pane.append("out", [f"line {i}" for i in range(200)])
        await _settle(pilot, pane)
        view.focus()
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        top_text = view.lines[view.scroll_offset.y]
        pane.append("out", [f"line {i}" for i in range(200, 230)])
        await _settle(pilot, pane)
        assert view.lines[view.scroll_offset.y] == top_text


async def test_search_finds_counts_and_cycles_matches() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        view = pane.view("out")
        lines = [f"step {i}" + (" NaN loss" if i % 10 == 3 else "") for i in range(170)]
        pane.append("out", lines)
        await _settle(pilot, pane)
        view.focus()
        await pilot.press("home")
        await pilot.pause()

        await pilot.press("slash", *"nan loss", "enter")
        await pilot.pause()
        status = pane.query_one("#log-status")
        assert pane.matches() == [i for i in range(170) if i % 10 == 3]
        assert view.match_line == 3
        assert "match 1/17" in str(status.render())
        assert not view.following

        await pilot.press("n", "n")
        await pilot.pause()
        assert view.match_line == 23
        assert "match 3/17" in str(status.render())
        # The match line is on screen.
        assert view.scroll_offset.y <= 23 < view.scroll_offset.y + view.size.height

        # The current match line is drawn in the match style, its neighbour is not.
        row = 23 - view.scroll_offset.y
        match_bg = {seg.style.bgcolor for seg in view.render_line(row) if seg.style}
        other_bg = {seg.style.bgcolor for seg in view.render_line(row + 1) if seg.style}
        assert match_bg and match_bg.isdisjoint(other_bg)

        await pilot.press("N", "N", "N")
        await pilot.pause()
        assert view.match_line == 163  # wrapped backwards
        assert "match 17/17" in str(status.render())

        await pilot.press("slash", *"zzz", "enter")
        await pilot.pause()
        assert view.match_line is None
        assert "no match for 'zzz'" in str(status.render())


async def test_search_is_case_sensitive_with_a_capital_letter() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        pane.append("err", ["Error one", "error two", "ERROR three"])
        pane.query_one(TabbedContent).active = "err"
        await _settle(pilot, pane)
        assert pane.active_stream == "err"
        pane.search("Error")
        assert pane.matches() == [0]
        pane.search("error")
        assert pane.matches() == [0, 1, 2]


async def test_escape_closes_the_search_box_and_labels_can_be_set() -> None:
    app = LogHost(out_label="slurm-1.out")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        box = pane.query_one("#log-search")
        await pilot.press("slash")
        assert box.has_focus and box.display
        await pilot.press("escape")
        await pilot.pause()
        assert not box.display
        pane.set_label("err", "slurm-1.err")
        await pilot.pause()
        tabs = pane.query_one(TabbedContent)
        assert tabs.get_tab("out").label.plain == "slurm-1.out"
        assert tabs.get_tab("err").label.plain == "slurm-1.err"


async def test_scroll_width_covers_the_widest_line_including_wide_characters() -> None:
    app = LogHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = _pane(app)
        pane.append("out", ["a" * 300, "界" * 200, "\tx"])
        await _settle(pilot, pane)
        assert pane.view("out").virtual_size.width == 400


def test_max_lines_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_lines"):
        LogPane(max_lines=0)


def test_log_view_counts_absolute_line_numbers() -> None:
    view = LogView(max_lines=10)
    assert view.first_index == 0


async def test_goto_line_shows_a_numbered_line_in_its_tab_and_checks_its_text() -> None:
    app = LogHost(max_lines=50)
    async with app.run_test(size=(100, 20)) as pilot:
        pane = _pane(app)
        pane.append("out", [f"out {i}" for i in range(1, 101)])
        for start in range(1, 201, 25):  # flushed as they come: the view counts every line
            pane.append("err", [f"line {i}" for i in range(start, start + 25)])
            pane.flush()
        await _settle(pilot, pane)
        err = pane.view("err")
        assert err.first_index == 150  # the cap kept lines 151..200
        # By number, where the pane's line there holds the text (or no text is given).
        assert pane.find_line("err", 160, "line 160") == 159
        assert pane.find_line("err", 170) == 169
        # A number that does not hold the text is not trusted: the newest match wins.
        assert pane.find_line("err", 3, "line 19") == 198  # "line 199" holds "line 19"
        assert pane.find_line("err", None, "\x1b[31mline 155\x1b[0m") == 154
        assert pane.find_line("err", 10, "line 10") is None  # dropped by the cap
        assert pane.find_line("err", 999) is None
        assert pane.goto_line("err", 160, "line 160")
        await pilot.pause()
        assert pane.query_one(TabbedContent).active == "err"
        assert err.match_line == 159 and not err.following
        top = err.first_index + err.scroll_offset.y
        assert top <= 159 < top + err.scrollable_content_region.height  # on screen
        assert not pane.goto_line("out", None, "not in the log")
        await pilot.pause()
        assert pane.query_one(TabbedContent).active == "out"
