"""FIELDS: the one description of every spec field that the CLI's --help is generated from.

The descriptions must cover every field, agree with what validate() accepts, and give
defaults in the text form that spec_from_form reads back.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from ddp_tui.spec import (
    BACKENDS,
    BUILTIN_DATASETS,
    BUILTIN_MODELS,
    DATASET_SHAPES,
    FIELD_SECTIONS,
    FIELDS,
    LAUNCHERS,
    PRECISIONS,
    SCALE_FIELDS,
    SYNTHETIC_DEFAULT_SHAPE,
    ExperimentSpec,
    form_text,
    spec_from_form,
    validate,
)
from tests.golden.specs import GOLDEN_SPECS

SPEC_FIELDS = dataclasses.fields(ExperimentSpec)
#: Fields that take one of a closed list (the rest take free values, or an open list).
CLOSED = sorted(name for name, f in FIELDS.items() if f.choices and not f.others)


def base_for(name: str) -> ExperimentSpec:
    """A valid spec whose entry uses field ``name`` (a script's fields count for scripts only)."""
    if FIELDS[name].applies == "script":
        return ExperimentSpec(entry="script", script="train.py")
    return ExperimentSpec()


def test_every_field_is_described_in_declaration_order() -> None:
    assert list(FIELDS) == [f.name for f in SPEC_FIELDS]
    for f in SPEC_FIELDS:
        doc = FIELDS[f.name]
        assert doc.name == f.name
        assert doc.default == f.default
        assert doc.label and doc.help and doc.placeholder, f.name
        assert doc.section in FIELD_SECTIONS, f.name
    # Every section holds at least one field, in the order the sections are listed.
    seen = list(dict.fromkeys(f.section for f in FIELDS.values()))
    assert seen == list(FIELD_SECTIONS)


def test_scale_fields_come_from_the_descriptions() -> None:
    assert SCALE_FIELDS == ("nodes", "gpus_per_node")
    assert ExperimentSpec(nodes=4).group_key() == ExperimentSpec(gpus_per_node=8).group_key()


def test_enum_descriptions_are_the_validators_lists() -> None:
    assert CLOSED == [
        "backend",
        "code_mode",
        "container_runtime",
        "decode",
        "device",
        "entry",
        "environment",
        "launcher",
        "lr_scaling",
        "observe",
        "optimizer",
        "precision",
        "schedule",
        "task",
    ]
    assert FIELDS["backend"].choices == BACKENDS
    assert FIELDS["launcher"].choices == LAUNCHERS
    assert FIELDS["precision"].choices == PRECISIONS
    assert FIELDS["model"].choices == BUILTIN_MODELS
    assert FIELDS["dataset"].choices == BUILTIN_DATASETS


@pytest.mark.parametrize("name", CLOSED)
def test_a_value_off_the_list_is_refused_with_exactly_the_described_choices(name: str) -> None:
    errors = [e for e in validate(base_for(name).replace(**{name: "nope"})) if e.field == name]
    assert len(errors) == 1, errors
    m = re.fullmatch(r"must be (empty or )?one of (.*), got 'nope'", errors[0].message)
    assert m is not None, errors[0].message
    empty = ("",) if m.group(1) else ()  # container_runtime: "" is no container
    assert (*empty, *m.group(2).split(", ")) == FIELDS[name].choices


@pytest.mark.parametrize(
    "name", sorted(n for n, f in FIELDS.items() if f.kind == "str" and not f.choices)
)
def test_free_text_fields_are_not_secretly_enums(name: str) -> None:
    # A new one-of-a-list rule in validate() needs its choices in the description too.
    for e in validate(base_for(name).replace(**{name: "zz"})):
        assert not (e.field == name and "one of" in e.message), e


def test_open_lists_are_described_as_validate_words_them() -> None:
    assert FIELDS["dataset"].allowed == (
        "synthetic, mnist, fashion_mnist, cifar10, cifar100, imagefolder, tabular or "
        "pkg.module:function"
    )
    (err,) = validate(ExperimentSpec(dataset="nope"))
    assert err.message == f"must be one of {FIELDS['dataset'].allowed}, got 'nope'"
    (err,) = validate(ExperimentSpec(model="a b"))
    assert FIELDS["model"].allowed in err.message
    assert FIELDS["backend"].allowed == "auto, nccl or gloo"
    assert FIELDS["epochs"].allowed == ""


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_form_text_is_what_spec_from_form_reads_back(name: str) -> None:
    spec = GOLDEN_SPECS[name]
    form = {f: form_text(f, getattr(spec, f)) for f in FIELDS}
    assert spec_from_form(form, ExperimentSpec(name="other", epochs=1)) == (spec, [])


def test_defaults_as_text() -> None:
    assert FIELDS["requeue"].default_text == "yes"
    assert FIELDS["lr"].default_text == ""
    assert FIELDS["time_limit"].default_text == "01:00:00"
    assert FIELDS["signal_lead_sec"].unit == "s"
    assert FIELDS["synthetic_shape"].empty == "1,28,28"
    assert form_text("nccl_env", (("A", "x y"),)) == "A='x y'"
    assert form_text("env_setup", ("a", "b c")) == "a\nb c"


def test_spec_constants_match_the_trainers() -> None:
    # The trainer stands alone (it is copied into each run); the spec offers its names from
    # ddp_tui.jobfiles, which both import (tests/unit/test_vocabulary_agrees.py). Its args
    # module imports no torch.
    from ddp_tui.trainer import args as trainer_args

    assert BUILTIN_MODELS == trainer_args.BUILTIN_MODELS
    assert BUILTIN_DATASETS == trainer_args.BUILTIN_DATASETS
    default = trainer_args.TrainConfig(run_dir=None)  # type: ignore[arg-type]
    assert default.synthetic_shape == SYNTHETIC_DEFAULT_SHAPE
    # validate() knows what every other built-in dataset feeds the model.
    assert {*DATASET_SHAPES, "synthetic"} == set(BUILTIN_DATASETS)


def test_env_values_may_hold_commas() -> None:
    # Interface lists such as ^docker,lo are common; commas also separate items.
    spec, errors = spec_from_form({"nccl_env": "GLOO_SOCKET_IFNAME=^docker,lo,NCCL_DEBUG=INFO"})
    assert errors == []
    assert spec is not None
    assert spec.nccl_env == (("GLOO_SOCKET_IFNAME", "^docker,lo"), ("NCCL_DEBUG", "INFO"))
