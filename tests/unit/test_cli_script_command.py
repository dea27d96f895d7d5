"""A user's script on the command line as it is typed: ``--script`` implies ``--entry
script``, values that begin with ``-`` reach the spec, and torchrun's form ``-- train.py
[args...]`` sets the script and its words exactly. Parsing only: nothing is submitted."""

from __future__ import annotations

import argparse
import shlex

import pytest

from ddp_tui.cli import build_parser, main
from ddp_tui.cli.script_command import attach_word_values, script_fields, script_form


def parsed(*argv: str) -> tuple[argparse.Namespace, list[str]]:
    """The CLI's own parse of ``ddp-tui ARGV``, with the script's command line applied, and
    the refusals as ``field: message`` lines."""
    words = attach_word_values(argv)
    args = build_parser().parse_args(words)
    errors = [f"{e.field}: {e.message}" for e in script_form(args, words)]
    return args, errors


def test_script_alone_runs_the_script_not_the_builtin_trainer() -> None:
    args, errors = parsed("submit", "--script", "train.py")
    assert errors == []
    assert args.spec_entry == "script" and args.spec_script == "train.py"


def test_no_script_leaves_the_entry_to_the_spec() -> None:
    args, errors = parsed("submit", "--epochs", "2")
    assert errors == [] and args.spec_entry is None and args.spec_script is None


def test_entry_script_with_script_is_accepted_as_before() -> None:
    args, errors = parsed("submit", "--entry", "script", "--script", "train.py")
    assert errors == [] and args.spec_entry == "script"


@pytest.mark.parametrize(
    "argv",
    [
        ("submit", "--entry", "trainer", "--script", "train.py"),
        ("preflight", "--script", "train.py", "--entry", "trainer"),
        ("submit", "--entry", "trainer", "--", "train.py"),
    ],
)
def test_entry_trainer_with_a_script_is_refused_naming_both(argv: tuple[str, ...]) -> None:
    _, errors = parsed(*argv)
    assert len(errors) == 1, errors
    assert errors[0].startswith("entry: --entry trainer")
    assert "--script" in errors[0] or "after --" in errors[0]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--script-args", "--dataset=x --device=cpu"),  # prefixes ddp-tui's --dataset
        ("--script-args", "--fast"),  # one word that looks like an option
        ("--script-args", "--epochs 3 --lr 0.1"),
        ("--script", "-m pkg.train"),
        ("--extra-sbatch", "--exclusive"),
        ("--extra-trainer-args", "--foo=1"),
    ],
)
def test_a_value_that_begins_with_a_dash_is_the_options_value(option: str, value: str) -> None:
    args, errors = parsed("submit", option, value, "--dry-run")
    assert errors == []
    assert getattr(args, "spec_" + option[2:].replace("-", "_")) == value
    assert args.dry_run  # the option after the value is still ddp-tui's


def test_the_equals_form_still_works() -> None:
    args, errors = parsed("submit", "--script=t.py", "--script-args=--dataset=x --device=cpu")
    assert errors == [] and args.spec_script_args == "--dataset=x --device=cpu"


#: Words a script may take that a shell, argparse or a naive join would change.
AWKWARD = ["--dataset=x", "two words", "it's", "$HOME", '"q"', "--", "--dry-run", "", "*"]


def test_torchrun_form_sets_the_script_and_its_words_exactly() -> None:
    args, errors = parsed("submit", "--nodes", "1", "--", "train.py", *AWKWARD)
    assert errors == []
    assert args.spec_entry == "script" and args.spec_script == "train.py"
    assert shlex.split(args.spec_script_args) == AWKWARD
    assert not args.dry_run  # "--dry-run" after -- is the script's, not ddp-tui's
    assert args.spec_nodes == "1"


def test_torchrun_form_with_a_module() -> None:
    args, errors = parsed("preflight", "--", "-m", "pkg.train", "--lr", "1")
    assert errors == []
    assert args.spec_script == "-m pkg.train" and shlex.split(args.spec_script_args) == [
        "--lr",
        "1",
    ]


def test_torchrun_form_with_no_args_gives_empty_script_args() -> None:
    assert script_fields(["train.py"]) == {"script": "train.py", "script_args": ""}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("submit", "--script", "a.py", "--", "b.py"), ["script: --script and the script after"]),
        (
            ("submit", "--script-args", "--x", "--", "b.py"),
            ["script_args: --script-args and the script after"],
        ),
        (("submit", "--"), ["script: -- is followed by no script"]),
        (("submit", "--", "--lr", "1"), ["script: the first word after -- is the script"]),
        (("submit", "--", "torchrun", "t.py"), ["script: the first word after -- is the script"]),
        (("submit", "--", "python3.11", "t.py"), ["script: the first word after -- is the script"]),
        (("submit", "--", "-m"), ["script: -- -m is followed by no module"]),
        (("submit", "stray"), ["script: unrecognized arguments: stray"]),
        (("submit", "stray", "--", "t.py"), ["script: unrecognized arguments before --: stray"]),
    ],
)
def test_a_wrong_command_line_is_refused_with_what_to_write(
    argv: tuple[str, ...], expected: list[str]
) -> None:
    _, errors = parsed(*argv)
    assert len(errors) == len(expected), errors
    for error, start in zip(errors, expected, strict=True):
        assert error.startswith(start), error


def test_words_after_the_separator_are_never_joined() -> None:
    words = ["submit", "--", "t.py", "--script-args", "--x"]
    assert attach_word_values(words) == words


def test_other_commands_keep_argparses_separator() -> None:
    # ``--`` before a run id that begins with a dash is argparse's own meaning there.
    args = build_parser().parse_args(attach_word_values(["verify", "--", "-odd"]))
    assert args.run == "-odd"


def test_main_refuses_before_connecting_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    # The built-in profile may name no reachable scheduler: the refusal comes first anyway.
    assert main(["submit", "--entry", "trainer", "--script", "t.py", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddp-tui: entry: --entry trainer") and "--script" in err
