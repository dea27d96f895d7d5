"""Answer the SSH layer's questions (host keys, passphrases, 2FA) with modal screens.

The SSH layer asks from a worker thread. Each question pushes a modal on the app's
thread and the worker blocks on a queue until the user answers.
"""

from __future__ import annotations

import contextlib
import queue
import time
from typing import TYPE_CHECKING, Any, TypeVar

from textual.screen import ModalScreen
from textual.worker import NoActiveWorker, get_current_worker

if TYPE_CHECKING:
    from textual.app import App

T = TypeVar("T")


class PromptUnavailable(RuntimeError):
    """A question was asked from the app's own thread, or the app is gone."""


class TuiPrompter:
    """The SSH helper's ``Prompter``, answered through modals. Call only from worker threads."""

    def __init__(self, app: App[Any], *, timeout: float | None = 600.0) -> None:
        self.app = app
        self.timeout = timeout
        #: True once the user refused a host key or cancelled a prompt.
        self.declined = False

    def _ask(self, modal: ModalScreen[T]) -> T | None:
        answers: queue.Queue[T | None] = queue.Queue(maxsize=1)

        def push() -> None:
            self.app.push_screen(modal, callback=answers.put)

        try:
            self.app.call_from_thread(push)
        except RuntimeError as error:  # asked on the app's thread, or the app has exited
            raise PromptUnavailable(str(error)) from error
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            try:
                return answers.get(timeout=0.2)
            except queue.Empty:
                pass
            # Give up when the app quits (its exit waits for this thread) or on timeout.
            if self._abandoned() or (deadline is not None and time.monotonic() > deadline):
                with contextlib.suppress(Exception):  # gone already, or not on top
                    self.app.call_from_thread(modal.dismiss, None)
                return None

    def _abandoned(self) -> bool:
        if not self.app.is_running:
            return True
        try:
            return get_current_worker().is_cancelled
        except NoActiveWorker:  # paramiko's own thread (keyboard-interactive)
            return False

    def confirm_host_key(self, host: str, port: int, key_type: str, fingerprint: str) -> bool:
        """Trust an unknown host key? ``fingerprint`` is ``SHA256:...``."""
        # The modals load with the first question, not before the app's first frame.
        from ddp_tui.tui.modals import HostKeyModal

        where = host if port == 22 else f"[{host}]:{port}"
        answer = self._ask(HostKeyModal(where, key_type, fingerprint))
        if not answer:
            self.declined = True
        return bool(answer)

    def ask_secret(self, title: str, prompt: str) -> str | None:
        """A password or key passphrase; ``None`` when the user cancels."""
        from ddp_tui.tui.modals import PromptField, PromptModal

        answers = self._ask(PromptModal(title, "", [PromptField(prompt, echo=False)]))
        if answers is None:
            self.declined = True
            return None
        return answers[0]

    def keyboard_interactive(
        self, title: str, instructions: str, prompts: list[tuple[str, bool]]
    ) -> list[str] | None:
        """Answers to a keyboard-interactive round (``(prompt, echo)`` pairs)."""
        if not prompts:
            return []
        from ddp_tui.tui.modals import PromptField, PromptModal

        fields = [PromptField(text, echo) for text, echo in prompts]
        answers = self._ask(PromptModal(title, instructions, fields))
        if answers is None:
            self.declined = True
        return answers


if TYPE_CHECKING:
    from ddp_tui.remote.backends.ssh.api import Prompter

    def _is_a_prompter(prompter: TuiPrompter) -> Prompter:  # mypy checks the protocol here
        return prompter
