"""A user's script on the command line, the way it is typed: ``--script PATH`` implies
``--entry script``, option values may begin with ``-``, and torchrun's form
``ddp-tui submit [options] -- train.py [script args...]`` sets the script and its words.

argparse alone gets all three wrong. A spec option's default is the built-in trainer, so a
``--script`` without ``--entry script`` ran a model nobody asked for. argparse reads a value
whose first word prefixes one of ddp-tui's own options as that option
(``--script-args '--dataset=x --device=cpu'`` is "expected one argument"). And the words after
``--`` are a script's command line, which no option of the spec holds as such.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence

from ddp_tui.spec import FieldError

#: The subcommands whose parsers take the spec's options (and so a script's command line).
SPEC_COMMANDS = ("submit", "preflight")

#: Spec options whose value is shell words that may begin with ``-``: a script's options,
#: ``-m package.module``, sbatch's and the trainer's flags. Their next word is their value,
#: whatever it looks like, as for an option of torchrun's or sbatch's own.
WORD_OPTIONS = frozenset({"--script", "--script-args", "--extra-sbatch", "--extra-trainer-args"})

#: Where :func:`add_command_argument` keeps the words of ``-- train.py [args...]``.
COMMAND_DEST = "script_command"

#: Programs that launch a script rather than being one: ``-- torchrun train.py`` would run
#: torchrun under ddp-tui's own torchrun.
LAUNCHERS = frozenset(
    {"torchrun", "python", "python3", "srun", "mpirun", "accelerate", "deepspeed", "bash", "sh"}
)

#: What a wrong use of the torchrun form is told.
FORM = "ddp-tui submit [options] -- train.py [script args...]"


def attach_word_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with each :data:`WORD_OPTIONS` option and its next word joined as
    ``--option=value``, the one spelling argparse never mistakes for an option; the words
    after the first ``--`` are the script's and stay as they are."""
    out: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return out + words[i:]
        if word in WORD_OPTIONS and i + 1 < len(words) and words[i + 1] != "--":
            out.append(f"{word}={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def add_command_argument(parser: argparse.ArgumentParser) -> None:
    """The trailing ``-- SCRIPT [ARGS...]`` of a parser that takes the spec's options."""
    parser.add_argument(
        COMMAND_DEST,
        nargs=argparse.REMAINDER,
        metavar="-- SCRIPT [ARGS]",
        help="torchrun's form: the first word after -- is your script (or -m package.module), "
        "the rest its arguments, passed on exactly; the same as --script and --script-args",
    )


def command_words(args: argparse.Namespace, argv: Sequence[str]) -> list[str] | None:
    """The script's command line given after ``--`` (None when there is none).

    Raises ValueError for words before any ``--`` that no option takes, which argparse
    would have refused had the parser not been given the trailing command line."""
    words = list(getattr(args, COMMAND_DEST, None) or [])
    # Python versions differ on whether argparse keeps the ``--`` in a REMAINDER; the words
    # are taken from the command line itself, after its first ``--``.
    if words and words[0] == "--":
        words = words[1:]
    if "--" not in argv:
        if words:
            raise ValueError(
                f"unrecognized arguments: {shlex.join(words)} (a script's own command line "
                f"goes after --: {FORM})"
            )
        return None
    after = list(argv[list(argv).index("--") + 1 :])
    if words != after:
        # Words that no option took came before the ``--``: argparse began the command
        # line at them.
        tail = len(words) - len(after)
        stray = words[:tail] if tail > 0 and words[tail:] == after else words
        if stray and stray[-1] == "--":
            stray = stray[:-1]
        raise ValueError(
            f"unrecognized arguments before --: {shlex.join(stray)} (a script's own command "
            f"line goes after --: {FORM})"
        )
    return after


def script_fields(words: Sequence[str]) -> dict[str, str]:
    """The ``script`` and ``script_args`` fields' text of torchrun's form ``train.py
    [args...]`` or ``-m package.module [args...]``; ``script_args`` is quoted so that
    splitting it into shell words gives ``args`` back exactly.

    Raises ValueError naming what is wrong."""
    if not words:
        raise ValueError(f"-- is followed by no script: {FORM}")
    first = words[0]
    if first == "-m":
        if len(words) < 2:
            raise ValueError("-- -m is followed by no module: -- -m package.module [args...]")
        script, rest = f"-m {words[1]}", words[2:]
    elif first.startswith("-"):
        raise ValueError(
            f"the first word after -- is the script (train.py or -m package.module), got "
            f"{first!r}: ddp-tui's own options go before --"
        )
    elif os.path.basename(first) in LAUNCHERS or os.path.basename(first).startswith("python3."):
        raise ValueError(
            f"the first word after -- is the script, not a launcher ({first!r}): ddp-tui runs "
            f"it under torchrun itself, so write {FORM}"
        )
    else:
        script, rest = first, words[1:]
    return {"script": script, "script_args": shlex.join(rest)}


def script_form(args: argparse.Namespace, argv: Sequence[str]) -> list[FieldError]:
    """Apply the script's command line to the parsed ``args`` of a spec command: the words
    after ``--`` become ``--script``/``--script-args``, and a script implies ``--entry
    script``. Returns the refusals, each naming the options that clash."""
    try:
        words = command_words(args, argv)
        fields = None if words is None else script_fields(words)
    except ValueError as exc:
        return [FieldError("script", str(exc))]
    errors: list[FieldError] = []
    if fields is not None:
        for name, option in (("script", "--script"), ("script_args", "--script-args")):
            if getattr(args, f"spec_{name}", None) is not None:
                errors.append(
                    FieldError(
                        name,
                        f"{option} and the script after -- both give the script's "
                        f"{'arguments' if name == 'script_args' else 'path'}: use one of them",
                    )
                )
        if errors:
            return errors
        args.spec_script, args.spec_script_args = fields["script"], fields["script_args"]
    script = getattr(args, "spec_script", None)
    if not script:
        return []
    entry = getattr(args, "spec_entry", None)
    if entry is None:
        args.spec_entry = "script"  # naming a script is choosing to run it
    elif entry == "trainer":
        given = "the script after --" if fields is not None else "--script"
        errors.append(
            FieldError(
                "entry",
                f"--entry trainer runs ddp-tui's built-in trainer, but {given} names your own "
                "script: drop --entry trainer to run the script (a script implies --entry "
                "script), or drop the script to run the trainer",
            )
        )
    return errors
