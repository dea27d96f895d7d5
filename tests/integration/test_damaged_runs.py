"""A damaged run stays visible and harms no other (issue 21, section 4).

One finished run is made on the local scheduler per module; each case damages a copy of
it (tests/helpers/damage.py) beside an intact copy. Every command a user has for a run
(``ls``, ``ls --json``, ``why``, ``logs``, ``resources``, ``verify``, ``compare``) runs
through the CLI's own ``main`` and must end with an exit status, never a traceback; ``ls``
lists the intact run as it was and the damaged one, DAMAGED where the listing reads the
damaged file, with that file named.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ddp_tui.cli import main
from tests.helpers.damage import CASES, Case, copy_run

pytestmark = pytest.mark.torch

EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"


@pytest.fixture
def made_run(finished_trainer_run: Path) -> Path:
    return finished_trainer_run  # made once per suite run (tests/fixtures/shared_runs.py)


@pytest.fixture
def runs(made_run: Path, tmp_path: Path) -> Path:
    """A runs root holding an intact copy of the finished run."""
    root = tmp_path / "runs"
    copy_run(made_run, root, "healthy")
    return root


def cli(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``ddp-tui --runs-root ROOT ARGS`` in this process (the real CLI, without the cost of
    starting an interpreter per call); an exception escaping it fails the test."""
    code = main(["--runs-root", str(root), "--scheduler", "local", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def ls_rows(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    code, out, err = cli(root, capsys, "ls", "--json")
    assert code == 0, err
    # Strict JSON: NaN or Infinity would fail here.
    rows = json.loads(out, parse_constant=_not_strict)
    return {str(r["run_id"]): r for r in rows}


def digest(path: Path) -> dict[str, str]:
    """What each file under ``path`` holds (symlinks by target): to see that nothing that
    reads a run rewrote it."""
    out: dict[str, str] = {}
    if path.is_symlink() or path.is_file():
        return {".": os.readlink(path) if path.is_symlink() else _hash(path)}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(path))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = _hash(p)
    return out


def _not_strict(constant: str) -> None:
    pytest.fail(f"not strict JSON: {constant}")


def _hash(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_command_survives_a_damaged_run_beside_a_healthy_one(
    runs: Path, made_run: Path, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy = next(runs.iterdir()).name
    damaged = copy_run(made_run, runs, case.name)
    case.apply(damaged)
    before = digest(damaged)

    rows = ls_rows(runs, capsys)
    assert rows[healthy]["state"] == "COMPLETED" and rows[healthy]["epochs_done"] == 2, rows
    assert rows[healthy]["damage"] == []
    assert damaged.name in rows, f"{case.name}: the damaged run is not listed: {rows}"
    row = rows[damaged.name]
    if case.file is not None:
        assert row["state"] == "DAMAGED", row
        assert case.file in {d["file"] for d in row["damage"]}, row  # type: ignore[union-attr]
    code, table, _ = cli(runs, capsys, "ls")
    assert code == 0 and healthy in table and damaged.name in table

    run = damaged.name
    for args in (
        ("why", run),
        ("why", run, "--json"),
        ("logs", run),
        ("logs", run, "--err"),
        ("resources", run),
        ("resources", run, "--json"),
        ("verify", run),
        ("compare", run),
        ("compare", healthy),
    ):
        code, out, err = cli(runs, capsys, *args)
        assert code in (0, 1, 2), (args, code, err)
        assert "Traceback" not in out + err, (args, out, err)
        if "--json" in args and out.strip():
            json.loads(out, parse_constant=_not_strict)
    code, why, _ = cli(runs, capsys, "why", run)
    if case.file is not None:
        assert code == 1 and "DAMAGED" in why and case.file in why, why
        code, checks, _ = cli(runs, capsys, "verify", run)
        assert code == 1 and "[FAIL] the run directory is intact: DAMAGED" in checks, checks
    # The damaged files are as they were: reading a run never rewrites it (verify may add
    # sacct.txt, the app's own file, to a run without one).
    after = {k: v for k, v in digest(damaged).items() if k != "sacct.txt"}
    assert after == {k: v for k, v in before.items() if k != "sacct.txt"}


def test_one_listing_shows_every_damaged_run_and_every_healthy_one(
    runs: Path, made_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All the damages at once, in one runs root, read by the installed command."""
    healthy = next(runs.iterdir()).name
    damaged = {}
    for case in CASES:
        d = copy_run(made_run, runs, case.name)
        case.apply(d)
        damaged[d.name] = case
    env = dict(os.environ)
    res = subprocess.run(
        [EXE, "--runs-root", str(runs), "--scheduler", "local", "ls"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    lines = {line.split("\t")[0]: line for line in res.stdout.splitlines()}
    assert "\tCOMPLETED\t" in lines[healthy]
    for run_id, case in damaged.items():
        assert run_id in lines, f"{case.name} is not listed"
        if case.file is not None:
            assert "\tDAMAGED\t" in lines[run_id], (case.name, lines[run_id])
            assert f"! {run_id}: {case.file}" in res.stdout, case.name


def test_ls_json_prints_null_for_a_nan_loss(
    runs: Path, made_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = copy_run(made_run, runs, "nanloss")
    metrics = damaged / "metrics.csv"
    lines = metrics.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[-1].split(",")
    cells[header.index("train_loss")] = "nan"
    cells[header.index("throughput_samples_per_sec")] = "inf"
    metrics.write_text("\n".join([*lines[:-1], ",".join(cells)]) + "\n")
    row = ls_rows(runs, capsys)[damaged.name]
    assert row["train_loss"] is None and row["throughput"] is None
    assert row["state"] == "COMPLETED"  # a diverged loss is no damage


def _nobody_can_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root, to make a file that a user cannot read"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux), to run ddp-tui as nobody"
    return None


@pytest.mark.skipif(_nobody_can_run() is not None, reason=str(_nobody_can_run()))
def test_an_unreadable_file_hides_no_run(made_run: Path) -> None:
    """spec.json or run.json with mode 000: root reads them anyway, so ``ls`` runs as
    nobody, to whom they are unreadable."""
    base = Path(tempfile.mkdtemp(prefix="ddp-tui-unreadable-"))
    try:
        os.chmod(base, 0o755)
        runs = base / "runs"
        healthy = copy_run(made_run, runs, "healthy")
        spec_000 = copy_run(made_run, runs, "spec000")
        run_000 = copy_run(made_run, runs, "run000")
        state = base / "state"
        state.mkdir()
        (state / "config.toml").write_text('[profiles.local]\nscheduler = "local"\n')
        os.chown(state, 65534, 65534)
        for p in (base, runs, healthy, spec_000, run_000):
            os.chmod(p, 0o755)
        for d in (healthy, spec_000, run_000):
            for dirpath, _, filenames in os.walk(d):
                os.chmod(dirpath, 0o755)
                for f in filenames:
                    os.chmod(Path(dirpath, f), 0o644)
        os.chmod(spec_000 / "spec.json", 0)
        os.chmod(run_000 / "run.json", 0)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(state),
            "XDG_STATE_HOME": str(state),
            "DDP_TUI_CONFIG": str(state / "config.toml"),
        }
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", EXE]
        res = subprocess.run(
            [*cmd, "--runs-root", str(runs), "--scheduler", "local", "ls", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        if res.returncode != 0 and "Permission denied" in res.stderr and "python" in res.stderr:
            pytest.skip(f"nobody cannot run this checkout's interpreter: {res.stderr[:200]}")
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        rows = {r["run_id"]: r for r in json.loads(res.stdout)}
        assert rows[healthy.name]["state"] == "COMPLETED"
        for run, file in ((spec_000, "spec.json"), (run_000, "run.json")):
            assert rows[run.name]["state"] == "DAMAGED", rows[run.name]
            problems = {d["file"]: d["problem"] for d in rows[run.name]["damage"]}
            assert "cannot be read" in problems[file], problems
    finally:
        shutil.rmtree(base, ignore_errors=True)
