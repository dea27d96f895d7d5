"""Environments and containers in the spec (spec/environments.py): the fields' own checks, the
cross-field rules validate() runs, image references and mounts read as each runtime reads
them, and the pitfalls refused or warned before the queue, each message naming its field and
the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddp_tui.remote.backends.local.directives import exported_environment
from ddp_tui.spec import ExperimentSpec, validate
from ddp_tui.spec.environments import (
    InterpreterFacts,
    Mount,
    conda_executable,
    env_prefix,
    environment_issues,
    parse_image,
    parse_mount,
)

PYXIS = ExperimentSpec(
    environment="container", container_runtime="pyxis", container_image="nvcr.io#nvidia/pt:24.05"
)
APPTAINER = ExperimentSpec(
    environment="container", container_runtime="apptainer", container_image="/images/pt.sif"
)


def issues(
    spec: ExperimentSpec, scheduler: str = "slurm", **facts: str
) -> tuple[list[str], list[str]]:
    errors, warnings = environment_issues(
        spec, scheduler=scheduler, facts=InterpreterFacts(**facts) if facts else None
    )
    return [str(e) for e in errors], warnings


# --------------------------------------------------------------------------- image references


@pytest.mark.parametrize(
    ("text", "runtime", "kind", "registry", "name"),
    [
        ("nvcr.io#nvidia/pt:24.05-py3", "pyxis", "registry", "nvcr.io", "nvidia/pt:24.05-py3"),
        ("me@nvcr.io#nvidia/pt:24.05-py3", "pyxis", "registry", "nvcr.io", "nvidia/pt:24.05-py3"),
        ("ubuntu:22.04", "pyxis", "registry", "", "ubuntu:22.04"),
        ("/images/pt.sqsh", "pyxis", "squashfs", "", ""),
        ("./pt.sqsh", "pyxis", "squashfs", "", ""),
        ("images/pt.sqsh", "pyxis", "registry", "", "images/pt.sqsh"),  # pyxis#127
        ("/images/pt.sif", "apptainer", "sif", "", ""),
        ("/images/pt/", "apptainer", "sandbox", "", ""),
        ("docker://nvcr.io/nvidia/pt:1", "apptainer", "registry", "docker", "nvcr.io/nvidia/pt:1"),
        ("pt.sif", "singularity", "sif", "", ""),
        ("localhost/ddptui-test", "podman", "registry", "localhost", "ddptui-test"),
        ("docker.io/library/python:3.11", "podman", "registry", "docker.io", "library/python:3.11"),
        ("python:3.11", "podman", "registry", "", "python:3.11"),
    ],
)  # fmt: skip
def test_an_image_reference_is_read_as_its_runtime_reads_it(
    text: str, runtime: str, kind: str, registry: str, name: str
) -> None:
    ref = parse_image(text, runtime)
    assert (ref.kind, ref.registry, ref.name) == (kind, registry, name)
    assert ref.is_file == (kind != "registry")
    assert ref.path == (text if ref.is_file else "")


# --------------------------------------------------------------------------- mounts


@pytest.mark.parametrize(
    ("text", "mount"),
    [
        ("/data", Mount("/data", "/data")),
        ("/data:/d", Mount("/data", "/d")),
        ("/data:/d:ro", Mount("/data", "/d", True)),
        ("/data::ro", Mount("/data", "/data", True)),
        ("/data/:/d/:rw", Mount("/data", "/d")),
    ],
)
def test_a_mount_is_src_dst_mode(text: str, mount: Mount) -> None:
    assert parse_mount(text) == mount


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("data:/data", "absolute"),
        ("./data:/data", "absolute"),
        ("/data:data", "target must be an absolute"),
        ("/a,/b", "one mount per item"),
        ("/a:/b:ro:x", "at most SRC:DST:MODE"),
        ("/a:/b:rx", "ro or rw"),
        ("/data:ro", "write /data:/data:ro"),
        ("/a b", "without spaces"),
        ("/a$HOME", "no quotes, $"),
        ("", "without spaces"),
    ],
)
def test_a_bad_mount_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("$", r"\$")):
        parse_mount(text)


_SEGMENT = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=8)
_PATH = st.lists(_SEGMENT, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


@given(_PATH, st.one_of(st.none(), _PATH), st.booleans())
def test_any_accepted_mount_writes_back_to_itself(
    source: str, target: str | None, ro: bool
) -> None:
    text = source + (f":{target}" if target else ":" if ro else "") + (":ro" if ro else "")
    mount = parse_mount(text)
    assert parse_mount(mount.text) == mount
    assert mount.covers(mount.source) and mount.read_only == ro


# --------------------------------------------------------------------------- validate()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"container_image": "x:1"}, "container_image: is used only with environment"),
        ({"container_runtime": "pyxis"}, "container_runtime: is used only with environment"),
        ({"container_mounts": ("/d",)}, "container_mounts: is used only with environment"),
        ({"environment": "container"}, "container_runtime: is required with environment"),
        ({"environment": "container", "container_runtime": "pyxis"}, "container_image: is"),
        ({"environment": "modules"}, "modules: environment modules needs at least one module"),
        ({"modules": ("cuda/12.4",)}, "modules: are loaded with environment modules, venv or"),
        ({"environment": "venv"}, "python: environment venv needs the env's own python, PREFIX"),
        ({"environment": "conda", "python": "/opt/py"}, "python: environment conda needs the"),
        (
            {"modules": ("cuda/12.4",), "environment": "container", "container_runtime": "pyxis",
             "container_image": "x"},
            "modules: load on the host, and pyxis runs the job inside its image",
        ),
    ],
)  # fmt: skip
def test_the_environment_fields_apply_together(changes: dict[str, object], expected: str) -> None:
    (error,) = validate(ExperimentSpec(**changes))  # type: ignore[arg-type]
    assert str(error).startswith(expected), error


@pytest.mark.parametrize(
    "spec",
    [
        ExperimentSpec(),
        ExperimentSpec(environment="venv", python="/v/bin/python"),
        ExperimentSpec(environment="modules", modules=("cuda/12.4", "py-torch@2.3")),
        ExperimentSpec(environment="conda", python="/c/envs/t/bin/python", modules=("gcc",)),
        PYXIS,
        APPTAINER.replace(modules=("apptainer/1.3",)),
    ],
)
def test_environments_that_make_sense_pass(spec: ExperimentSpec) -> None:
    assert validate(spec) == []
    assert issues(spec)[0] == []


# --------------------------------------------------------------------------- the pitfalls


PITFALLS = [
    # P1: a .sqsh without / or ./ is a registry name to pyxis
    (PYXIS.replace(container_image="images/pt.sqsh"), "slurm",
     ["container_image: images/pt.sqsh would be pulled from a registry", "NVIDIA/pyxis#127",
      "/home/me/images/pt.sqsh"]),
    # P2: ./ is the new run directory
    (PYXIS.replace(container_image="./pt.sqsh"), "slurm",
     ["container_image: ./pt.sqsh is relative to the job's working directory", "absolute path"]),
    # P3: a registry host before '/'
    (PYXIS.replace(container_image="nvcr.io/nvidia/pytorch:24.05-py3"), "slurm",
     ["looked up on Docker Hub", "NVIDIA/pyxis#168", "Write nvcr.io#nvidia/pytorch:24.05-py3"]),
    (PYXIS.replace(container_image="reg.example:5000/team/img:1"), "slurm",
     ["Write reg.example:5000#team/img:1"]),
    # P4: '#/'
    (PYXIS.replace(container_image="192.168.61.4:5000#/cosmoflow:0.4"), "slurm",
     ["has a '/' after '#'", "NVIDIA/pyxis#112", "write 192.168.61.4:5000#cosmoflow:0.4"]),
    # P5: the batch shell stays on the host; the environment owns --export
    (PYXIS.replace(extra_sbatch=("--container-image=x",)), "slurm",
     ["extra_sbatch: --container-image=x would run the batch shell itself in the container",
      "use environment container"]),
    (ExperimentSpec(extra_sbatch=("--container-mounts=/a:/a",)), "slurm",
     ["extra_sbatch: --container-mounts=/a:/a would run the batch shell"]),
    (ExperimentSpec(environment="venv", python="/v/bin/python", extra_sbatch=("--export=ALL",)),
     "slurm", ["extra_sbatch: --export=ALL: environment venv sets --export=NONE itself"]),
    (ExperimentSpec(environment="modules", modules=("m",), extra_sbatch=("--expo=ALL",)),
     "slurm", ["extra_sbatch: --expo=ALL: environment modules sets --export=NONE"]),
    # P8: apptainer's relative image
    (APPTAINER.replace(container_image="pt.sif"), "slurm",
     ["container_image: pt.sif is relative to the job's working directory"]),
    # P9: a PID namespace of its own, by variable or by set-up line
    (APPTAINER.replace(nccl_env=(("APPTAINER_CONTAINALL", "1"),)), "slurm",
     ["nccl_env: APPTAINER_CONTAINALL: a new PID namespace hides the ranks", "drop it"]),
    (APPTAINER.replace(container_runtime="singularity", env_setup=("export SINGULARITY_PID=1",)),
     "slurm", ["env_setup: SINGULARITY_PID: a new PID namespace"]),
    (APPTAINER.replace(env_setup=("alias apptainer='apptainer --containall'",)), "slurm",
     ["env_setup: --containall: a new PID namespace"]),
    # an option of another command is not apptainer's
    (APPTAINER.replace(env_setup=("mkdir -p /tmp/x", "set -e", "ls --pid")), "slurm", []),
    # P12: pyxis lives in srun
    (PYXIS, "local", ["container_runtime: pyxis runs only inside srun", "Use apptainer or podman"]),
    # podman names one container per node
    (PYXIS.replace(container_runtime="podman", container_image="localhost/x", launcher="srun",
                   nodes=2), "slurm", ["launcher: podman starts one container per node"]),
    # P13: data root is mounted at its own path: no ',' or ':' in it
    (APPTAINER.replace(data_root="/data/a,b"), "slurm",
     ["data_root: /data/a,b is mounted into the container", "cannot hold ',' or ':'"]),
    # P15: the host's python
    (PYXIS.replace(python="~/venv/bin/python"), "slurm",
     ["python: ~/venv/bin/python is a path on the host", "(python3)"]),
    (PYXIS.replace(python="/home/me/venv/bin/python"), "slurm",
     ["python: /home/me/venv/bin/python is a path on the host", "or mount /home/me/venv"]),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "scheduler", "words"), PITFALLS)
def test_each_pitfall_is_refused_naming_the_field_and_the_fix(
    spec: ExperimentSpec, scheduler: str, words: list[str]
) -> None:
    assert validate(spec) == []  # each field is right on its own: the pitfall is the mix
    errors, _ = issues(spec, scheduler)
    if not words:
        assert errors == []
        return
    assert len(errors) == 1, errors
    for w in words:
        assert w in errors[0], (w, errors[0])


def test_a_pitfall_waits_for_the_fields_own_checks() -> None:
    # A wrong field is reported once, by its own check, not again as a pitfall.
    bad = PYXIS.replace(container_image="a b.sqsh")
    assert [e.field for e in validate(bad)] == ["container_image"]
    assert issues(bad) == ([], [])


def test_a_gpu_type_needs_cuda_once() -> None:
    # validate()'s rule (spec/gpu_types.py's field); the pitfalls do not say it again.
    spec = ExperimentSpec(device="cpu", backend="gloo", gpu_type="h100")
    assert [str(e) for e in validate(spec)] == ["gpu_type: a GPU type needs device cuda"]
    assert issues(spec) == ([], [])


PITFALL_WARNINGS = [
    # P7: docker:// is converted on every node
    (APPTAINER.replace(container_image="docker://nvcr.io/nvidia/pytorch:24.05-py3"), "slurm", {},
     ['apptainer pull pytorch_24.05-py3.sif docker://nvcr.io/nvidia/pytorch:24.05-py3"', "once"]),
    # P10: --cleanenv drops the per-task variables
    (APPTAINER.replace(env_setup=("export APPTAINER_CLEANENV=1",)), "slurm", {},
     ["APPTAINER_CLEANENV: --cleanenv drops Slurm's per-task variables", "APPTAINERENV_*"]),
    # P11: podman under Slurm
    (PYXIS.replace(container_runtime="podman", container_image="localhost/x"), "slurm", {},
     ["podman moves containers out of the job's processes", "ddp-tui cancel stops them"]),
    # P15, inside the image: only a warning
    (PYXIS.replace(python="/opt/conda/bin/python"), "slurm", {},
     ["python: /opt/conda/bin/python must be the image's own file"]),
    # P16: home is not mounted by pyxis, so ddp-tui mounts the data root
    (PYXIS.replace(data_root="~/data"), "slurm", {},
     ["data_root: ~/data is in your home directory", "--no-container-mount-home",
      "mounted at its own path for you"]),
    (PYXIS.replace(container_runtime="podman", container_image="x", data_root="~/data"), "local",
     {}, ["data_root: ~/data is in your home directory, which podman does not mount"]),
    # P17: a venv on a module's Python
    (ExperimentSpec(environment="venv", python="/w/venv/bin/python"), "slurm",
     {"venv_home": "/apps/python/3.11/bin"},
     ["python: the venv's base interpreter is in /apps/python/3.11/bin", "add it to modules"]),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "scheduler", "facts", "words"), PITFALL_WARNINGS)
def test_each_warning_names_what_to_do(
    spec: ExperimentSpec, scheduler: str, facts: dict[str, str], words: list[str]
) -> None:
    errors, warnings = issues(spec, scheduler, **facts)
    assert errors == []
    assert len(warnings) == 1, warnings
    for w in words:
        assert w in warnings[0], (w, warnings[0])


def test_facts_that_raise_no_warning() -> None:
    venv = ExperimentSpec(environment="venv", python="/w/venv/bin/python")
    assert issues(venv, venv_home="/usr/bin") == ([], [])
    assert issues(venv.replace(modules=("python/3.11",)), venv_home="/apps/py/bin") == ([], [])


def test_conda_without_a_conda_is_refused_when_looked_for() -> None:
    conda = ExperimentSpec(environment="conda", python="/opt/mf/envs/torch/bin/python")
    errors, _ = issues(conda, conda_exe="")
    assert errors == [
        "python: /opt/mf/envs/torch is a conda environment, but no conda was found for it "
        "(/opt/mf/bin/conda); set env_setup to make conda available, or use environment venv"
    ]
    assert issues(conda, conda_exe="/opt/mf/bin/conda") == ([], [])
    assert issues(conda) == ([], [])  # not looked for: nothing to say


@pytest.mark.parametrize(
    ("python", "prefix", "conda"),
    [
        ("/opt/mf/envs/torch/bin/python", "/opt/mf/envs/torch", "/opt/mf/bin/conda"),
        ("/opt/mf/bin/python3.11", "/opt/mf", "/opt/mf/bin/conda"),
        ("~/venvs/t/bin/python3", "~/venvs/t", "~/venvs/t/bin/conda"),
        ("python3", None, "bin/conda"),
    ],
)
def test_an_env_is_found_from_its_python(python: str, prefix: str | None, conda: str) -> None:
    assert env_prefix(python) == prefix
    if prefix is not None:
        assert conda_executable(python) == conda


# --------------------------------------------------------------------------- local --export


def test_the_local_scheduler_keeps_a_logins_few_variables_with_export_none() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C.UTF-8",
        "LEAKME": "1",
        "VIRTUAL_ENV": "/fake/venv",
        "PYTHONPATH": "/leak",
        "DDP_TUI_CONFIG": "/x",
    }
    assert exported_environment({}, environ) == environ
    assert exported_environment({"export": "ALL"}, environ) == environ
    for value in ("NONE", "none", "NIL"):
        assert exported_environment({"export": value}, environ) == {
            "PATH": "/bin",
            "HOME": "/h",
            "LC_ALL": "C.UTF-8",
        }
