"""The one error root: every error ddp-tui shows a person is a DdpTuiError with a title."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import ddp_tui
from ddp_tui.errors import DdpTuiError
from ddp_tui.tui.formatting import failure_title

# Internal signals that never reach a person: each is caught where it is raised.
INTERNAL = {
    "ddp_tui.remote.backends.ssh.auth._PromptCancelled",  # the auth strategy's own control flow
    "ddp_tui.remote.backends.ssh.channels.HelperGone",  # the batch helper ended: SSH falls back
    "ddp_tui.tui.prompter.PromptUnavailable",  # asked on the UI thread: a bug, not the user's
}


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(ddp_tui.__path__, "ddp_tui."):
        job_side = ("ddp_tui.trainer", "ddp_tui.telemetry", "ddp_tui.jobfiles")
        if info.name.startswith(job_side) or info.name.endswith("__main__"):
            # The trainer reports through exit codes and its own logs (a failed run-directory
            # write of jobfiles: one line and exit 4); the job's resource sampler never
            # reports at all (its problems are notes in its file).
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            job = cls.__module__.startswith(job_side)  # imported by the app from job code
            if issubclass(cls, BaseException) and cls.__module__.startswith("ddp_tui.") and not job:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [
        cls
        for name, cls in sorted(found.items())
        if name not in INTERNAL and cls is not DdpTuiError
    ]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__qualname__)
def test_every_error_of_the_app_has_the_one_root_and_a_title(cls: type[BaseException]) -> None:
    assert issubclass(cls, DdpTuiError), f"{cls.__module__}.{cls.__qualname__}"
    assert cls.title != DdpTuiError.title, "say what kind of problem it is"


def test_a_failure_title_names_the_kind_of_problem_or_the_bug() -> None:
    from ddp_tui.remote.backends.scheduler import SchedulerError

    assert failure_title("Submit", SchedulerError("sbatch: error")) == "Submit failed: Scheduler"
    assert failure_title("Verify", KeyError("x")) == "Verify failed: KeyError"
    assert failure_title("Export", None) == "Export failed"
