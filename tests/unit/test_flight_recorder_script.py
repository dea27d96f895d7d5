"""The job script turns PyTorch's NCCL flight recorder on for NCCL training, where torch has it.

The scripts run with bash under the FAKE python of test_templates.py: asked for torch's
version (``-c``), it answers ``FAKE_TORCH_VERSION``; as the launcher it records its
environment. What a real torch then does with these variables is the GPU check's business
(scripts/flight_recorder_gpu_check.py); the version query itself runs against this machine's
real torch in tests/integration/test_flight_recorder_local.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.sbatch_templates import render_preflight, render_training
from ddp_tui.spec import ExperimentSpec, validate
from tests.golden.specs import GOLDEN_SPECS
from tests.unit.test_templates import Job, make_fake_bin

RECORDER_VARS = (
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
)
NCCL_1NODE = ExperimentSpec(gpus_per_node=2, backend="nccl", device="cuda")
SCRIPT_NCCL = ExperimentSpec(
    entry="script", script="/home/u/proj/train.py", gpus_per_node=2, backend="nccl"
)


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    return make_fake_bin(tmp_path)


def run_job(tmp_path: Path, fake_bin: Path, spec: ExperimentSpec, **env: str) -> tuple[Job, str]:
    assert validate(spec) == []
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run(DDP_TUI_SCHEDULER="local", **env)
    assert rc == 0, out
    return job, out


def recorder_line(out: str) -> str:
    (line,) = [ln for ln in out.splitlines() if "NCCL flight recorder" in ln]
    return line


@pytest.mark.parametrize(
    "spec",
    [GOLDEN_SPECS["4node_8gpu_nccl"], GOLDEN_SPECS["srun_per_gpu"], NCCL_1NODE, SCRIPT_NCCL],
    ids=["torchrun-multi", "srun", "torchrun-single", "script"],
)
def test_nccl_training_scripts_carry_the_recorder(spec: ExperimentSpec) -> None:
    script = render_training(spec, "/r")
    assert all(name in script for name in RECORDER_VARS)
    assert 'FR_PREFIX="$RUN_DIR/nccl_trace/${FR_JOB:-$JOB_ID}/rank_"' in script
    assert "import torch" not in script  # the version comes from the metadata, in ms


@pytest.mark.parametrize(
    "spec",
    [GOLDEN_SPECS["2node_gloo_cpu"], GOLDEN_SPECS["1node_1gpu"], GOLDEN_SPECS["script_2node"]],
    ids=["gloo-cpu", "gloo-gpu", "script-gloo"],
)
def test_gloo_scripts_and_preflights_do_not(spec: ExperimentSpec) -> None:
    assert "flight recorder" not in render_training(spec, "/r")
    nccl_preflight = render_preflight(GOLDEN_SPECS["4node_8gpu_nccl"], "/r")
    assert "flight recorder" not in nccl_preflight


@pytest.mark.parametrize(
    ("spec", "version", "size_var", "file_var"),
    [
        (NCCL_1NODE, "2.15.0", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"),
        (SCRIPT_NCCL, "2.11.0a0+git", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"),
        (NCCL_1NODE, "2.10.1", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
        (SCRIPT_NCCL, "2.5.0", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
    ],
    ids=["trainer-2.15", "script-2.11", "trainer-2.10", "script-2.5"],
)
def test_a_torch_that_has_it_runs_with_the_recorder_dumping_into_the_run(
    tmp_path: Path,
    fake_bin: Path,
    spec: ExperimentSpec,
    version: str,
    size_var: str,
    file_var: str,
) -> None:
    """torch 2.11 and later under the TORCH_FR_* names it warns about otherwise (torch 2.15
    here, measured: "Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use
    TORCH_FR_BUFFER_SIZE instead", once per rank), older ones under the TORCH_NCCL_* ones."""
    job, out = run_job(tmp_path, fake_bin, spec, FAKE_TORCH_VERSION=version)
    env = job.environ("py")
    prefix = f"{job.run_dir}/nccl_trace/1234/rank_"
    assert {k: v for k, v in env.items() if k in RECORDER_VARS} == {
        size_var: "2000",
        file_var: prefix,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",  # NCCL's process group reads this name only
    }
    assert (job.run_dir / "nccl_trace" / "1234").is_dir()  # torch writes, never makes it
    assert recorder_line(out) == (
        f"[ddp-tui] NCCL flight recorder: on (torch {version}, 2000 entries per rank); "
        f"a collective timeout dumps to {prefix}<rank>"
    )


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("2.4.1", "torch 2.4.1 in python3"),
        ("1.13.0+cu117", "torch 1.13.0+cu117"),
        ("", "torch not found"),
    ],
)
def test_an_older_torch_or_none_runs_without_it_and_says_so(
    tmp_path: Path, fake_bin: Path, version: str, said: str
) -> None:
    job, out = run_job(tmp_path, fake_bin, NCCL_1NODE, FAKE_TORCH_VERSION=version)
    assert not any(name in job.environ("py") for name in RECORDER_VARS)
    line = recorder_line(out)
    assert line.startswith("[ddp-tui] NCCL flight recorder: off (") and said in line, line
    assert "it needs 2.5 or later" in line
    assert not (job.run_dir / "nccl_trace").exists()


def test_an_array_task_dumps_under_its_own_job_id(tmp_path: Path, fake_bin: Path) -> None:
    job, out = run_job(
        tmp_path,
        fake_bin,
        NCCL_1NODE,
        FAKE_TORCH_VERSION="2.15.0",
        SLURM_ARRAY_JOB_ID="77",
        SLURM_ARRAY_TASK_ID="3",
    )
    assert job.environ("py")["TORCH_FR_DUMP_TEMP_FILE"].endswith("/nccl_trace/77_3/rank_")
    assert "/nccl_trace/77_3/rank_<rank>" in recorder_line(out)


@pytest.mark.parametrize("in_spec", [True, False], ids=["nccl_env", "environment"])
@pytest.mark.parametrize(
    "names",
    [
        ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
        ("TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE"),
    ],
    ids=["old-names", "fr-names"],
)
def test_a_users_own_values_win_under_either_name(
    tmp_path: Path, fake_bin: Path, names: tuple[str, str], in_spec: bool
) -> None:
    size, where = names
    mine = {size: "500", where: "/s/fr_"}
    spec = NCCL_1NODE.replace(nccl_env=tuple(mine.items())) if in_spec else NCCL_1NODE
    job, out = run_job(
        tmp_path, fake_bin, spec, FAKE_TORCH_VERSION="2.15.0", **({} if in_spec else mine)
    )
    env = job.environ("py")
    assert {k: v for k, v in env.items() if k in RECORDER_VARS} == {
        **mine,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",  # the one knob left unset is filled in
    }
    assert recorder_line(out).endswith(
        "500 entries per rank); a collective timeout dumps to /s/fr_<rank>"
    )
    assert not (job.run_dir / "nccl_trace").exists()


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}, "off (its buffer size is set to 0)"),
        ({"TORCH_FR_DUMP_ON_TIMEOUT": "false"}, "no dump on timeout (set to false)"),
    ],
)
def test_a_user_who_turned_it_off_is_told_so(
    tmp_path: Path, fake_bin: Path, env: dict[str, str], said: str
) -> None:
    job, out = run_job(tmp_path, fake_bin, NCCL_1NODE, FAKE_TORCH_VERSION="2.15.0", **env)
    for key, value in env.items():
        assert job.environ("py")[key] == value
    assert recorder_line(out).endswith(said)
