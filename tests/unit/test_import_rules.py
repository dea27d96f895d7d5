"""The import rules of docs/architecture.md ("The layers"), checked in fresh interpreters
through sys.modules (lint-imports checks the same statically).

A fresh subprocess is the only honest check: inside pytest, other tests have
already imported textual and torch.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ddp_tui"


def _modules_after_import(module: str) -> set[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _top(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


HEADLESS = ["ddp_tui.spec", "ddp_tui.reports.results", "ddp_tui.config", "ddp_tui.remote.cluster"]


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_core_never_imports_textual_or_torch(module: str) -> None:
    tops = _top(_modules_after_import(module))
    assert "textual" not in tops, f"{module} pulled in textual"
    assert "torch" not in tops, f"{module} pulled in torch"


def test_remote_package_never_imports_textual() -> None:
    # Every module of the cluster layer, its subpackages (ssh/, local/, slurm/) included.
    remote = sorted(
        ".".join(("ddp_tui", *p.relative_to(SRC).with_suffix("").parts))
        for p in (SRC / "remote").rglob("*.py")
        if p.stem not in ("__init__", "__main__")
    )
    code = (
        "import importlib, json, sys\n"
        f"for m in {remote!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    tops = _top(set(json.loads(out.stdout.strip().splitlines()[-1])))
    assert "textual" not in tops
    assert "torch" not in tops


@pytest.mark.parametrize("module", ["ddp_tui.cli", "ddp_tui.tui.app"])
def test_app_entry_point_never_imports_torch(module: str) -> None:
    tops = _top(_modules_after_import(module))
    assert "torch" not in tops
    assert "torchvision" not in tops


#: What plain ``ddp-tui`` imports before its first frame: the command line's app path, the
#: app, its first screen and the profiles.
FIRST_FRAME = (
    "ddp_tui.cli.entry, ddp_tui.cli.app, ddp_tui.tui.app, ddp_tui.tui.screens.jobs, ddp_tui.config"
)


def test_the_first_frame_waits_for_neither_the_spec_nor_the_cluster_layer() -> None:
    """The jobs screen paints before the connect worker imports the facade: the spec package,
    the read model, the job templates and the subcommands' parsers come after (startup is
    benchmarked in benchmarks/bench_tui.py; this holds the imports that make it so)."""
    loaded = _modules_after_import(FIRST_FRAME)
    late = sorted(
        m
        for m in loaded
        if m.startswith(("ddp_tui.spec", "ddp_tui.remote.model.views", "ddp_tui.remote.cluster"))
        # The efficiency cells' wording, not the usage report's machinery (right-sizing...).
        or m in {"ddp_tui.reports.efficiency", "ddp_tui.reports.accounting"}
        # Asked for with the first question, the first foreign row.
        or m in {"ddp_tui.tui.modals", "ddp_tui.diagnosis"}
        or m in {"ddp_tui.cli.subcommands", "jinja2", "paramiko", "pandas"}
    )
    assert late == [], f"imported before the first frame: {late}"


def test_trainer_imports_nothing_else_from_ddp_tui() -> None:
    """Static check over every trainer module (it is copied into each run dir with only
    ``ddp_tui.jobfiles``, the run files it shares with a script's wrapper)."""
    allowed_ddp = ("ddp_tui.trainer", "ddp_tui", "ddp_tui.jobfiles")
    offenders: list[str] = []
    for path in (SRC / "trainer").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if (
                    top == "ddp_tui"
                    and not name.startswith(allowed_ddp[0])
                    and name not in allowed_ddp
                ):
                    offenders.append(f"{path.name}: {name}")
                if top in {"textual", "pandas", "paramiko", "jinja2", "rich"}:
                    offenders.append(f"{path.name}: {name}")
    assert not offenders, offenders


def test_trainer_runs_from_a_bare_snapshot(tmp_path: Path) -> None:
    """The job-side code exactly as a run directory gets it (``code/``) imports without the
    rest of the package: the trainer, the script runner, the reporting helper and the resource
    sampler."""
    from ddp_tui.remote.backends.executor import LocalExecutor
    from ddp_tui.remote.store.runs import RunStore

    store = RunStore(LocalExecutor(), str(tmp_path / "runs"), code_source=SRC)
    LocalExecutor().upload_files(store.code_files(), str(tmp_path / "code"))
    probe = (
        "import ddp_tui.trainer, ddp_tui.trainer.run_info, ddp_tui.scriptrun.runner, "
        "ddp_tui_report, ddp_tui.telemetry.cli, sys; print(ddp_tui.trainer.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "code"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path) in out.stdout


def test_every_cluster_layer_module_has_a_place_in_the_facade_contract() -> None:
    """import-linter checks only the modules a layers contract names, so a new module in
    ``remote/`` that the contract forgot would be free to import the facade. Name them all."""
    import tomllib

    config = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    (facade,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "facade"]
    named = {
        name.strip() for layer in facade["layers"] for name in layer.replace("|", ":").split(":")
    }
    present = {
        p.stem if p.is_file() else p.name
        for p in (SRC / "remote").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert present - named == set(), "modules of remote/ missing from the facade contract"
    assert named - present == set(), "the facade contract names modules that do not exist"
