"""The run detail's log pane: ``.out``/``.err`` tabs that follow, search and stay small.

Memory is bounded whatever the log size: each tab is a :class:`textual.widgets.Log`
capped at ``max_lines``, and :meth:`LogPane.append` only fills a bounded buffer that a
timer flushes with one ``write_lines`` per stream every ``flush_interval`` seconds.
(One write per line starts a Textual worker per line; see MEASURED_FACTS.md.) Lines
are cleaned by :mod:`ddp_tui.tui.logtext` in ``append``, i.e. in the reading worker's
thread, and only the newest ``max_lines`` of a burst are cleaned at all.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from rich.cells import cell_len
from rich.segment import Segment
from textual import on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Log, Static, TabbedContent, TabPane

from ddp_tui.tui.logtext import MAX_LINE_CHARS, clean_line, clean_lines

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import RunDetail

Stream = Literal["out", "err"]
STREAMS: tuple[Stream, Stream] = ("out", "err")

DEFAULT_MAX_LINES = 5000
DEFAULT_FLUSH_INTERVAL = 0.05


class LogView(Log):
    """A capped ``Log`` that follows the end until the user scrolls away.

    Follow state lives here and changes synchronously in the scroll watcher, so a
    flush that lands between the user's scroll and any message handling cannot
    yank the view back to the end.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"logview--match"}
    DEFAULT_CSS = """
    LogView > .logview--match {
        background: $accent 60%;
        text-style: bold;
    }
    """

    @dataclass
    class FollowChanged(Message):
        """Follow mode of ``log_view`` switched on or off."""

        log_view: LogView
        following: bool

        @property
        def control(self) -> LogView:
            return self.log_view

    def __init__(self, *, max_lines: int, id: str | None = None) -> None:
        super().__init__(max_lines=max_lines, auto_scroll=False, id=id)
        self.following = True
        #: ``write_lines`` calls made; one per flush that had lines.
        self.writes = 0
        #: Lines written since the last clear (including those the cap dropped).
        self.appended = 0
        #: Absolute index (see :attr:`first_index`) of the highlighted search match.
        self.match_line: int | None = None

    @property
    def first_index(self) -> int:
        """Absolute index of ``lines[0]``: line numbers survive the cap dropping old lines."""
        return self.appended - len(self.lines)

    def add_lines(self, lines: Sequence[str]) -> None:
        """Write already-cleaned lines (one ``write_lines`` call) and keep the view put."""
        if not lines:
            return
        cap = self.max_lines
        dropped = 0 if cap is None else max(0, len(self.lines) + len(lines) - cap)
        self.write_lines(lines, scroll_end=False)
        self.writes += 1
        self.appended += len(lines)
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        elif dropped and self.scroll_y > 0:
            # The cap removed lines above the view; shift with them so the text
            # the user is reading stays on screen.
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        # Log measures new lines' cell widths in a thread worker started per write
        # (about 12 ms of GIL time for 5,000 lines, competing with key handling). Our
        # lines are cleaned: no control characters, so a plain ASCII line without
        # tabs is as wide as it is long, and this takes well under a millisecond.
        if lines:
            widest = max(
                len(line) if line.isascii() and "\t" not in line else cell_len(line.expandtabs())
                for line in lines
            )
            self._update_maximum_width(updates, widest)

    def reset(self) -> None:
        """Forget every line (the file was truncated or rotated) and follow the new one."""
        self.clear()
        self.appended = 0
        self.match_line = None
        self.set_following(True)
        self.refresh()

    def set_following(self, following: bool) -> None:
        if following == self.following:
            return
        self.following = following
        if following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.post_message(self.FollowChanged(self, following))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        # A clamp (clear, taller window) also lowers scroll_y, but lands on the end.
        if new_value < old_value and not at_end and self.following:
            self.following = False
            self.post_message(self.FollowChanged(self, False))
        elif new_value > old_value and at_end and not self.following:
            self.following = True
            self.post_message(self.FollowChanged(self, True))

    def action_scroll_end(self) -> None:
        """``end``: jump to the newest line and follow again."""
        self.set_following(True)
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.match_line is not None and (
            self.first_index + self.scroll_offset.y + y == self.match_line
        ):
            style = self.get_component_rich_style("logview--match", partial=True)
            strip = Strip(Segment.apply_style(strip, post_style=style), strip.cell_length)
        return strip


@dataclass
class _Pending:
    """Cleaned lines waiting for the next flush; bounded because only the newest can show."""

    lines: deque[str]
    reset: bool = False
    touched: bool = False


class LogPane(Widget):
    """Tabs for a run's ``.out`` and ``.err`` with follow mode and search.

    Feed it with :meth:`append` / :meth:`reset` (both safe from any thread: they
    only touch a locked buffer; call them from the worker that reads the log) or
    with :meth:`feed` and a facade ``RunDetail``.
    Keys: ``f`` follow on/off, ``end`` follow again, ``/`` search, ``n``/``N`` next or
    previous match, ``escape`` closes the search box.
    """

    DEFAULT_CSS = """
    LogPane {
        height: 1fr;
    }
    LogPane > TabbedContent {
        height: 1fr;
    }
    LogPane > TabbedContent > ContentSwitcher {
        height: 1fr;
    }
    LogPane TabPane {
        height: 1fr;
        padding: 0;
    }
    LogPane LogView {
        height: 1fr;
    }
    LogPane > #log-search {
        display: none;
    }
    LogPane > #log-search.-visible {
        display: block;
    }
    LogPane > #log-status {
        height: 1;
        padding: 0 1;
        color: $text-muted;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_follow", "Follow"),
        Binding("slash", "open_search", "Search"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "previous_match", "Previous match", show=False),
        Binding("escape", "close_search", "Close search", show=False),
    ]

    def __init__(
        self,
        *,
        max_lines: int = DEFAULT_MAX_LINES,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        max_line_chars: int = MAX_LINE_CHARS,
        out_label: str = ".out",
        err_label: str = ".err",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        if max_lines < 1:
            raise ValueError(f"max_lines must be at least 1, got {max_lines}")
        self.max_lines = max_lines
        self.flush_interval = flush_interval
        self.max_line_chars = max_line_chars
        self._labels: dict[Stream, str] = {"out": out_label, "err": err_label}
        self._views: dict[Stream, LogView] = {
            s: LogView(max_lines=max_lines, id=f"log-{s}") for s in STREAMS
        }
        self._lock = threading.Lock()
        self._pending: dict[Stream, _Pending] = {
            s: _Pending(deque(maxlen=max_lines)) for s in STREAMS
        }
        self._query = ""
        self._search_note = ""

    # -- feeding -----------------------------------------------------------------

    def append(self, stream: Stream, lines: Iterable[str]) -> None:
        """Queue raw lines of ``stream``; they show at the next flush.

        Thread-safe, and meant to be called from the worker that reads the log: the
        lines are cleaned here, in the caller's thread, so a burst costs the event
        loop one ``write_lines`` and nothing else. Lines that the cap would drop
        anyway are never cleaned.
        """
        batch = lines if isinstance(lines, Sequence) else list(lines)
        cleaned = clean_lines(batch[-self.max_lines :], self.max_line_chars)
        pending = self._pending[stream]
        with self._lock:
            pending.lines.extend(cleaned)
            pending.touched = True

    def reset(self, stream: Stream) -> None:
        """Clear ``stream`` (its file was truncated or rotated); later appends still show."""
        pending = self._pending[stream]
        with self._lock:
            pending.lines.clear()
            pending.reset = True
            pending.touched = True

    def feed(self, detail: RunDetail) -> None:
        """Apply one incremental ``Cluster.follow()`` result."""
        if detail.out_reset:
            self.reset("out")
        if detail.out_lines:
            self.append("out", detail.out_lines)
        if detail.err_reset:
            self.reset("err")
        if detail.err_lines:
            self.append("err", detail.err_lines)

    def flush(self) -> None:
        """Move queued lines into the tabs now (the timer calls this)."""
        changed = False
        for stream in STREAMS:
            pending = self._pending[stream]
            if not pending.touched:  # unlocked peek: the common idle tick costs nothing
                continue
            with self._lock:
                reset, lines = pending.reset, list(pending.lines)
                pending.lines.clear()
                pending.reset = pending.touched = False
            view = self._views[stream]
            if reset:
                view.reset()
            view.add_lines(lines)
            changed = True
        if changed:
            self._update_status()

    # -- tabs, follow, status ------------------------------------------------------

    @property
    def active_stream(self) -> Stream:
        if not self.is_mounted:
            return "out"
        active = self.query_one(TabbedContent).active
        return "err" if active == "err" else "out"

    def view(self, stream: Stream) -> LogView:
        return self._views[stream]

    def set_label(self, stream: Stream, label: str) -> None:
        """Rename a tab, e.g. to the log's file name."""
        self._labels[stream] = label
        if self.is_mounted:
            self.query_one(TabbedContent).get_tab(stream).label = label

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="out"):
            for stream in STREAMS:
                with TabPane(self._labels[stream], id=stream):
                    yield self._views[stream]
        yield Input(
            placeholder="search: enter finds, n/N next/previous, esc closes", id="log-search"
        )
        yield Static("", id="log-status", markup=False)

    def on_mount(self) -> None:
        self.set_interval(self.flush_interval, self.flush)
        self._update_status()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        event.stop()  # our tabs are internal; a screen's own tab handlers need not see them
        self._search_note = ""
        self._update_status()

    @on(LogView.FollowChanged)
    def _follow_changed(self) -> None:
        self._update_status()

    def action_toggle_follow(self) -> None:
        view = self._views[self.active_stream]
        view.set_following(not view.following)

    def _update_status(self) -> None:
        if not self.is_mounted:
            return
        view = self._views[self.active_stream]
        follow = "follow: on" if view.following else "follow: off (f/end resumes)"
        parts = [follow, f"{len(view.lines):,} lines"]
        if view.appended > len(view.lines):
            parts[-1] += f" (last {self.max_lines:,} kept)"
        if self._search_note:
            parts.append(self._search_note)
        self.query_one("#log-status", Static).update("  ·  ".join(parts))

    # -- search --------------------------------------------------------------------

    def action_open_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.add_class("-visible")
        box.focus()

    def action_close_search(self) -> None:
        box = self.query_one("#log-search", Input)
        if not box.has_class("-visible"):
            raise SkipAction()  # let the screen's escape run
        box.remove_class("-visible")
        self._views[self.active_stream].focus()

    def action_next_match(self) -> None:
        if not self._query:
            raise SkipAction()
        self._jump(+1)

    def action_previous_match(self) -> None:
        if not self._query:
            raise SkipAction()
        self._jump(-1)

    @on(Input.Submitted, "#log-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.search(event.value)
        self._views[self.active_stream].focus()

    def search(self, query: str) -> None:
        """Find ``query`` in the active tab and jump to the first match at or below the view.

        Plain substring; case-insensitive unless the query has a capital letter.
        """
        self._query = query
        view = self._views[self.active_stream]
        view.match_line = None
        if not query:
            self._search_note = ""
            view.refresh()
            self._update_status()
            return
        self._jump(+1)

    def matches(self, stream: Stream | None = None) -> list[int]:
        """Absolute indices of the lines of ``stream`` (default: active) matching the query."""
        view = self._views[stream or self.active_stream]
        query = self._query
        if not query:
            return []
        base = view.first_index
        if query == query.lower():
            return [base + i for i, line in enumerate(view.lines) if query in line.lower()]
        return [base + i for i, line in enumerate(view.lines) if query in line]

    def _jump(self, direction: int) -> None:
        view = self._views[self.active_stream]
        found = self.matches()
        if not found:
            view.match_line = None
            self._search_note = f"no match for {self._query!r}"
            view.refresh()
            self._update_status()
            return
        top = view.first_index + view.scroll_offset.y
        current = view.match_line
        if current is None or current < view.first_index:
            # A new search starts from the view: forward from its top line,
            # backward from its bottom line.
            current = top - 1 if direction > 0 else top + view.scrollable_content_region.height
        if direction > 0:
            after = [m for m in found if m > current]
            target = after[0] if after else found[0]
        else:
            before = [m for m in found if m < current]
            target = before[-1] if before else found[-1]
        self._show(view, target)
        self._search_note = f"match {found.index(target) + 1}/{len(found)} for {self._query!r}"
        self._update_status()

    def _show(self, view: LogView, target: int) -> None:
        """Highlight the line at absolute index ``target`` and scroll it to mid-view."""
        view.match_line = target
        view.set_following(False)  # a jump must not be scrolled away by new lines
        local = target - view.first_index
        view.scroll_to(
            y=max(0, local - view.scrollable_content_region.height // 2),
            animate=False,
            immediate=True,
        )
        view.refresh()

    # -- jump to a line ---------------------------------------------------------------

    def find_line(self, stream: Stream, line: int | None, text: str = "") -> int | None:
        """The absolute index of a log line named by its 1-based number and its text.

        The number alone is not trusted: the pane starts near the end of a big log, so
        line 57 of the file need not be the pane's 57th line. It counts where the pane's
        line there holds ``text`` (or no text is given); otherwise the newest line holding
        ``text`` wins, as a diagnosis quotes the log's tail. None: not in the pane (yet)."""
        lines = self._views[stream].lines
        first = self._views[stream].first_index
        needle = clean_line(text).strip()
        local = -1 if line is None else line - 1 - first
        if 0 <= local < len(lines) and needle in lines[local]:
            return first + local
        if needle:
            for local in range(len(lines) - 1, -1, -1):
                if needle in lines[local]:
                    return first + local
        return None

    def goto_line(self, stream: Stream, line: int | None, text: str = "") -> bool:
        """Show ``stream``'s tab with the line (see :meth:`find_line`) highlighted in
        mid-view and follow off. False where the line is not in the pane: the tab is
        shown, nothing moves."""
        self.flush()  # lines read but not drawn yet count too
        self.query_one(TabbedContent).active = stream
        view = self._views[stream]
        view.focus()
        target = self.find_line(stream, line, text)
        if target is None:
            return False
        self._show(view, target)
        # A tab shown just now has no height yet: centre again once it is laid out.
        self.call_after_refresh(self._show, view, target)
        return True
