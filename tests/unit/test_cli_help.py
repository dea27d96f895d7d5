"""The CLI's --help and options: generated from the spec's field descriptions (FIELDS)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_tui.cli import build_parser, main
from ddp_tui.spec import FIELD_SECTIONS, FIELDS


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _option(help_text: str, option: str) -> str:
    """The entry of ``option`` in the help, on one line (argparse wraps at the terminal)."""
    m = re.search(rf"^  {re.escape(option)} (.*?)(?=^  -|^\S|\Z)", help_text, re.M | re.S)
    assert m is not None, f"{option} not in help"
    return " ".join(m.group(1).split())


@pytest.mark.parametrize("command", ["submit", "preflight"])
def test_every_spec_field_is_an_option_with_its_description(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = _help(capsys, command)
    for name, f in FIELDS.items():
        entry = _option(text, "--" + name.replace("_", "-"))
        assert " ".join(f.help.split()) in entry, name
        assert "(default: " in entry, name
    for section in FIELD_SECTIONS:
        assert f"\n{section}:\n" in text


@pytest.mark.parametrize(
    ("option", "choices", "default"),
    [
        ("--backend", "{auto,nccl,gloo}", "auto"),
        ("--launcher", "{torchrun,srun}", "torchrun"),
        ("--precision", "{auto,off,bf16,fp16}", "auto"),
        ("--optimizer", "{sgd,adamw}", "sgd"),
        ("--device", "{cuda,cpu}", "cuda"),
        ("--schedule", "{none,step,cosine}", "cosine"),
        ("--lr-scaling", "{none,linear}", "none"),
        ("--task", "{classification,regression}", "classification"),
    ],
)
def test_enum_options_list_their_choices_and_default(
    capsys: pytest.CaptureFixture[str], option: str, choices: str, default: str
) -> None:
    entry = _option(_help(capsys, "submit"), option)
    assert entry.startswith(choices + " ")
    assert entry.endswith(f"(default: {default})")


def test_open_lists_units_and_empty_defaults_are_spelled_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "submit")
    model = _option(text, "--model")
    assert model.startswith("MODEL ")
    assert "mlp, simple_cnn, a torchvision classification model" in model
    assert model.endswith("(default: simple_cnn)")
    assert "cifar100, imagefolder, tabular or pkg.module:function" in _option(text, "--dataset")
    assert _option(text, "--signal-lead-sec").endswith("(default: 120 s)")
    assert _option(text, "--partition").endswith("(default: the cluster's default)")
    assert _option(text, "--requeue").startswith("yes|no ")
    assert _option(text, "--requeue").endswith("(default: yes)")
    assert _option(text, "--data-root").endswith("(default: none)")


def test_a_wrong_choice_is_named_by_the_spec_not_by_argparse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Values stay text for spec_from_form: its error names the field and lists the choices.
    (tmp_path / "none.toml").write_text("")  # no profiles: the built-in one
    monkeypatch.setenv("DDP_TUI_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    rc = main(["--scheduler", "local", "--runs-root", str(tmp_path), "submit", "--dry-run",
               "--backend", "mpi"])  # fmt: skip
    assert rc == 2
    assert "ddp-tui: backend: must be one of auto, nccl, gloo, got 'mpi'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "scheduler"),
    [
        (["submit"], None),
        (["--scheduler", "slurm", "submit"], "slurm"),
        (["submit", "--scheduler", "slurm"], "slurm"),
        (["--scheduler", "local", "preflight"], "local"),
        (["preflight", "--scheduler", "auto"], "auto"),
        (["--scheduler", "slurm", "ls"], "slurm"),
    ],
)
def test_scheduler_goes_before_or_after_the_subcommand(
    argv: list[str], scheduler: str | None
) -> None:
    assert build_parser().parse_args(argv).scheduler == scheduler


def test_scheduler_choices_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--scheduler", "pbs", "ls"])
    assert "invalid choice: 'pbs'" in capsys.readouterr().err


def test_help_never_imports_torch() -> None:
    # A fresh interpreter: inside pytest, other tests may have imported torch already.
    code = (
        "import json, sys\n"
        "from ddp_tui.cli import main\n"
        "for argv in (['--help'], ['submit', '--help'], ['preflight', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert "--backend {auto,nccl,gloo}" in out.stdout
