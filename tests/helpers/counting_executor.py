"""The real local executor, counting the commands it runs (a counting wrapper: every answer
is the real one), for tests that assert what a check or a detection asked and when it asked
nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor


class CountingExecutor(LocalExecutor):
    """The real local executor, counting the commands it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        self.commands.append(tuple(argv))
        return super().run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)
