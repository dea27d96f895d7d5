"""Keeping a job where a test needs it, by construction, until the test lets it go.

A test that needs a job still running at some moment must not count on the job being slow
("50 epochs is long enough"): on a fast machine it ends first. Instead the job waits on a
file that the test removes (:meth:`Hold.release`); the ``hold`` fixture (tests/conftest.py)
or ``with Hold.create(...)`` removes it at the end in any case, so no job is left waiting.

- :meth:`Hold.running`: the job script waits before the trainer starts (an ``env_setup``
  line, run by the batch shell before torchrun/srun). The job is RUNNING, no epoch done.
- :meth:`Hold.after_epochs`: the run's first job attempt trains ``n`` epochs, then waits
  before its next training step (the model is the trainer's own, wrapped by
  ``ddp_tui_test_hold``, which this class copies next to the file). A retry or a requeue of
  the run is not held, and a cancel or requeue signal ends the wait, so the trainer stops
  as it always does (checkpoint, exit).

The file must be visible where the job runs: the Slurm test nodes share this filesystem, the
local scheduler runs here; for a job of another user (SSH) put it in a directory that user
can read.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ddp_tui.spec import ExperimentSpec

JOB_MODULE = "ddp_tui_test_hold"
#: Models the job module wraps (the trainer's built-ins that need no download).
HELD_MODELS = ("mlp", "simple_cnn")


@dataclass(frozen=True)
class Hold:
    """A hold file (``<directory>/hold``) and the job-side module next to it."""

    directory: Path

    @classmethod
    def create(cls, directory: Path) -> Hold:
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o755)  # a job of another user reads it
        module = directory / f"{JOB_MODULE}.py"
        shutil.copyfile(Path(__file__).with_name(f"{JOB_MODULE}.py"), module)
        module.chmod(0o644)
        hold = cls(directory)
        hold.file.touch()
        hold.file.chmod(0o644)
        return hold

    @property
    def file(self) -> Path:
        return self.directory / "hold"

    @property
    def held(self) -> bool:
        return self.file.exists()

    def release(self) -> None:
        """Let every job waiting on this file go on (idempotent)."""
        self.file.unlink(missing_ok=True)

    def __enter__(self) -> Hold:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # -- the specs -------------------------------------------------------------------

    def wait_line(self) -> str:
        """The shell line that waits while the file exists, in a job only: the pre-queue
        check runs the ``env_setup`` lines outside any job (no ``RUN_DIR``), and a hold
        there would hold the plan."""
        file = shlex.quote(str(self.file))
        return f'[ -z "${{RUN_DIR:-}}" ] || while [ -e {file} ]; do sleep 0.2; done'

    def running(self, spec: ExperimentSpec) -> ExperimentSpec:
        """``spec``, its job RUNNING (the trainer not started) until :meth:`release`."""
        return spec.replace(env_setup=(*spec.env_setup, self.wait_line()))

    def after_epochs_line(self, epochs: int) -> str:
        """The one ``env_setup`` line behind :meth:`after_epochs` (also typed in the app).

        ``mkdir`` in the run directory is the claim: it succeeds in the run's first job
        attempt only, so only that attempt exports the variables that make the model wait.
        """
        directory, file = shlex.quote(str(self.directory)), shlex.quote(str(self.file))
        return (
            f"export PYTHONPATH={directory}${{PYTHONPATH:+:$PYTHONPATH}} "
            'DDP_TUI_TEST_HOLD_RUN_DIR="$RUN_DIR"; '
            'if [ -n "${RUN_DIR:-}" ] && mkdir "$RUN_DIR/.test-hold" 2>/dev/null; then '
            f"export DDP_TUI_TEST_HOLD={file} DDP_TUI_TEST_HOLD_AFTER={epochs}; fi"
        )

    def waiting(self, rank: int) -> bool:
        """Whether that rank is parked at the hold (its job module said so)."""
        return (self.directory / f"waiting.{rank}").exists()

    def process_env(self, run_dir: Path, epochs: int) -> dict[str, str]:
        """The environment that makes a trainer started directly (no job script) with
        :meth:`model` wait after ``epochs`` epochs: what :meth:`after_epochs_line` exports."""
        return {
            "DDP_TUI_TEST_HOLD": str(self.file),
            "DDP_TUI_TEST_HOLD_AFTER": str(epochs),
            "DDP_TUI_TEST_HOLD_RUN_DIR": str(run_dir),
        }

    def model(self, spec_model: str) -> str:
        """The ``model`` value that holds: the same built-in model, through the job module."""
        assert spec_model in HELD_MODELS, f"only {HELD_MODELS} can be held, not {spec_model!r}"
        return f"{JOB_MODULE}:{spec_model}"

    def after_epochs(self, spec: ExperimentSpec, epochs: int) -> ExperimentSpec:
        """``spec``, its first attempt waiting after ``epochs`` epochs until :meth:`release`
        (or a cancel/requeue signal); ``epochs`` must be fewer than ``spec.epochs``."""
        assert 0 < epochs < spec.epochs, (epochs, spec.epochs)
        return spec.replace(
            model=self.model(spec.model),
            env_setup=(*spec.env_setup, self.after_epochs_line(epochs)),
        )
