"""The spec's closed lists are the job side's own: one list, used by both.

The trainer is copied alone into each run directory and imports nothing of ddp_tui but
``ddp_tui.jobfiles`` (docs/architecture.md, "The layers"), so its names live there and the
spec re-exports them; a script's metrics sources are the script runner's presets. These tests
hold both sides to that one source: a list restated on one side fails here, not in a user's
job.
"""

from __future__ import annotations

import argparse

import pytest

from ddp_tui import jobfiles
from ddp_tui.spec import vocabulary
from ddp_tui.trainer import args as trainer_args


def _choices(option: str) -> tuple[str, ...]:
    parser = trainer_args.build_parser()
    (action,) = [a for a in parser._actions if option in a.option_strings]
    assert isinstance(action, argparse.Action) and action.choices is not None
    return tuple(action.choices)


@pytest.mark.parametrize(
    "name",
    [
        "BUILTIN_MODELS",
        "BUILTIN_DATASETS",
        "DATASETS_NEEDING_ROOT",
        "SYNTHETIC_DEFAULT_SHAPE",
        "BACKENDS",
        "PRECISIONS",
        "OPTIMIZERS",
        "SCHEDULES",
        "LR_SCALINGS",
    ],
)
def test_the_spec_and_the_trainer_use_one_list(name: str) -> None:
    assert getattr(vocabulary, name) is getattr(jobfiles, name) is getattr(trainer_args, name)


@pytest.mark.parametrize(
    ("option", "names"),
    [
        ("--backend", vocabulary.BACKENDS),
        ("--precision", vocabulary.PRECISIONS),
        ("--optimizer", vocabulary.OPTIMIZERS),
        ("--schedule", vocabulary.SCHEDULES),
        ("--lr-scaling", vocabulary.LR_SCALINGS),
    ],
)
def test_each_choice_of_the_spec_is_one_the_trainer_takes(
    option: str, names: tuple[str, ...]
) -> None:
    assert _choices(option) == names


def test_metrics_sources_are_the_script_runners_presets() -> None:
    from ddp_tui.scriptrun import presets

    assert vocabulary.METRICS_SOURCES is presets.METRICS_PRESETS
