"""Sweeps over any field: the options and sweep files read, the members expanded, checked
and named, and the learning rate each member's trainer will use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.spec import (
    FIELDS,
    MAX_MEMBERS,
    ExperimentSpec,
    SpecError,
    Sweep,
    SweepAxis,
    effective_lr,
    expand_sweep,
    load_sweep_file,
    parse_sweep_option,
    sweep_from_options,
    validate,
    value_words,
    varying_fields,
)
from ddp_tui.spec.vocabulary import NAME_PATTERN


def base(**changes: Any) -> ExperimentSpec:
    return ExperimentSpec(name="exp", device="cpu", backend="gloo").replace(**changes)


def refused(call: Any) -> list[str]:
    """Every error ``call`` raises, as ``field: message``."""
    with pytest.raises(SpecError) as info:
        call()
    return [str(e) for e in info.value.errors]


# -- reading options ------------------------------------------------------------------------


def test_option_reads_a_field_and_its_values_as_typed() -> None:
    assert parse_sweep_option("lr=0.1, 0.01") == SweepAxis("lr", ("0.1", "0.01"))
    # The CLI's own spelling of a field, and values holding commas split on semicolons.
    assert parse_sweep_option("batch-per-gpu=32,64").field == "batch_per_gpu"
    assert parse_sweep_option("synthetic_shape=1,28,28;3,32,32").values == ("1,28,28", "3,32,32")


def test_bare_sizes_sweep_the_size_field() -> None:
    assert parse_sweep_option("1,2,4") == SweepAxis("gpus_per_node", ("1", "2", "4"))
    assert parse_sweep_option("1,2", size_field="nodes") == SweepAxis("nodes", ("1", "2"))


def test_unknown_field_is_refused_with_the_closest_names() -> None:
    (error,) = refused(lambda: parse_sweep_option("learning_rat=0.1"))
    assert error.startswith("sweep: 'learning_rat' is not a spec field")
    (error,) = refused(lambda: parse_sweep_option("batch_per_gp=32"))
    assert "did you mean batch_per_gpu" in error


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("lr=", "lr: give at least one value"),
        ("lr=0.1,,0.2", "lr: value 2 of '0.1,,0.2' is empty"),
        ("optimizer=sgd,", "each value is one of sgd or adamw"),
        ("lr=0.1,0.1", "lr: '0.1' given twice"),
        ("name=a,b", "name cannot be swept"),
    ],
)
def test_bad_option_is_refused_saying_what_is_allowed(option: str, words: str) -> None:
    (error,) = refused(lambda: parse_sweep_option(option))
    assert error.startswith("sweep: ") and words in error


def test_value_words_say_what_a_value_may_be() -> None:
    assert value_words("gpus_per_node") == "an integer from 1 to 128"
    assert value_words("lr") == "a number above 0 and at most 100"
    assert value_words("batch_per_gpu") == "an integer from 1 to 1000000 (samples)"
    assert value_words("precision") == "one of auto, off, bf16 or fp16"
    (error,) = refused(lambda: parse_sweep_option("nodes=1,"))
    assert error.endswith("each value is an integer from 1 to 1024")


def test_options_collect_every_problem() -> None:
    errors = refused(
        lambda: sweep_from_options(["lr=0.1", "lr=0.2", "lrr=1"], mode="pairs", max_concurrent=0)
    )
    assert [e.split(":")[0] for e in errors] == ["sweep", "sweep", "sweep_mode", "max_concurrent"]
    assert "lr is swept twice" in errors[1]
    assert errors[2] == "sweep_mode: must be grid or zip, got 'pairs'"
    assert refused(lambda: sweep_from_options([])) == [
        "sweep: give at least one field and its values, e.g. lr=0.1,0.01, or sizes 1,2,4"
    ]


# -- members --------------------------------------------------------------------------------


def test_grid_is_the_product_with_the_first_field_slowest() -> None:
    sweep = sweep_from_options(["lr=0.1,0.01,0.001", "batch_per_gpu=32,64"], max_concurrent=2)
    assert sweep.fields == ("lr", "batch_per_gpu") and sweep.count() == 6
    members = expand_sweep(base(), sweep)
    assert [m.index for m in members] == list(range(6))
    assert [(m.spec.lr, m.spec.batch_per_gpu) for m in members] == [
        (0.1, 32),
        (0.1, 64),
        (0.01, 32),
        (0.01, 64),
        (0.001, 32),
        (0.001, 64),
    ]
    assert members[1].label == "lr=0.1 batch_per_gpu=64"
    assert members[1].spec.name == "exp-lr0.1-b64"
    assert varying_fields(members) == ("batch_per_gpu", "lr")
    assert varying_fields(members[:1]) == ()


def test_zip_pairs_lists_of_one_length() -> None:
    sweep = sweep_from_options(["lr=0.1,0.2", "optimizer=sgd,adamw"], mode="zip")
    members = expand_sweep(base(), sweep)
    assert [(m.spec.lr, m.spec.optimizer, m.spec.name) for m in members] == [
        (0.1, "sgd", "exp-lr0.1-sgd"),
        (0.2, "adamw", "exp-lr0.2-adamw"),
    ]


def test_zip_of_unequal_lists_names_each_length() -> None:
    sweep = sweep_from_options(["lr=0.1,0.2,0.3", "seed=1,2"], mode="zip")
    (error,) = refused(lambda: expand_sweep(base(), sweep))
    assert "lr has 3, seed has 2 values" in error


def test_size_sweep_keeps_its_names() -> None:
    members = expand_sweep(base(), sweep_from_options(["1,2,4"]))
    assert [m.spec.name for m in members] == ["exp-g1", "exp-g2", "exp-g4"]
    assert [m.spec.gpus_per_node for m in members] == [1, 2, 4]
    nodes = expand_sweep(base(), sweep_from_options(["1,2"], size_field="nodes"))
    assert [m.spec.name for m in nodes] == ["exp-n1", "exp-n2"]


def test_size_sweep_combines_with_a_field() -> None:
    members = expand_sweep(base(), sweep_from_options(["1,2", "lr=0.1,0.2"]))
    assert [m.spec.name for m in members] == [
        "exp-g1-lr0.1",
        "exp-g1-lr0.2",
        "exp-g2-lr0.1",
        "exp-g2-lr0.2",
    ]
    assert varying_fields(members) == ("gpus_per_node", "lr")


def test_bad_value_refuses_the_sweep_naming_member_and_field() -> None:
    errors = refused(lambda: expand_sweep(base(), sweep_from_options(["lr=0.1,abc"])))
    assert errors == ["sweep[1] lr: must be a number, got 'abc'"]
    # Every member's errors at once, a cross-field one with the member's values.
    sweep = sweep_from_options(["epochs=1,5,2", "lr=500,0.1"])
    errors = refused(lambda: expand_sweep(base(warmup_epochs=2), sweep))
    assert "sweep[0] warmup_epochs: must be below epochs (1), got 2 (in epochs=1 lr=500)" in errors
    assert [e.split(":")[0] for e in errors if "lr:" in e] == [
        "sweep[0] lr",
        "sweep[2] lr",
        "sweep[4] lr",
    ]


def test_an_error_of_the_base_is_said_once() -> None:
    errors = refused(lambda: expand_sweep(base(workers=-1), sweep_from_options(["seed=1,2,3"])))
    assert errors == ["workers: must be an integer from 0 to 256, got -1"]


def test_members_equal_in_value_are_refused() -> None:
    errors = refused(lambda: expand_sweep(base(), sweep_from_options(["lr=0.1,0.10"])))
    assert errors == [
        "sweep[1]: is the same run as sweep[0] (lr=0.10 and lr=0.1); give each value once"
    ]


def test_cap_refuses_before_building_a_spec() -> None:
    # Every value is bad: had a member been built, its errors would be reported instead.
    values = ",".join(f"bad{i}" for i in range(11))
    sweep = sweep_from_options([f"lr={values}", f"seed={values}", f"epochs={values}"])
    assert sweep.count() == 1331 > MAX_MEMBERS
    assert refused(lambda: expand_sweep(base(), sweep)) == [
        "sweep: the sweep makes 1331 members, more than the cap of 1000; sweep fewer values, "
        "or split it into several sweeps"
    ]
    assert (
        "more than the cap of 3"
        in refused(lambda: expand_sweep(base(), sweep_from_options(["seed=1,2,3,4"]), cap=3))[0]
    )


def test_names_are_valid_unique_and_short_enough() -> None:
    long_base = base(name="n" * FIELDS["name"].max_len)
    sweep = sweep_from_options(["constraint=a100&ib,a100|ib,v100", "model=pkg.mod:build,resnet50"])
    members = expand_sweep(long_base, sweep) + expand_sweep(base(), sweep)
    names = [m.spec.name for m in members]
    assert len(set(names)) == len(names) == 12
    for member in members:
        assert re.fullmatch(NAME_PATTERN, member.spec.name) is not None
        assert validate(member.spec) == []
    # Refused characters become "_"; two values alike after that still get apart.
    short = [m.spec.name for m in members[6:]]
    assert short[0] == "exp-constrainta100_ib-pkg.mod_build"
    assert short[2].startswith("exp-constrainta100_ib-pkg.mod_build-")


# -- sweep files ----------------------------------------------------------------------------

_FILE = """
mode = "grid"
max_concurrent = 2

[base]
epochs = 3
download = false
extra_sbatch = ["--exclusive", "--comment=a b"]
nccl_env = { NCCL_DEBUG = "INFO" }

[sweep]
lr = [0.1, 0.01, 1e-3]
batch_per_gpu = [32, 64]
precision = "off,bf16"
"""


def test_sweep_file_round_trip() -> None:
    loaded = load_sweep_file(_FILE)
    assert loaded.sweep == Sweep(
        (
            SweepAxis("lr", ("0.1", "0.01", "0.001")),
            SweepAxis("batch_per_gpu", ("32", "64")),
            SweepAxis("precision", ("off", "bf16")),
        ),
        "grid",
        2,
    )
    assert loaded.base["epochs"] == "3" and loaded.base["download"] == "false"
    members = expand_sweep(base(), loaded.sweep)
    assert len(members) == 12
    # The base's texts are what the form reads back to the file's values.
    from ddp_tui.spec import spec_from_form

    spec, errors = spec_from_form(loaded.base, base())
    assert errors == [] and spec is not None
    assert spec.extra_sbatch == ("--exclusive", "--comment=a b")
    assert spec.nccl_env == (("NCCL_DEBUG", "INFO"),)
    assert (spec.epochs, spec.download) == (3, False)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[sweep]\nlr = [0.1,\n", "not valid TOML"),
        ("shuffle = 1\n[sweep]\nlr = [0.1]", "unknown key 'shuffle'"),
        ('[sweep]\nlr = [0.1]\nmode = "zip"', "put mode = ... above the first [table]"),
        ('mode = "pairs"\n[sweep]\nlr = [0.1]', "mode must be grid or zip, got 'pairs'"),
        ("max_concurrent = 0\n[sweep]\nlr = [0.1]", "max_concurrent must be an integer"),
        ("[base]\nepochs = 3", "a [sweep] table is required"),
        ("[sweep]\nlrr = [0.1]", "[sweep] 'lrr' is not a spec field (did you mean lr?)"),
        ("[base]\nepoch = 3\n[sweep]\nlr = [0.1]", "[base] 'epoch' is not a spec field"),
        ("[sweep]\nlr = 0.1", "[sweep] lr must be a list of values"),
        ("[sweep]\nlr = [[0.1]]", "lr takes a string, number or true/false, got [0.1]"),
        ("[sweep]\nlr = [0.1, 0.1]", "[sweep] lr: '0.1' given twice"),
        ("[base]\nlr = 0.1\n[sweep]\nlr = [0.2]", "lr is set in both [base] and [sweep]"),
    ],
)
def test_sweep_file_errors_name_the_file(text: str, words: str) -> None:
    errors = refused(lambda: load_sweep_file(text, source="grid.toml"))
    assert any(e.startswith("sweep_file: grid.toml: ") and words in e for e in errors), errors


def test_sweep_file_error_says_the_line() -> None:
    (error,) = refused(lambda: load_sweep_file("[sweep]\nlr = [0.1]\nseed = = 1\n"))
    assert "line 3" in error


# -- the learning rate ----------------------------------------------------------------------


def test_effective_lr_under_the_linear_rule() -> None:
    assert effective_lr(base(lr=0.1)) == 0.1
    assert effective_lr(base()) == 0.05 and effective_lr(base(optimizer="adamw")) == 1e-3
    linear = base(lr=0.1, lr_scaling="linear", batch_per_gpu=64, gpus_per_node=2, base_batch=32)
    assert effective_lr(linear) == pytest.approx(0.1 * 64 * 2 / 32)
    assert effective_lr(linear.replace(base_batch=None)) == pytest.approx(0.1 * 128 / 256)
    accum = linear.replace(extra_trainer_args=("--grad-accum", "4"))
    assert effective_lr(accum) == pytest.approx(0.1 * 128 * 4 / 32)
    assert effective_lr(base(entry="script", script="train.py")) is None


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"lr": 0.2, "lr_scaling": "linear", "batch_per_gpu": 48, "gpus_per_node": 3},
        {"optimizer": "adamw", "lr_scaling": "linear", "base_batch": 96, "nodes": 2},
        {"lr_scaling": "linear", "extra_trainer_args": ("--grad-accum=2", "--lr", "0.3")},
    ],
)
def test_effective_lr_is_the_trainers(changes: dict[str, Any], tmp_path: Path) -> None:
    """The trainer's own scaled_lr, over the arguments the job script gives it."""
    pytest.importorskip("torch")
    from ddp_tui.sbatch_templates import trainer_args
    from ddp_tui.trainer.args import parse_args
    from ddp_tui.trainer.optim import scaled_lr

    spec = base(**changes)
    cfg = parse_args([*trainer_args(spec), "--run-dir", str(tmp_path)])
    assert effective_lr(spec) == pytest.approx(scaled_lr(cfg, spec.world_size))
