"""Property tests over every spec field: a spec is refused with field-named errors, or it
renders scripts that bash accepts and that hand every value to the trainer intact.

Each example starts from valid values and turns up to four fields wild: shell
metacharacters, newlines, NUL, unicode, wrong types, out-of-range numbers.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ddp_tui.sbatch_templates import (
    render_errors,
    render_preflight,
    render_training,
    script_launch_args,
    trainer_args,
)
from ddp_tui.spec import (
    BACKENDS,
    BUILTIN_DATASETS,
    DEVICES,
    LAUNCHERS,
    ExperimentSpec,
    SpecError,
    validate,
)
from tests.unit.test_templates import Job, make_fake_bin

FIELDS = [f.name for f in dataclasses.fields(ExperimentSpec)]
RUN_DIR = "/home/user/ddp-tui-runs/20250101-000000-x-0000"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Strings a shell would act on; "pwned" files must never appear.
INJECTIONS = [
    "$(touch pwned)",
    "`touch pwned`",
    "'; touch pwned; '",
    '"; touch pwned; "',
    "x\ntouch pwned",
    "x\n#SBATCH --output=/etc/x",
    "a\x00b",
    "$HOME",
    "${IFS}",
    "*",
    "~",
    "-",
    "",
    " ",
    "\\",
    "é✓",
    "\u2028",
]
DANGER = list("$`\"'\\;|&<>(){}[]*?!#~ \t\n\r\x00%=,.:/-_") + list("aZ09")
nasty = st.one_of(
    st.sampled_from(INJECTIONS), st.text(alphabet=st.sampled_from(DANGER), max_size=12)
)
wrong_type: st.SearchStrategy[Any] = st.sampled_from([None, True, 0, -1, 1.5, "1", (), {}])


def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


# field -> (valid-ish values, wild values)
STRATS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "name": (st.sampled_from(["exp", "r50-8gpu", "a.b_c"]), nasty),
    "entry": (st.sampled_from(["trainer", "script"]), nasty),
    # A snapshot's paths are absolute once planned; in place they are the cluster's.
    "script": (
        st.sampled_from(["/home/u/proj/train.py", "/home/u/proj/src/t r.py", "-m pkg.train"]),
        st.one_of(nasty, nasty.map(lambda t: "-m " + t)),
    ),
    "script_args": (
        st.sampled_from(["", "--epochs 3 --lr 0.1", "--name 'a b' --out=~/x $HOME"]),
        st.one_of(nasty, wrong_type),
    ),
    "project_dir": (st.sampled_from(["/home/u/proj", "~/proj"]), nasty),
    "code_mode": (st.sampled_from(["snapshot", "in-place"]), nasty),
    "observe": (st.sampled_from(["on", "off"]), nasty),
    "snapshot_max_mb": (ints(1, 1000), st.one_of(ints(-1, 0), wrong_type)),
    "metrics": (
        st.sampled_from(
            ["auto", "epoch-line", "regex:loss=(?P<train_loss>\\S+) $x", "csv:a b.csv"]
        ),
        st.one_of(nasty, nasty.map(lambda t: "regex:" + t), wrong_type),
    ),
    "metrics_columns": (
        st.sampled_from([(), (("train_loss_epoch", "train_loss"), ("val/acc", "val_acc"))]),
        st.one_of(
            st.dictionaries(nasty, nasty, max_size=2).map(lambda d: tuple(d.items())),
            wrong_type,
        ),
    ),
    "samples_per_epoch": (st.one_of(st.none(), ints(1, 10**6)), ints(-1, 0)),
    "max_steps": (st.one_of(st.none(), ints(1, 10**6)), ints(-1, 0)),
    "model": (st.sampled_from(["mlp", "simple_cnn", "resnet18", "pkg.mod:fn"]), nasty),
    "dataset": (st.sampled_from(["synthetic", "mnist", "cifar10"]), nasty),
    # Never empty among the good values: mnist and cifar10 (good datasets) need a data root.
    "data_root": (st.sampled_from(["~/data", "/scratch/d s"]), nasty),
    "download": (st.booleans(), wrong_type),
    "task": (st.just("classification"), nasty),
    "target": (st.just(""), nasty),
    "num_classes": (st.one_of(st.none(), ints(2, 1000)), st.one_of(ints(-3, 3), wrong_type)),
    "synthetic_samples": (st.one_of(st.none(), ints(1, 5000)), ints(-2, 2)),
    "synthetic_val_samples": (st.one_of(st.none(), ints(1, 5000)), ints(-2, 2)),
    # Images only: a flat shape is valid for mlp alone (test_spec covers it).
    "synthetic_shape": (st.sampled_from(["", "1,28,28", "3,8,8"]), nasty),
    "nodes": (st.one_of(st.just(1), ints(1, 8)), st.one_of(ints(-1, 2000), wrong_type)),
    "gpus_per_node": (ints(1, 8), st.one_of(ints(-1, 200), wrong_type)),
    "backend": (st.sampled_from(["auto", "gloo"]), st.one_of(st.sampled_from(BACKENDS), nasty)),
    "launcher": (st.sampled_from(LAUNCHERS), nasty),
    "device": (st.sampled_from(DEVICES), nasty),
    "partition": (st.sampled_from(["", "gpu", "gpu,long"]), nasty),
    "account": (st.sampled_from(["", "proj1"]), nasty),
    "qos": (st.sampled_from(["", "high"]), nasty),
    "time_limit": (
        st.sampled_from(["30", "01:00:00", "1-00", "2-03:04:05"]),
        st.one_of(st.from_regex(r"\A[0-9]{1,4}([:-][0-9]{1,3}){0,3}\Z"), nasty, wrong_type),
    ),
    "constraint": (st.sampled_from(["", "a100&ib", "[r1*2&r2*2]"]), nasty),
    # Any type needs device cuda, so a typed one is wild. A plain name (H100 80GB) is valid
    # but renders only once a plan has found its raw type.
    "gpu_type": (
        st.just(""),
        st.one_of(
            st.sampled_from(
                ["h100", "nvidia_a100_80gb_pcie", "feature:gpu_a100", "H100 80GB", "a:b"]
            ),
            nasty,
        ),
    ),
    "mail_type": (st.sampled_from(["", "END", "END,FAIL", "ALL", "TIME_LIMIT_90"]), nasty),
    "mail_user": (st.sampled_from(["", "me", "me@example.org"]), nasty),
    "cpus_per_task": (ints(1, 64), st.one_of(ints(-1, 2000), wrong_type)),
    "mem": (st.sampled_from(["", "16G", "0", "500M"]), nasty),
    "epochs": (ints(1, 100), ints(-1, 2)),
    "batch_per_gpu": (ints(1, 512), ints(-1, 2)),
    "lr": (
        st.one_of(st.none(), st.floats(1e-6, 10)),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), wrong_type),
    ),
    "lr_scaling": (st.sampled_from(["none", "linear"]), nasty),
    "base_batch": (st.one_of(st.none(), ints(1, 4096)), ints(-1, 1)),
    "optimizer": (st.sampled_from(["sgd", "adamw"]), nasty),
    "schedule": (st.sampled_from(["none", "step", "cosine"]), nasty),
    "warmup_epochs": (st.just(0), ints(-1, 200)),
    "precision": (st.sampled_from(["off", "bf16"]), st.one_of(st.just("fp16"), nasty)),
    "workers": (ints(0, 16), ints(-2, 300)),
    # gpu is for image folders only: wild where the dataset may be another.
    "decode": (st.sampled_from(["auto", "cpu"]), st.one_of(st.just("gpu"), nasty)),
    "seed": (ints(0, 2**32 - 1), st.one_of(ints(-5, -1), ints(2**32, 2**33), wrong_type)),
    "max_steps_per_epoch": (st.one_of(st.none(), ints(1, 100)), ints(-1, 0)),
    "requeue": (st.booleans(), wrong_type),
    "signal_lead_sec": (ints(0, 60), st.one_of(ints(-1, 70000), wrong_type)),
    "telemetry_sec": (ints(0, 3600), st.one_of(ints(-1, 10**6), wrong_type)),
    "env_setup": (
        st.lists(
            st.sampled_from(["module load pytorch/2.3", "export A='x y'", 'echo "$HOME" >&2']),
            max_size=2,
        ).map(tuple),
        st.one_of(
            st.lists(
                st.one_of(
                    nasty,
                    st.sampled_from(["if true; then", "fi", "cat <<EOF", "#SBATCH --x", "x \\"]),
                ),
                max_size=4,
            ).map(tuple),
            wrong_type,
        ),
    ),
    "python": (st.sampled_from(["python3", "~/venv/bin/python"]), nasty),
    # Valid draws keep today's environment (the fakes here are python3 and srun); another
    # environment without its fields is wild (test_environment_templates runs containers).
    "environment": (
        st.just("python"),
        st.one_of(st.sampled_from(["venv", "conda", "modules", "container"]), nasty),
    ),
    "modules": (st.just(()), st.one_of(st.lists(nasty, max_size=2).map(tuple), wrong_type)),
    "container_runtime": (st.just(""), st.one_of(st.sampled_from(["pyxis", "podman"]), nasty)),
    "container_image": (st.just(""), st.one_of(st.just("nvcr.io#nvidia/pytorch:24.05"), nasty)),
    "container_mounts": (
        st.just(()),
        st.one_of(
            st.lists(st.one_of(nasty, st.just("/d:/d:ro")), max_size=2).map(tuple), wrong_type
        ),
    ),
    "extra_sbatch": (
        st.lists(
            st.sampled_from(["--exclusive", "--mail-type=END,FAIL", "--comment=x"]), max_size=2
        ).map(tuple),
        st.lists(
            st.one_of(
                nasty,
                nasty.map(lambda t: "--comment=" + t),
                st.sampled_from(["--out=/x", "--nodes=3", "--o", "--chdir=/", "--signal=USR1"]),
            ),
            max_size=3,
        ).map(tuple),
    ),
    "extra_trainer_args": (
        st.lists(st.sampled_from(["--momentum", "0.9", "--compile"]), max_size=3).map(tuple),
        st.one_of(
            st.lists(st.one_of(nasty, st.sampled_from(["--run-dir", "--run=/x"])), max_size=4).map(
                tuple
            ),
            wrong_type,
        ),
    ),
    "nccl_env": (
        st.dictionaries(
            st.sampled_from(["NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"]),
            st.sampled_from(["INFO", "ib0", "^docker,lo"]),
            max_size=2,
        ).map(lambda d: tuple(d.items())),
        st.one_of(
            st.dictionaries(
                st.one_of(nasty, st.sampled_from(["PATH", "SLURM_JOB_ID", "IFS", "NCCL_X"])),
                nasty,
                max_size=3,
            ).map(lambda d: tuple(d.items())),
            wrong_type,
        ),
    ),
}


def test_every_field_has_strategies() -> None:
    assert set(STRATS) == set(FIELDS)
    assert set(BUILTIN_DATASETS) >= {"synthetic", "mnist", "cifar10"}


@st.composite
def specs(draw: st.DrawFn, *, wild_max: int = 4) -> ExperimentSpec:
    wild = draw(st.sets(st.sampled_from(FIELDS), max_size=wild_max))
    values = {name: draw(STRATS[name][1] if name in wild else STRATS[name][0]) for name in FIELDS}
    return ExperimentSpec(**values)


# What may follow "=" on a directive: the union of the spec's patterns for the values that land
# there (constraints group with parentheses, e.g. "(a100|h100)&ib").
_DIRECTIVE = re.compile(r"#SBATCH --[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:/=+@%*!&|\[\]()^~-]+)?")


def check_script(script: str) -> None:
    res = subprocess.run(
        ["bash", "-n"], input=script, capture_output=True, text=True, timeout=30, check=False
    )
    assert res.returncode == 0, res.stderr
    lines = script.splitlines()
    n = sum(1 for ln in lines if ln.startswith("#SBATCH"))
    assert all(_DIRECTIVE.fullmatch(ln) for ln in lines[1 : n + 1]), lines[: n + 1]
    assert "\x00" not in script


def check_refused_or_renders(spec: ExperimentSpec) -> None:
    errors = validate(spec) + render_errors(spec, RUN_DIR)
    event("refused" if errors else "rendered")
    if errors:
        assert all(e.field in FIELDS and e.message for e in errors), errors
        assert all("\n" not in str(e) for e in errors)
        with pytest.raises(SpecError) as err:
            render_training(spec, RUN_DIR)
        assert err.value.errors == errors
        return
    check_script(render_training(spec, RUN_DIR))
    check_script(render_preflight(spec, RUN_DIR))


@SETTINGS
@given(specs())
def test_each_spec_is_refused_by_field_or_renders_valid_bash(spec: ExperimentSpec) -> None:
    check_refused_or_renders(spec)


#: A wild value in the key field may also (or instead) be reported on these related fields.
RELATED: dict[str, set[str]] = {
    "entry": {"script"},  # a script entry needs a script
    "script": {"project_dir"},  # -m module in place needs the directory it runs from
    "code_mode": {"project_dir"},
    "time_limit": {"signal_lead_sec"},
    "epochs": {"warmup_epochs"},
    "dataset": {"task", "target", "data_root"},
    "synthetic_shape": {"model"},  # a flat shape that parses is wrong for an image model
    "device": {"backend", "precision"},
    # another environment needs its own fields (its python, modules, a runtime and an image)
    "environment": {"python", "modules", "container_runtime"},
}


@pytest.mark.parametrize("field", FIELDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_wild_field_is_refused_by_name_or_renders(field: str, data: st.DataObject) -> None:
    # Only `field` is wild, so a mistake in its own rule cannot hide behind another field's error.
    values = {name: data.draw(STRATS[name][0]) for name in FIELDS}
    values[field] = data.draw(STRATS[field][1], label=field)
    spec = ExperimentSpec(**values)
    named = {e.field for e in validate(spec)}
    assert named <= {field, *RELATED.get(field, ())}, named
    check_refused_or_renders(spec)


@pytest.fixture(scope="module")
def module_fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield make_fake_bin(tmp_path_factory.mktemp("fakes"))


def _launched_args(job: Job, module: str) -> list[str]:
    (argv,) = job.argv("srun") or job.argv("python")
    return argv[argv.index(module) + 1 :]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(wild_max=2))
def test_valid_specs_run_and_hand_every_value_over_intact(
    module_fake_bin: Path, spec: ExperimentSpec
) -> None:
    # env_setup runs verbatim by design; the other fields must never execute anything.
    spec = spec.replace(env_setup=())
    if validate(spec) or render_errors(spec, RUN_DIR):
        event("refused")
        return
    event(f"ran nodes>1={spec.nodes > 1} launcher={spec.launcher}")
    if spec.python not in ("python3", "~/venv/bin/python"):
        spec = spec.replace(python="python3")  # the fake must be what runs
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp, "venv", "bin")
        venv.mkdir(parents=True)
        (venv / "python").symlink_to(module_fake_bin / "python3")
        run = f"{tmp}/run"
        job = Job(Path(tmp), module_fake_bin, render_training(spec, run))
        rc, out = job.run(DDP_TUI_SCHEDULER="local")
        assert rc == 0, out
        assert not list(Path(tmp).rglob("pwned")), out
        # The job's HOME is tmp; a leading ~/ means it, as it would at a shell.
        script = spec.entry == "script"
        words = script_launch_args(spec, run) if script else trainer_args(spec)
        expected = [tmp + a[1:] if a == "~" or a.startswith("~/") else a for a in words]
        module = "ddp_tui.scriptrun" if script else "ddp_tui.trainer"
        assert _launched_args(job, module) == ["--run-dir", run, *expected]
        env = job.environ("srun" if spec.needs_slurm else "py")
        for key, value in spec.nccl_env:
            assert env[key] == value
