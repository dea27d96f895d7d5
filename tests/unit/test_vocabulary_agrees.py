"""The spec's closed lists and the trainer's, which must agree.

The trainer is copied alone into each run directory and imports nothing else of ddp_tui
(docs/architecture.md, "The layers"), so it keeps its own copy of the names it accepts. This
test is what keeps the two copies one list: a model, dataset or choice added on one side only
fails here, not in a user's job.
"""

from __future__ import annotations

import argparse

import pytest

from ddp_tui.spec import vocabulary
from ddp_tui.trainer import args as trainer_args


def _choices(option: str) -> tuple[str, ...]:
    parser = trainer_args.build_parser()
    (action,) = [a for a in parser._actions if option in a.option_strings]
    assert isinstance(action, argparse.Action) and action.choices is not None
    return tuple(action.choices)


def test_builtin_models_and_datasets_agree() -> None:
    assert vocabulary.BUILTIN_MODELS == trainer_args.BUILTIN_MODELS
    assert vocabulary.BUILTIN_DATASETS == trainer_args.BUILTIN_DATASETS
    assert vocabulary.DATASETS_NEEDING_ROOT == trainer_args.DATASETS_NEEDING_ROOT


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

    assert vocabulary.METRICS_SOURCES == presets.METRICS_PRESETS
