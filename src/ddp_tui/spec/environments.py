"""Software environments and containers: the words a spec names them in, the checks and
cross-field rules of those fields, and the pitfalls refused or warned before a job waits in
the queue (README "Environments and containers", which names the upstream issues).
Image references and mounts, read as each runtime reads them, are ``container_refs``'s.

Pure: nothing here reads a file or runs a command. What only the cluster knows (a venv's base
interpreter, whether conda is there) comes in as :class:`InterpreterFacts`, when someone has
looked.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ddp_tui.spec.checks import CONTROL_RE, Check
from ddp_tui.spec.container_refs import (
    APPTAINER_LIKE,
    SQUASH_SUFFIXES,
    ImageRef,
    Mount,
    looks_like_registry_host,
    parse_image,
    parse_mount,
    under,
)
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.fields import FieldSpec

if TYPE_CHECKING:
    from ddp_tui.spec.experiment import ExperimentSpec

__all__ = [
    "APPTAINER_LIKE",
    "CLEAN_ENVIRONMENTS",
    "CONTAINER_RUNTIMES",
    "ENVIRONMENTS",
    "ENVIRONMENT_CHECKS",
    "ENVIRONMENT_FIELDS",
    "ENVIRONMENT_RULES",
    "MAX_MODULES",
    "MAX_MOUNTS",
    "MODULE_PATTERN",
    "ImageRef",
    "InterpreterFacts",
    "Mount",
    "auto_mount_paths",
    "clean_environment",
    "conda_executable",
    "env_prefix",
    "environment_issues",
    "mount_sources",
    "parse_image",
    "parse_mount",
]

#: What the job's Python runs in: the Python as given (today's), a venv or conda env activated
#: in the batch shell, a declared module list, or a container image.
ENVIRONMENTS: Final = ("python", "venv", "conda", "modules", "container")
#: The container runtimes; "" is none (environment other than container).
CONTAINER_RUNTIMES: Final = ("", "pyxis", "apptainer", "singularity", "podman")
#: The environments whose batch shell starts with ``#SBATCH --export=NONE``: the submit
#: shell's variables (a conda env, a VIRTUAL_ENV, a PYTHONPATH) must not reach the job.
CLEAN_ENVIRONMENTS: Final = ("venv", "conda", "modules", "container")

MAX_MODULES: Final = 32
MAX_MOUNTS: Final = 32
#: A module name as Environment Modules and Lmod take it (``cuda/12.4``, ``py-torch@2.3``).
MODULE_PATTERN: Final = r"[A-Za-z0-9_.+/-]+(@[A-Za-z0-9_.:-]+)?"
_MODULE_RE: Final = re.compile(MODULE_PATTERN)


# -- field checks (named by the descriptions in experiment.py) --------------------------------


def _is_str_list(value: object) -> bool:
    return isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)


def check_modules(field: FieldSpec, value: object) -> list[FieldError]:
    if not _is_str_list(value):
        return [FieldError(field.name, f"must be a list of module names, got {value!r}")]
    assert isinstance(value, tuple | list)
    if len(value) > MAX_MODULES:
        return [FieldError(field.name, f"at most {MAX_MODULES} modules, got {len(value)}")]
    return [
        FieldError(
            field.name,
            "each must be a module name such as cuda/12.4 or py-torch@2.3 (letters, digits and "
            f"_.+/-, then an optional @version), got {item!r}",
        )
        for item in value
        if len(item) > field.max_len or not _MODULE_RE.fullmatch(item)
    ]


def check_container_image(field: FieldSpec, value: object) -> list[FieldError]:
    if not isinstance(value, str):
        return [FieldError(field.name, f"must be a string, got {value!r}")]
    if len(value) > field.max_len:
        return [FieldError(field.name, f"must be at most {field.max_len} characters")]
    if CONTROL_RE.search(value) or any(c.isspace() for c in value):
        return [
            FieldError(
                field.name,
                "must be one image reference without spaces or control characters "
                f"(a registry image, a .sqsh or .sif path, or a directory), got {value!r}",
            )
        ]
    return []


def check_container_mounts(field: FieldSpec, value: object) -> list[FieldError]:
    if not _is_str_list(value):
        return [FieldError(field.name, f"must be a list of SRC[:DST[:ro|rw]], got {value!r}")]
    assert isinstance(value, tuple | list)
    if len(value) > MAX_MOUNTS:
        return [FieldError(field.name, f"at most {MAX_MOUNTS} mounts, got {len(value)}")]
    errors: list[FieldError] = []
    for item in value:
        try:
            parse_mount(item)
        except ValueError as exc:
            errors.append(FieldError(field.name, str(exc)))
    return errors


#: The checks the environment fields' descriptions name (validate.py merges them).
ENVIRONMENT_CHECKS: Final[Mapping[str, Check]] = {
    "modules": check_modules,
    "container_image": check_container_image,
    "container_mounts": check_container_mounts,
}


# -- what a spec's environment mounts ---------------------------------------------------------


def auto_mount_paths(spec: ExperimentSpec) -> list[tuple[str, str]]:
    """The paths a container gets at their own path besides the run directory, each with the
    field it comes from: ``data_root``, and a script's project directory (or its own
    directory) when it runs in place. Absolute or ``~/`` paths only (a relative one lies in
    the run directory, the container's working directory, which is mounted)."""
    found: list[tuple[str, str]] = []
    if spec.data_root:
        found.append(("data_root", spec.data_root))
    if spec.entry == "script" and spec.code_mode == "in-place":
        if spec.project_dir:
            found.append(("project_dir", spec.project_dir))
        elif not spec.script_module and "/" in spec.script:
            found.append(("script", posixpath.dirname(spec.script)))
    return [(f, p) for f, p in found if p.startswith(("/", "~/")) or p == "~"]


def _home(path: str) -> bool:
    return path == "~" or path.startswith("~/") or path.startswith("/home/")


# -- the pitfalls, refused or warned before the queue ------------------------------------------


@dataclass(frozen=True)
class InterpreterFacts:
    """What the cluster said about the job's python, where someone looked (a pre-queue
    check may pass it): ``venv_home`` is ``pyvenv.cfg``'s ``home`` (None: not read);
    ``conda_exe`` the conda found for a conda env ("": none found; None: not looked for).
    The plan passes none yet: without facts these rules say nothing."""

    venv_home: str | None = None
    conda_exe: str | None = None


#: A rule: the spec, the scheduler ("" when not known) and the facts in; errors and warnings
#: out (appended to the two lists).
_Rule = Callable[
    ["ExperimentSpec", str, InterpreterFacts, list[FieldError], list[str]],
    None,
]


def _venv_and_conda_python(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    """P17 and P18, from what the cluster said (the shape of python is validate()'s)."""
    prefix = env_prefix(s.python)
    if s.environment not in ("venv", "conda") or prefix is None:
        return
    if s.environment == "venv" and facts.venv_home is not None and not s.modules:
        home = facts.venv_home.rstrip("/")
        if home and not under(home, "/usr") and not home.startswith("/bin"):
            warn.append(
                f"python: the venv's base interpreter is in {home} (pyvenv.cfg's home); on the "
                "nodes it exists only where that is installed, or with the module that provides "
                "it loaded: if a module does, add it to modules"
            )
    if s.environment == "conda" and facts.conda_exe == "":
        err.append(
            FieldError(
                "python",
                f"{prefix} is a conda environment, but no conda was found for it "
                f"({conda_executable(s.python)}); set env_setup to make conda available, or "
                "use environment venv",
            )
        )


def _pyxis_image(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    if s.container_runtime != "pyxis" or not s.container_image:
        return
    text = s.container_image
    image = parse_image(text, "pyxis")
    if not image.is_file and text.endswith(SQUASH_SUFFIXES):  # P1
        err.append(
            FieldError(
                "container_image",
                f"{text} would be pulled from a registry as an image named {text!r}: pyxis "
                "reads a file only when the path starts with / or ./ (NVIDIA/pyxis#127). Give "
                f"its absolute path, e.g. /home/me/images/{posixpath.basename(text)}",
            )
        )
    elif image.is_file and not text.startswith("/"):  # P2
        err.append(
            FieldError(
                "container_image",
                f"{text} is relative to the job's working directory, the new run directory, "
                "where it is not; give the absolute path",
            )
        )
    elif "#/" in text:  # P4
        fixed = text.replace("#/", "#", 1)
        err.append(
            FieldError(
                "container_image",
                f"{text} has a '/' after '#' (NVIDIA/pyxis#112); write {fixed}",
            )
        )
    elif not image.is_file and "#" not in text:  # P3
        first, slash, rest = text.partition("/")
        if slash and looks_like_registry_host(first.rpartition("@")[2]):
            err.append(
                FieldError(
                    "container_image",
                    f"{text} would be looked up on Docker Hub (enroot separates the registry "
                    f"with '#'; NVIDIA/pyxis#168). Write {first}#{rest}",
                )
            )


def _apptainer_image(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    if s.container_runtime not in APPTAINER_LIKE or not s.container_image:
        return
    text, tool = s.container_image, s.container_runtime
    image = parse_image(text, tool)
    if not image.is_file:
        if image.registry == "docker":  # P7
            sif = posixpath.basename(image.name).replace(":", "_") or "image"
            warn.append(
                f"container_image: every node converts {text} to a SIF file when the job starts "
                f'(minutes, in ~/.{tool}/cache); run "{tool} pull {sif}.sif {text}" once and '
                "give the .sif path"
            )
        return
    if not text.startswith("/"):  # P8
        err.append(
            FieldError(
                "container_image",
                f"{text} is relative to the job's working directory, the new run directory, "
                "where it is not; give the absolute path",
            )
        )


#: Apptainer's and Singularity's environment variables for their options (``APPTAINER_PID``
#: is ``--pid``): a new PID namespace, or a clean environment.
_PID_OPTIONS: Final = ("CONTAINALL", "PID")
_CLEANENV_OPTIONS: Final = ("CLEANENV",)
_PREFIXES: Final = ("APPTAINER_", "SINGULARITY_")


def _namespace_options(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    """P9 and P10: the only ways a spec reaches apptainer's options are variables (nccl_env)
    and set-up lines (env_setup); podman's are ddp-tui's own."""
    if s.environment != "container" or s.container_runtime not in APPTAINER_LIKE:
        return
    names = [k for k, _ in s.nccl_env]
    words: list[str] = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(s.env_setup))
    # An option counts only on a line that runs the tool (an alias, a wrapper): `mkdir -p`
    # or `set -e` elsewhere say nothing about it.
    tool_lines = [ln for ln in s.env_setup if re.search(r"\b(apptainer|singularity)\b", ln)]
    options_given: list[str] = re.findall(r"--[a-z]+", " ".join(tool_lines))

    def given(options: tuple[str, ...], flags: tuple[str, ...]) -> str | None:
        """The first variable or option that asks for one of ``options``."""
        for word in (*names, *words, *options_given):
            if word in flags or (word.startswith(_PREFIXES) and word.split("_", 1)[1] in options):
                return word
        return None

    pid = given(_PID_OPTIONS, ("--containall", "--pid"))
    if pid is not None:
        field = "nccl_env" if pid in names else "env_setup"
        err.append(
            FieldError(
                field,
                f"{pid}: a new PID namespace hides the ranks from ddp-tui's stacks and from the "
                "host: drop it (use --contain --cleanenv if you want isolation)",
            )
        )
    clean = given(_CLEANENV_OPTIONS, ("--cleanenv",))
    if clean is not None:
        warn.append(
            f"{clean}: --cleanenv drops Slurm's per-task variables; ddp-tui passes its own with "
            f"{s.container_runtime.upper()}ENV_*, your script's must be passed the same way"
        )


def _extra_sbatch(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    """P5: the batch shell stays on the host, and the environment owns --export."""
    for item in s.extra_sbatch:
        opt = item.removeprefix("--").partition("=")[0]
        if opt.startswith("container") or (len(opt) >= 3 and "container-".startswith(opt)):
            err.append(
                FieldError(
                    "extra_sbatch",
                    f"{item} would run the batch shell itself in the container, where "
                    "ddp-tui's requeue and signals cannot work; use environment container "
                    "with container_runtime pyxis and container_image",
                )
            )
        elif s.environment in CLEAN_ENVIRONMENTS and len(opt) >= 3 and "export".startswith(opt):
            err.append(
                FieldError(
                    "extra_sbatch",
                    f"{item}: environment {s.environment} sets --export=NONE itself (the "
                    "submit shell's variables must not reach the job); set what the job needs "
                    "with env_setup or nccl_env",
                )
            )


def _scheduler_fits(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    if s.environment != "container":
        return
    if s.container_runtime == "pyxis" and scheduler == "local":  # P12
        err.append(
            FieldError(
                "container_runtime",
                "pyxis runs only inside srun; the local scheduler has none. Use apptainer or "
                "podman here",
            )
        )
    if s.container_runtime == "podman" and s.launcher == "srun":
        err.append(
            FieldError(
                "launcher",
                "podman starts one container per node, named by job and node; launcher srun "
                "would start one per rank under the same name: use launcher torchrun",
            )
        )
    if s.container_runtime == "podman" and scheduler == "slurm":  # P11
        warn.append(
            "container_runtime: podman moves containers out of the job's processes: a scancel "
            "or the time limit can leave them running (measured); ddp-tui cancel stops them"
        )


def _container_paths(
    s: ExperimentSpec,
    scheduler: str,
    facts: InterpreterFacts,
    err: list[FieldError],
    warn: list[str],
) -> None:
    """P13 (the paths mounted for the spec), P15 (python) and P16 (home)."""
    if s.environment != "container" or not s.container_runtime:
        return
    mounts = [parse_mount(m) for m in s.container_mounts if _mount_ok(m)]
    for field, path in auto_mount_paths(s):
        if "," in path or ":" in path:
            err.append(
                FieldError(
                    field,
                    f"{path} is mounted into the container at its own path, and "
                    f"{s.container_runtime}'s mount list cannot hold ',' or ':' in a path; "
                    "use a path without them (a symlink to it will do)",
                )
            )
        elif s.container_runtime == "podman" and path.startswith("~"):
            warn.append(
                f"{field}: {path} is in your home directory, which podman does not mount: give "
                "its absolute path so that it is mounted at its own path"
            )
        elif (
            s.container_runtime == "pyxis"
            and _home(path)
            and not any(m.covers(path) for m in mounts)
        ):
            warn.append(
                f"{field}: {path} is in your home directory, which the container does not mount "
                "(--no-container-mount-home); it is mounted at its own path for you"
            )
    python = s.python
    if python.startswith("~"):
        err.append(
            FieldError(
                "python",
                f"{python} is a path on the host; inside the image use its interpreter (python3), "
                "or give the absolute path of a python that container_mounts mounts",
            )
        )
    elif python.startswith("/") and not any(m.covers(python) for m in mounts):
        if _home(python):
            err.append(
                FieldError(
                    "python",
                    f"{python} is a path on the host; inside the image use its interpreter "
                    f"(python3), or mount {posixpath.dirname(posixpath.dirname(python))} with "
                    "container_mounts",
                )
            )
        else:
            warn.append(
                f"python: {python} must be the image's own file: no container_mounts entry "
                "mounts it from the host"
            )


def _mount_ok(text: str) -> bool:
    try:
        parse_mount(text)
    except ValueError:
        return False
    return True


_RULES: Final[tuple[_Rule, ...]] = (
    _venv_and_conda_python,
    _pyxis_image,
    _apptainer_image,
    _namespace_options,
    _extra_sbatch,
    _scheduler_fits,
    _container_paths,
)

#: The fields the pitfall rules read: while one fails its own check, they are not run.
ENVIRONMENT_FIELDS: Final = (
    "environment",
    "modules",
    "container_runtime",
    "container_image",
    "container_mounts",
    "python",
    "extra_sbatch",
    "env_setup",
    "nccl_env",
    "data_root",
    "project_dir",
    "script",
    "launcher",
    "device",
)


def environment_issues(
    spec: ExperimentSpec, *, scheduler: str, facts: InterpreterFacts | None = None
) -> tuple[list[FieldError], list[str]]:
    """The pitfalls of ``spec``'s environment (README "Environments and containers"): the
    errors that would waste a queue wait, each naming its field and the fix, and the warnings
    that do not stop a submit. ``scheduler``: ``slurm``, ``local``, or "" when not known (its
    rules skipped). A spec whose environment fields fail their own checks gets none: those
    errors come first (``validate``)."""
    errors: list[FieldError] = []
    warnings: list[str] = []
    from ddp_tui.spec.validate import field_errors  # the per-field pass; validate imports us

    wrong = {e.field for e in field_errors(spec)}
    if wrong & set(ENVIRONMENT_FIELDS):
        return errors, warnings
    for rule in _RULES:
        rule(spec, scheduler, facts or InterpreterFacts(), errors, warnings)
    return errors, warnings


# -- the cross-field rules validate() runs (what a job script needs to be rendered at all) ----


def _fields_apply(s: ExperimentSpec, ok: Callable[..., bool]) -> FieldError | None:
    if not ok("environment", "container_runtime", "container_image", "container_mounts"):
        return None
    if s.environment != "container":
        for name in ("container_runtime", "container_image", "container_mounts"):
            if getattr(s, name):
                return FieldError(
                    name,
                    f"is used only with environment container (environment is {s.environment}); "
                    "set environment container, or clear it",
                )
    return None


def _modules_apply(s: ExperimentSpec, ok: Callable[..., bool]) -> FieldError | None:
    if not ok("environment", "modules", "container_runtime"):
        return None
    if s.environment == "modules" and not s.modules:
        return FieldError("modules", "environment modules needs at least one module to load")
    if s.modules and s.environment == "python":
        return FieldError(
            "modules",
            "are loaded with environment modules, venv or conda; with python, put module load "
            "lines in env_setup",
        )
    if s.modules and s.environment == "container" and s.container_runtime not in APPTAINER_LIKE:
        return FieldError(
            "modules",
            f"load on the host, and {s.container_runtime or 'this runtime'} runs the job "
            "inside its image; only apptainer and singularity take host modules (binds)",
        )
    return None


def _env_needs_its_python(s: ExperimentSpec, ok: Callable[..., bool]) -> FieldError | None:
    # The job script activates PREFIX of PREFIX/bin/python: no other python names an env.
    if not ok("environment", "python") or s.environment not in ("venv", "conda"):
        return None
    if env_prefix(s.python) is not None:
        return None
    example = (
        "~/venvs/torch/bin/python"
        if s.environment == "venv"
        else "~/miniforge3/envs/torch/bin/python"
    )
    return FieldError(
        "python",
        f"environment {s.environment} needs the env's own python, PREFIX/bin/python "
        f"(e.g. {example}), to activate PREFIX; got {s.python!r}",
    )


def _container_needs_runtime_and_image(
    s: ExperimentSpec, ok: Callable[..., bool]
) -> FieldError | None:
    if (
        not ok("environment", "container_runtime", "container_image")
        or s.environment != "container"
    ):
        return None
    if not s.container_runtime:
        return FieldError(
            "container_runtime",
            "is required with environment container: pyxis, apptainer, singularity or podman",
        )
    if not s.container_image:
        return FieldError(
            "container_image",
            "is required with environment container: a registry image, a .sqsh or .sif path, "
            "or a directory",
        )
    return None


#: The rules validate() adds to its own cross-field rules.
ENVIRONMENT_RULES: Final = (
    _fields_apply,
    _modules_apply,
    _env_needs_its_python,
    _container_needs_runtime_and_image,
)


# -- paths the job script derives ---------------------------------------------------------------


def env_prefix(python: str) -> str | None:
    """The env a ``PREFIX/bin/python*`` interpreter belongs to, or None for another path."""
    head, name = posixpath.split(python)
    if not name.startswith("python") or posixpath.basename(head) != "bin":
        return None
    prefix = posixpath.dirname(head)
    return prefix or None


def conda_executable(python: str) -> str:
    """The conda that activates the env of ``python``: ``BASE/bin/conda`` for an env in
    ``BASE/envs/NAME``, else the env's own (``PREFIX/bin/conda``, the base env)."""
    prefix = env_prefix(python) or posixpath.dirname(posixpath.dirname(python))
    envs, _ = posixpath.split(prefix)
    if posixpath.basename(envs) == "envs":
        return posixpath.join(posixpath.dirname(envs), "bin", "conda")
    return posixpath.join(prefix, "bin", "conda")


def clean_environment(spec: ExperimentSpec) -> bool:
    """Whether the job starts from a clean environment (``#SBATCH --export=NONE``)."""
    return spec.environment in CLEAN_ENVIRONMENTS


def mount_sources(spec: ExperimentSpec) -> Sequence[Mount]:
    """The user's mounts of ``spec`` (already checked)."""
    return [parse_mount(m) for m in spec.container_mounts]
