"""What every step of the GPU check shares: the mode, the time budget, the work directory, and
the environment in which ``ddp-tui`` and its jobs run (an isolated config and runs root)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"


class OutOfTime(Exception):
    """The check's time budget is spent: the steps left are skipped, not failed."""


@dataclass
class Context:
    cuda: bool
    work: Path  # scratch: runs root, config, carried packages
    out: Path  # where the report and screenshots go
    deadline: float  # time.monotonic() by which the check must end
    site: Path | None = None  # carried packages, installed here
    peak_flops: float | None = None  # the device's dense bf16 peak, from the trainer's table
    rates: dict[str, float] = field(default_factory=dict)  # medians measured, by label
    log_lines: list[str] = field(default_factory=list)

    @property
    def runs_root(self) -> Path:
        return self.work / "runs"

    @property
    def config(self) -> Path:
        return self.work / "config.toml"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def limit(self, wanted: float) -> float:
        """A subprocess's timeout: what it wants, or what the budget still allows."""
        left = self.left()
        if left < 5:
            raise OutOfTime(f"{left:.0f} s of the budget left")
        return min(wanted, left)

    def log(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        for line in text.rstrip().splitlines() or [""]:
            self.log_lines.append(f"{stamp} {line}")
            print(f"[gpu-check {stamp}] {line}", flush=True)

    def env(self) -> dict[str, str]:
        """The environment of ``ddp-tui`` (and so of its jobs): this checkout's package, the
        carried packages, and a config of the check's own, so no user's runs are touched."""
        env = dict(os.environ)
        paths = [str(SRC)] + ([str(self.site)] if self.site else [])
        env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
        env["DDP_TUI_CONFIG"] = str(self.config)
        env["XDG_STATE_HOME"] = str(self.work / "state")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def write_config(self) -> None:
        """One profile on the local scheduler, whose jobs run this very Python."""
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            'default = "gpucheck"\n'
            "[profiles.gpucheck]\n"
            f'runs_root = "{self.runs_root}"\n'
            f'python = "{sys.executable}"\n'
            'scheduler = "local"\n'
            f'device = "{"cuda" if self.cuda else "cpu"}"\n'
            "poll_interval_sec = 2\n"
        )

    def ddp_tui(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """``ddp-tui ARGS`` as a user types it (``python -m ddp_tui.cli``); never raises on a
        non-zero exit: the caller judges it."""
        cmd = [sys.executable, "-c", "import sys; from ddp_tui.cli import main; sys.exit(main())"]
        try:
            return subprocess.run(
                [*cmd, *args],
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=self.limit(timeout),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise OutOfTime(f"ddp-tui {' '.join(args[:2])} ran past its time") from None
