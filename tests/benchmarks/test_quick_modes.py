"""Every benchmark still runs: each ``benchmarks/bench_*.py --quick`` exits 0 without a
traceback (benchmarks/record.py). A quick mode shrinks the workload and goes through the same
code paths; nothing here asserts a speed. A new benchmark file is picked up by itself.

The benchmarks that bring up the Slurm test cluster or the test sshd take the suite's session
fixtures instead, so that they run in the machine-wide group, one at a time with the other
tests that use them, and find them already up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((REPO / "benchmarks").glob("bench_*.py"))

#: The quick modes that use the machine-wide fixtures (brought up by the suite, reused by them).
ON_SLURM = {"bench_array_submit.py", "bench_user_jobs.py"}
OVER_SSH = {"bench_snapshot.py"}
OVER_SSH_TO_SLURM = {"bench_remote.py"}
#: The quick modes that train or load torch (torch, torchrun): out of the fast tier.
TRAINS = {
    "bench_advisor.py",
    "bench_input.py",
    "bench_metrics.py",
    "bench_trainer.py",
    "bench_observe.py",
    "bench_telemetry.py",
    "bench_clean_exit.py",
    "bench_script_metrics.py",
}
#: A quick mode's hard limit (they take seconds; this only bounds a hang).
LIMIT_SEC = 120


def quick_run(path: Path) -> tuple[int, str]:
    """Run ``path --quick`` from the repository root; its exit status and its output."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    res = subprocess.run(
        [sys.executable, str(path), "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_SEC,
        check=False,
    )
    return res.returncode, res.stdout + res.stderr


def assert_runs(path: Path) -> None:
    """Fail, with the output's tail, when the quick run exits non-zero or raised."""
    rc, out = quick_run(path)
    tail = "\n".join(out.splitlines()[-40:])
    assert rc == 0, f"{path.name} --quick exited {rc}:\n{tail}"
    assert "Traceback (most recent call last)" not in out, f"{path.name} --quick raised:\n{tail}"


def _params(names: set[str] | None) -> list[Any]:
    special = ON_SLURM | OVER_SSH | OVER_SSH_TO_SLURM
    chosen = [
        p for p in BENCHMARKS if (p.name in names if names is not None else p.name not in special)
    ]
    return [
        pytest.param(p, id=p.stem, marks=[pytest.mark.torch] if p.name in TRAINS else [])
        for p in chosen
    ]


@pytest.mark.parametrize("bench", _params(None))
def test_quick_mode_runs(bench: Path) -> None:
    assert_runs(bench)


@pytest.mark.slurm
@pytest.mark.parametrize("bench", _params(ON_SLURM))
def test_quick_mode_runs_on_the_slurm_test_cluster(bench: Path, slurm_cluster: Any) -> None:
    assert_runs(bench)


@pytest.mark.ssh
@pytest.mark.parametrize("bench", _params(OVER_SSH))
def test_quick_mode_runs_over_ssh(bench: Path, sshd_env: Any) -> None:
    assert_runs(bench)


@pytest.mark.slurm
@pytest.mark.ssh
@pytest.mark.parametrize("bench", _params(OVER_SSH_TO_SLURM))
def test_quick_mode_runs_over_ssh_to_slurm(bench: Path, slurm_cluster: Any, sshd_env: Any) -> None:
    assert_runs(bench)


def test_every_special_benchmark_exists() -> None:
    """A renamed benchmark would otherwise leave its fixture list silently empty."""
    names = {p.name for p in BENCHMARKS}
    missing = (ON_SLURM | OVER_SSH | OVER_SSH_TO_SLURM | TRAINS) - names
    assert not missing, f"named here but not in benchmarks/: {sorted(missing)}"


def test_a_benchmark_that_raises_fails_its_quick_run(tmp_path: Path) -> None:
    """The check itself can fail: a benchmark that raises, and one that exits 1."""
    raises = tmp_path / "bench_raises.py"
    raises.write_text("import sys\nassert '--quick' in sys.argv\nraise RuntimeError('broken')\n")
    with pytest.raises(AssertionError, match=r"bench_raises\.py --quick exited 1"):
        assert_runs(raises)
    exits = tmp_path / "bench_exits.py"
    exits.write_text("import sys\nprint('target missed')\nsys.exit(1)\n")
    with pytest.raises(AssertionError, match="exited 1"):
        assert_runs(exits)
    fine = tmp_path / "bench_fine.py"
    fine.write_text("import sys\nassert sys.argv[1:] == ['--quick']\nprint('ok')\n")
    assert_runs(fine)
