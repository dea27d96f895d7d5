"""Job scripts per environment: golden files (venv, conda, modules, pyxis on one and two nodes
with torchrun and srun, apptainer, singularity), the documented lines in them, and what bash
really executes with FAKE srun, apptainer, conda and module standing in for the cluster's.

The python environment's scripts are test_templates.py's golden files, unchanged. Regenerate
these with ``UPDATE_GOLDEN=1 pytest tests/unit/test_environment_templates.py``.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ddp_tui.cli import main
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.local.store import default_state_dir
from ddp_tui.sbatch_templates import render_training, sbatch_directives
from ddp_tui.sbatch_templates.container import apptainer_args, mount_words, pyxis_args
from ddp_tui.spec import ExperimentSpec, SpecError, validate
from ddp_tui.spec.environments import ENVIRONMENT_FIELDS
from tests.golden.specs import GOLDEN_SPECS, run_dir_for
from tests.unit.test_templates import Job, bash_n, make_fake_bin

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden" / "environments"
UPDATE = __import__("os").environ.get("UPDATE_GOLDEN") == "1"

NGC = "nvcr.io#nvidia/pytorch:24.05-py3"
SIF = "/shared/images/pytorch-24.05.sif"
_GPU = ExperimentSpec(
    name="r50",
    model="resnet50",
    dataset="imagefolder",
    data_root="/datasets/imagenet",
    num_classes=1000,
    partition="gpu",
    time_limit="04:00:00",
    cpus_per_task=16,
    epochs=10,
)
_PYXIS = _GPU.replace(environment="container", container_runtime="pyxis", container_image=NGC)

#: golden name -> spec; the script lands in ``golden/environments/<name>.sbatch``.
ENV_SPECS: dict[str, ExperimentSpec] = {
    "venv": _GPU.replace(
        environment="venv", python="~/venvs/torch/bin/python", modules=("python/3.11",)
    ),
    "conda": _GPU.replace(environment="conda", python="/opt/miniforge3/envs/torch/bin/python"),
    "modules": _GPU.replace(
        environment="modules",
        modules=("cuda/12.4", "pytorch/2.3"),
        env_setup=("export NCCL_IB_DISABLE=1",),
    ),
    "pyxis_1node": _PYXIS.replace(gpus_per_node=4),
    "pyxis_2node": _PYXIS.replace(
        nodes=2,
        gpus_per_node=8,
        backend="nccl",
        container_mounts=("/scratch/cache:/cache:ro",),
        nccl_env=(("NCCL_DEBUG", "WARN"),),
    ),
    "pyxis_srun": _PYXIS.replace(nodes=2, gpus_per_node=4, launcher="srun"),
    "apptainer": _GPU.replace(
        environment="container",
        container_runtime="apptainer",
        container_image=SIF,
        gpus_per_node=4,
        backend="nccl",
        data_root="~/data/imagenet",
        modules=("apptainer/1.3",),
    ),
    "singularity": _GPU.replace(
        environment="container",
        container_runtime="singularity",
        container_image="/shared/images/pt-sandbox/",
        nodes=2,
        gpus_per_node=2,
        device="cpu",
        backend="gloo",
        dataset="synthetic",
        data_root="",
        model="resnet18",
        num_classes=None,
    ),
}


def _golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / f"{name}.sbatch"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path.name} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs; if intended, run with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(ENV_SPECS))
def test_environment_script_matches_golden_and_is_bash(name: str) -> None:
    assert validate(ENV_SPECS[name]) == []
    text = render_training(ENV_SPECS[name], run_dir_for(name))
    _golden(name, text)
    res = bash_n(text)
    assert res.returncode == 0, res.stderr


def test_every_environment_golden_file_has_a_spec() -> None:
    assert {f.stem for f in GOLDEN_DIR.glob("*.sbatch")} == set(ENV_SPECS)


def _lines(script: str) -> list[str]:
    return [ln.strip() for ln in script.splitlines()]


# --------------------------------------------------------------------------- what each renders


def test_python_renders_as_before_and_the_others_export_none() -> None:
    for spec in GOLDEN_SPECS.values():
        assert spec.environment == "python"  # test_templates' golden files: unchanged
        assert not any(d.startswith("--export") for d in sbatch_directives(spec, "/r"))
    for name, spec in ENV_SPECS.items():
        assert "--export=NONE" in sbatch_directives(spec, "/r"), name
        assert "#SBATCH --export=NONE\n" in render_training(spec, "/r")


def test_venv_is_activated_after_its_modules() -> None:
    script = render_training(ENV_SPECS["venv"], "/r")
    lines = _lines(script)
    purge = next(i for i, ln in enumerate(lines) if ln.startswith("module purge || echo"))
    load = next(i for i, ln in enumerate(lines) if ln.startswith("module load python/3.11 "))
    source = next(
        i for i, ln in enumerate(lines) if ln.startswith('source "$HOME"/venvs/torch/bin/activate ')
    )
    assert purge < load < source < lines.index("export PYTHONUNBUFFERED=1")


def test_conda_uses_its_own_hook_from_the_envs_base() -> None:
    script = render_training(ENV_SPECS["conda"], "/r")
    assert 'DDP_TUI_HOOK="$(/opt/miniforge3/bin/conda shell.bash hook)"' in script
    assert "conda activate /opt/miniforge3/envs/torch ||" in script
    assert '[ "${CONDA_PREFIX:-}" = /opt/miniforge3/envs/torch ]' in script


def test_pyxis_runs_every_launch_in_srun_with_the_run_directory_mounted() -> None:
    one = render_training(ENV_SPECS["pyxis_1node"], "/r")
    assert (
        "srun --export=ALL --kill-on-bad-exit=1 --wait=60 \\\n"
        "    --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=16 \\\n"
        f"    --container-image='{NGC}' \\\n"
        '    --container-mounts="$RUN_DIR:$RUN_DIR",/datasets/imagenet:/datasets/imagenet \\\n'
        '    --container-workdir="$RUN_DIR" --no-container-mount-home \\\n'
        '    --container-env="$DDP_TUI_CONTAINER_ENV" \\\n'
        '    "$PYTHON" -m ddp_tui.telemetry.launch --interval 5 --ranks-per-node 4 -- \\\n'
        '    "$PYTHON" -m torch.distributed.run --standalone --nnodes=1 --nproc-per-node=4 \\\n'
    ) in one
    # The launcher is srun even on one node: USR2 reaches the ranks through scancel --signal.
    assert 'scancel --signal=TERM "$JOB_ID"' in one and 'kill -TERM "$LAUNCHER_PID"' not in one
    two = render_training(ENV_SPECS["pyxis_2node"], "/r")
    assert (
        '--container-mounts="$RUN_DIR:$RUN_DIR",/datasets/imagenet:/datasets/imagenet,'
        "/scratch/cache:/cache:ro \\\n"
    ) in two
    assert "--nodes=2 --ntasks=2 --ntasks-per-node=1" in two
    assert '--rdzv-backend=c10d --rdzv-endpoint="$HEAD:$PORT"' in two
    srun = render_training(ENV_SPECS["pyxis_srun"], "/r")
    assert "--nodes=2 --ntasks=8 --ntasks-per-node=4" in srun
    assert (
        '--container-env="$DDP_TUI_CONTAINER_ENV" \\\n    "$PYTHON" -m ddp_tui.telemetry.launch'
        in srun
    )


def test_apptainer_execs_with_nv_binds_and_the_run_directory_as_pwd() -> None:
    script = render_training(ENV_SPECS["apptainer"], "/r")
    assert (
        'apptainer exec --nv --bind "$RUN_DIR" --bind "$HOME"/data/imagenet --pwd "$RUN_DIR" \\\n'
        f"    {SIF} \\\n"
        '    "$PYTHON" -m ddp_tui.telemetry.launch'
    ) in script
    assert 'export "APPTAINERENV_$DDP_TUI_NAME=${!DDP_TUI_NAME}"' in script
    # torch's version for the flight recorder comes from the image's python
    assert f'FR_TORCH="$(apptainer exec {SIF} "$PYTHON" -c' in script
    sing = render_training(ENV_SPECS["singularity"], "/r")
    assert "singularity exec --bind" in sing and "--nv" not in sing  # device cpu
    assert 'export "SINGULARITYENV_$DDP_TUI_NAME=' in sing
    assert "srun --export=ALL" in sing  # two nodes: one container per node through srun


def test_the_argv_builders_quote_what_they_are_given() -> None:
    spec = ENV_SPECS["pyxis_2node"].replace(data_root="/data/my set", container_mounts=())
    words = mount_words(spec, "/r")
    assert [w.source for w in words] == ['"$RUN_DIR"', "'/data/my set'"]
    args = pyxis_args(image="a b", mounts=words, workdir='"$RUN_DIR"')
    assert args[0] == "--container-image='a b'"
    assert args[1] == """--container-mounts="$RUN_DIR:$RUN_DIR",'/data/my set':'/data/my set'"""
    assert shlex.split(args[1]) == [
        "--container-mounts=$RUN_DIR:$RUN_DIR,/data/my set:/data/my set"
    ]
    app = apptainer_args(tool="singularity", image="/i.sif", mounts=words, workdir="/w", nv=False)
    assert app == [
        "singularity",
        "exec",
        "--bind",
        '"$RUN_DIR"',
        "--bind",
        "'/data/my set'",
        "--pwd",
        "/w",
        "/i.sif",
    ]
    with pytest.raises(ValueError, match="tool"):
        apptainer_args(tool="docker", image="x", mounts=words, workdir="/w", nv=False)


@pytest.mark.parametrize(
    ("run_dir", "mounts", "words"),
    [
        ("/runs,x/r1", (), "run_dir: /runs,x/r1 cannot be mounted by pyxis"),
        (
            "/runs/r1",
            ("/elsewhere:/runs/r1",),
            "container_mounts: /elsewhere:/runs/r1: the run directory",
        ),
        ("/runs/r1", ("/other:/runs",), "a mount at or above it with another source would hide it"),
    ],
)
def test_a_run_directory_that_cannot_be_mounted_is_refused_at_render(
    run_dir: str, mounts: tuple[str, ...], words: str
) -> None:
    with pytest.raises(SpecError, match=words):
        render_training(ENV_SPECS["pyxis_1node"].replace(container_mounts=mounts), run_dir)
    # the same path mounted at itself is harmless
    render_training(ENV_SPECS["pyxis_1node"].replace(container_mounts=("/runs:/runs",)), "/runs/r1")


# --------------------------------------------------------------------------- what bash executes

FAKE_APPTAINER = r"""#!/bin/bash
# FAKE apptainer/singularity for tests: records argv and env (NUL-separated), then runs the
# command after the image on the host (its options skipped), as exec would in the image.
printf '%s\0' "$@" > "$FAKE_LOG.apptainer.$$"
env -0 > "$FAKE_LOG.apptainerenv.$$"
shift  # exec
while [ $# -gt 0 ]; do
    case "$1" in
        --nv) shift ;;
        --bind|--pwd) shift 2 ;;
        *) shift; break ;;  # the image
    esac
done
exec "$@"
"""

# A FAKE `module` shell function: records each call and keeps a list for `module -t list`.
FAKE_MODULE = (
    '() { echo "fake module $*" >> "$FAKE_LOG.calls";'
    ' case "$1" in'
    " purge) FAKE_LOADED= ;;"
    ' load) [ "$2" != missing/1 ] || return 1; FAKE_LOADED="$FAKE_LOADED $2" ;;'
    ' -t) printf "%s\\n" $FAKE_LOADED >&2 ;;'
    " esac; }"
)


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    d = make_fake_bin(tmp_path)
    for tool in ("apptainer", "singularity"):
        (d / tool).write_text(FAKE_APPTAINER)
        (d / tool).chmod(0o755)
    return d


def test_pyxis_srun_gets_the_documented_options_expanded(tmp_path: Path, fakes: Path) -> None:
    job = Job(tmp_path, fakes, "")
    job.path.write_text(render_training(ENV_SPECS["pyxis_2node"], str(job.run_dir)))
    rc, out = job.run(SLURM_PROCID="0", CUDA_VISIBLE_DEVICES="0")
    assert rc == 0, out
    (argv,) = job.argv("srun")
    run = str(job.run_dir)
    assert f"--container-image={NGC}" in argv
    assert (
        f"--container-mounts={run}:{run},/datasets/imagenet:/datasets/imagenet,/scratch/cache:/cache:ro"
        in argv
    )
    assert f"--container-workdir={run}" in argv and "--no-container-mount-home" in argv
    (env_opt,) = [a for a in argv if a.startswith("--container-env=")]
    passed = env_opt.removeprefix("--container-env=").split(",")
    for name in (
        "DDP_TUI_RUN_DIR",
        "PYTHONPATH",
        "PYTHONNOUSERSITE",
        "OMP_NUM_THREADS",
        "NCCL_DEBUG",
    ):
        assert name in passed, (name, passed)
    # never a per-task value, which each task must keep its own of
    assert not {"SLURM_PROCID", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID"} & set(passed)
    assert argv[argv.index(env_opt) + 1 :][:3] == ["python3", "-m", "ddp_tui.telemetry.launch"]
    assert "NCCL flight recorder: not set up in a pyxis container" in out


def test_apptainer_passes_ddp_tuis_variables_over_the_images(tmp_path: Path, fakes: Path) -> None:
    job = Job(tmp_path, fakes, "")
    job.path.write_text(render_training(ENV_SPECS["apptainer"], str(job.run_dir)))
    fake_module = {"BASH_FUNC_module%%": FAKE_MODULE}
    rc, out = job.run(FAKE_TORCH_VERSION="2.6.0", **fake_module)
    assert rc == 0, out
    run, home = str(job.run_dir), str(job.run_dir.parent)
    probe, launch = job.argv("apptainer")  # the flight recorder's version probe, the launch
    if probe[1] != SIF:
        probe, launch = launch, probe
    assert probe[:4] == ["exec", SIF, "python3", "-c"]
    assert launch[:8] == [
        "exec",
        "--nv",
        "--bind",
        run,
        "--bind",
        f"{home}/data/imagenet",
        "--pwd",
        run,
    ]
    assert launch[8:12] == [SIF, "python3", "-m", "ddp_tui.telemetry.launch"]
    envs = [p for p in Path(job.log).parent.glob("fake.apptainerenv.*")]
    env = max(
        (dict(i.split("=", 1) for i in p.read_bytes().decode().split("\0")[:-1]) for p in envs),
        key=len,
    )
    assert env["APPTAINERENV_DDP_TUI_RUN_DIR"] == run
    assert env["APPTAINERENV_PYTHONNOUSERSITE"] == "1"
    assert env["APPTAINERENV_PYTHONPATH"].startswith(f"{run}/code")
    assert env["APPTAINERENV_TORCH_NCCL_DEBUG_INFO_TEMP_FILE"].startswith(f"{run}/nccl_trace/")
    assert "APPTAINERENV_SLURM_JOB_ID" not in env
    assert "NCCL flight recorder: on (torch 2.6.0" in out
    # the modules load on the host, before the image starts
    assert job.calls()[:2] == ["fake module purge", "fake module load apptainer/1.3"]


def test_modules_are_purged_then_loaded_in_order_before_python(tmp_path: Path, fakes: Path) -> None:
    job = Job(tmp_path, fakes, render_training(ENV_SPECS["modules"], str(tmp_path / "run")))
    rc, out = job.run(**{"BASH_FUNC_module%%": FAKE_MODULE})
    assert rc == 0, out
    calls = job.calls()
    assert calls[:4] == [
        "fake module purge",
        "fake module load cuda/12.4",
        "fake module load pytorch/2.3",
        "fake module -t list",
    ]
    assert calls[4].startswith("fake python ")
    assert "[ddp-tui] modules: cuda/12.4 pytorch/2.3" in out
    (env,) = [job.environ("py")]
    assert env["NCCL_IB_DISABLE"] == "1"  # the set-up lines run after the modules


def test_a_module_that_fails_to_load_stops_the_job(tmp_path: Path, fakes: Path) -> None:
    spec = ENV_SPECS["modules"].replace(modules=("cuda/12.4", "missing/1"))
    job = Job(tmp_path, fakes, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run(**{"BASH_FUNC_module%%": FAKE_MODULE})
    assert rc == 2 and "[ddp-tui] module load missing/1 failed" in out
    assert not any(c.startswith("fake python") for c in job.calls())


def test_no_module_command_is_named(tmp_path: Path, fakes: Path) -> None:
    if any(Path(f).exists() for f in ("/etc/profile.d/lmod.sh", "/etc/profile.d/modules.sh")):
        pytest.skip("this machine has a module system")
    job = Job(tmp_path, fakes, render_training(ENV_SPECS["modules"], str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 2 and "[ddp-tui] no 'module' command on" in out


def test_venv_activation_reaches_the_launcher(tmp_path: Path, fakes: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # A FAKE activate: what a venv's does that matters here.
    (venv / "bin" / "activate").write_text(
        f'export VIRTUAL_ENV={venv}\nexport PATH="$VIRTUAL_ENV/bin:$PATH"\n'
    )
    spec = ExperimentSpec(environment="venv", python=f"{fakes}/python3")
    spec = spec.replace(python=str(venv / "bin" / "python3"))
    (venv / "bin" / "python3").symlink_to(fakes / "python3")
    job = Job(tmp_path, fakes, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    assert job.environ("py")["VIRTUAL_ENV"] == str(venv)


def test_conda_activation_checks_the_prefix(tmp_path: Path, fakes: Path) -> None:
    base = tmp_path / "mf"
    prefix = base / "envs" / "torch"
    (base / "bin").mkdir(parents=True)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(fakes / "python3")
    # A FAKE conda whose hook defines `conda activate` setting CONDA_PREFIX (FAKE_CONDA_BROKEN:
    # activates nothing, as an uninitialised conda would).
    hook = (
        'conda() { echo "fake conda $*" >> "$FAKE_LOG.calls"; '
        '[ -n "${FAKE_CONDA_BROKEN:-}" ] || export CONDA_PREFIX="$2"; }'
    )
    (base / "bin" / "conda").write_text(
        f"#!/bin/bash\n[ \"$1 $2\" = 'shell.bash hook' ] && echo {shlex.quote(hook)}\n"
    )
    (base / "bin" / "conda").chmod(0o755)
    spec = ExperimentSpec(environment="conda", python=str(prefix / "bin" / "python"))
    job = Job(tmp_path, fakes, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    assert job.environ("py")["CONDA_PREFIX"] == str(prefix)
    assert job.calls()[0] == f"fake conda activate {prefix}"
    rc, out = job.run(FAKE_CONDA_BROKEN="1")
    assert rc == 2 and "conda activate failed: CONDA_PREFIX is unset" in out


# --------------------------------------------------------------------------- the real CLI


def test_dry_run_of_pyxis_prints_the_documented_lines(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--scheduler", "slurm", "submit", "--dry-run", "--nodes", "2", "--gpus-per-node", "4",
        "--environment", "container", "--container-runtime", "pyxis", "--container-image", NGC,
        "--container-mounts", "/scratch/cache:/cache:ro",
    ]  # fmt: skip
    assert main(argv) == 0
    script = capsys.readouterr().out
    run_dir = next(ln.split("=", 1)[1] for ln in script.splitlines() if ln.startswith("RUN_DIR="))
    assert run_dir.startswith("/")
    assert "#SBATCH --export=NONE\n" in script
    assert f"    --container-image='{NGC}' \\\n" in script
    assert '    --container-mounts="$RUN_DIR:$RUN_DIR",/scratch/cache:/cache:ro \\\n' in script
    assert '    --container-workdir="$RUN_DIR" --no-container-mount-home \\\n' in script
    assert bash_n(script).returncode == 0


def test_dry_run_of_apptainer_prints_the_documented_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "--scheduler", "slurm", "submit", "--dry-run", "--python", "python3",
        "--environment", "container", "--container-runtime", "apptainer",
        "--container-image", SIF, "--data-root", "/datasets/mnist", "--dataset", "mnist",
    ]  # fmt: skip
    assert main(argv) == 0
    script = capsys.readouterr().out
    assert (
        'apptainer exec --nv --bind "$RUN_DIR" --bind /datasets/mnist --pwd "$RUN_DIR" \\\n'
        f"    {SIF} \\\n"
    ) in script
    assert bash_n(script).returncode == 0


def test_dry_run_refuses_a_pitfall_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--scheduler", "slurm", "submit", "--dry-run", "--environment", "container",
        "--container-runtime", "pyxis", "--container-image", "nvcr.io/nvidia/pytorch:24.05-py3",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "container_image: nvcr.io/nvidia/pytorch:24.05-py3 would be looked up on Docker Hub" in err
    )
    assert "Write nvcr.io#nvidia/pytorch:24.05-py3" in err
    local = ["--scheduler", "local", "submit", "--dry-run", "--python", sys.executable]
    assert main([*local, "--environment", "container", "--container-runtime", "pyxis",
                 "--container-image", NGC]) == 2  # fmt: skip
    assert "container_runtime: pyxis runs only inside srun" in capsys.readouterr().err


def test_a_dry_run_sends_no_environment_check_job_a_sweeps_neither(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """environment modules on the local scheduler wants a check job before a real submit; a
    dry run, of one run or of a sweep, only prints."""
    local = ["--scheduler", "local", "submit", "--dry-run", "--python", sys.executable,
             "--device", "cpu", "--environment", "modules", "--modules", "torch/2.5"]  # fmt: skip
    assert main(local) == 0
    assert main([*local, "--sweep", "lr=0.1,0.2"]) == 0
    assert "#SBATCH --export=NONE" in capsys.readouterr().out
    state = default_state_dir()
    jobs = LocalScheduler.from_state_dir(state).list_jobs() if state.exists() else []
    assert jobs == []


# --------------------------------------------------------------------------- any value, safely

_NASTY = st.one_of(
    st.sampled_from(["$(touch pwned)", "`touch pwned`", "';touch pwned;'", "a'b", "x#y", "~"]),
    st.text(alphabet=st.sampled_from(list("$`\"'\\;|&<>(){}*?!#~%=,.:/-_aZ09")), max_size=10),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runtime=st.sampled_from(["pyxis", "apptainer", "singularity"]),
    image=st.one_of(_NASTY, st.sampled_from([NGC, SIF, "/i/x'y.sif", "/i/$(id).sqsh"])),
    data_root=st.one_of(_NASTY, st.sampled_from(["/data/a b", "~/d", "/d/$HOME"])),
    mount=st.one_of(st.just(()), _NASTY.map(lambda t: (t,)), _NASTY.map(lambda t: (f"/m{t}",))),
    nodes=st.sampled_from([1, 2]),
)
def test_any_container_value_is_refused_or_reaches_the_runtime_intact(
    runtime: str, image: str, data_root: str, mount: tuple[str, ...], nodes: int
) -> None:
    spec = ExperimentSpec(
        environment="container",
        container_runtime=runtime,
        container_image=image,
        container_mounts=mount,
        dataset="mnist",
        data_root=data_root,
        nodes=nodes,
    )
    with tempfile.TemporaryDirectory() as tmp:
        fakes = make_fake_bin(Path(tmp))
        for tool in ("apptainer", "singularity"):
            (fakes / tool).write_text(FAKE_APPTAINER)
            (fakes / tool).chmod(0o755)
        job = Job(Path(tmp), fakes, "")
        try:
            script = render_training(spec, str(job.run_dir))
        except SpecError as err:
            assert all(e.field in (*ENVIRONMENT_FIELDS, "run_dir") for e in err.errors)
            event("refused")
            return
        event("rendered")
        assert bash_n(script).returncode == 0
        job.path.write_text(script)
        rc, out = job.run()
        assert rc == 0, out
        assert not list(Path(tmp).rglob("pwned")), out
        (argv,) = job.argv("srun") if runtime == "pyxis" or nodes > 1 else job.argv("apptainer")
        if runtime == "pyxis":
            assert f"--container-image={image}" in argv
        else:
            assert image in argv
