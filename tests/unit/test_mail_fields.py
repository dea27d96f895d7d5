"""Slurm's own mail (spec fields ``mail_type`` and ``mail_user``): rendered as #SBATCH lines
only when set, refused with the field named and what it allows."""

from __future__ import annotations

import sys

import pytest

from ddp_tui.cli import main
from ddp_tui.sbatch_templates import render_preflight, render_training
from ddp_tui.spec import ExperimentSpec, SpecError, validate
from tests.golden.specs import GOLDEN_SPECS


def _sbatch_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH --mail")]


def test_mail_fields_render_as_sbatch_lines_only_when_set() -> None:
    spec = ExperimentSpec(mail_type="END,FAIL,TIME_LIMIT_90", mail_user="me@example.org")
    assert _sbatch_lines(render_training(spec, "/r")) == [
        "#SBATCH --mail-type=END,FAIL,TIME_LIMIT_90",
        "#SBATCH --mail-user=me@example.org",
    ]
    assert _sbatch_lines(render_preflight(spec, "/r")) == _sbatch_lines(render_training(spec, "/r"))
    only_type = ExperimentSpec(mail_type="ALL")
    assert _sbatch_lines(render_training(only_type, "/r")) == ["#SBATCH --mail-type=ALL"]
    # The golden files' specs set neither (one has --mail-type in extra_sbatch, as before),
    # so test_templates' golden files prove that a spec without them renders as it did.
    assert all(g.mail_type == g.mail_user == "" for g in GOLDEN_SPECS.values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("mail_type", "END,NEVER"),
        ("mail_type", "END,"),
        ("mail_type", "END FAIL"),
        ("mail_user", "me@example.org\n#SBATCH --wrap=x"),
        ("mail_user", "a b"),
    ],
)
def test_bad_mail_values_are_refused_naming_the_field(field: str, value: str) -> None:
    errors = validate(ExperimentSpec().replace(**{field: value}))
    assert [e.field for e in errors] == [field]
    with pytest.raises(SpecError, match=field):
        render_training(ExperimentSpec().replace(**{field: value}), "/r")


def test_the_cli_takes_the_mail_options_and_names_a_bad_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The job's Python is this one: the pre-queue check asks it for torch (a fresh
    # machine's python3 has none).
    argv = ["--scheduler", "slurm", "submit", "--dry-run", "--python", sys.executable]
    assert main([*argv, "--mail-type", "END,FAIL", "--mail-user", "me@example.org"]) == 0
    assert "#SBATCH --mail-type=END,FAIL" in capsys.readouterr().out
    assert main(["--scheduler", "slurm", "submit", "--dry-run", "--mail-type", "end,fale"]) == 2
    err = capsys.readouterr().err
    assert "mail_type: must be Slurm mail types, comma-separated, from NONE, BEGIN" in err
