"""ExperimentSpec: round trips, validation of every field, cluster checks and form parsing."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ddp_tui.sbatch_templates import render_training
from ddp_tui.spec import FIELDS as DESCRIPTIONS
from ddp_tui.spec import (
    ExperimentSpec,
    FieldError,
    PartitionInfo,
    SpecError,
    check_form,
    format_time_limit,
    parse_time_limit,
    parse_time_limit_seconds,
    spec_from_form,
    validate,
    validate_for_cluster,
)
from tests.golden.specs import GOLDEN_SPECS

FIELDS = [f.name for f in dataclasses.fields(ExperimentSpec)]


def fields_of(errors: list[FieldError]) -> list[str]:
    return [e.field for e in errors]


# --------------------------------------------------------------------------- the dataclass


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_to_dict_is_json_and_round_trips(name: str) -> None:
    spec = GOLDEN_SPECS[name]
    data = json.loads(json.dumps(spec.to_dict()))
    assert ExperimentSpec.from_dict(data) == spec
    assert set(data) == set(FIELDS)


def test_spec_is_frozen_and_hashable_even_from_lists() -> None:
    spec = ExperimentSpec(env_setup=["a"], nccl_env={"NCCL_DEBUG": "INFO"})  # type: ignore[arg-type]
    assert spec.env_setup == ("a",) and spec.nccl_env == (("NCCL_DEBUG", "INFO"),)
    assert spec.nccl_env_dict == {"NCCL_DEBUG": "INFO"}
    hash(spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.nodes = 2  # type: ignore[misc]


def test_replace_and_world_size() -> None:
    spec = ExperimentSpec().replace(nodes=4, gpus_per_node=8)
    assert spec.world_size == 32 and spec.needs_slurm
    assert not ExperimentSpec().needs_slurm and ExperimentSpec(launcher="srun").needs_slurm
    with pytest.raises(TypeError):
        ExperimentSpec().replace(gpus=2)


def test_from_dict_ignores_unknown_keys_and_names_every_wrong_type() -> None:
    assert ExperimentSpec.from_dict({"future_field": 1, "nodes": 2}).nodes == 2
    assert ExperimentSpec.from_dict({"lr": 1}).lr == 1.0
    with pytest.raises(SpecError) as err:
        ExperimentSpec.from_dict({"nodes": "2", "requeue": "yes", "env_setup": "module load x"})
    assert fields_of(err.value.errors) == ["nodes", "requeue", "env_setup"]


def test_group_key_ignores_size_and_name_only() -> None:
    base = GOLDEN_SPECS["4node_8gpu_nccl"]
    same = base.replace(nodes=1, gpus_per_node=2, name="other-label")
    assert base.group_key() == same.group_key()
    assert base.group_key() != base.replace(lr=0.2).group_key()
    assert base.group_key() != base.replace(launcher="srun").group_key()
    assert "nodes" not in base.group_fields() and "model" in base.group_fields()


def test_fields_added_later_leave_the_group_key_as_it_was_until_set() -> None:
    # The keys the release before the environment and GPU-type fields gave these specs
    # (computed with it): runs keep their group in spec.json, so an identical run made now
    # must still compare with them.
    assert ExperimentSpec(name="a").group_key() == "5c20da8cddde385a"
    assert ExperimentSpec(name="b", model="resnet18", nodes=2).group_key() == "87d44991a740dc08"
    base = ExperimentSpec(name="a")
    for changes in (
        {"gpu_type": "a100"},
        {"environment": "modules", "modules": ("torch/2.5",)},
        {"environment": "container", "container_runtime": "pyxis", "container_image": "/i.sqsh"},
    ):
        assert base.replace(**changes).group_key() != base.group_key(), changes


# --------------------------------------------------------------------------- validation

#: field -> (a bad value, words the message must contain)
BAD: list[tuple[str, Any, str]] = [
    ("name", "my run", "letters, digits"),
    ("name", "$(touch /tmp/pwned)", "letters, digits"),
    ("name", "a\nb", "letters, digits"),
    ("name", "x" * 65, "at most 64"),
    ("model", "resnet50; rm -rf /", "pkg.module:function"),
    ("dataset", "imagenet", "one of synthetic"),
    ("data_root", "/a\nb", "newlines"),
    ("download", "yes", "true or false"),
    ("task", "segmentation", "classification, regression"),
    ("target", "col\r", "newlines"),
    ("num_classes", 1, "from 2 to"),
    ("synthetic_samples", 0, "from 1 to"),
    ("synthetic_val_samples", -1, "from 1 to"),
    ("synthetic_shape", "1x28x28", "C,H,W"),
    ("nodes", 0, "integer from 1 to 1024, got 0"),
    ("nodes", True, "integer"),
    ("gpus_per_node", 129, "from 1 to 128"),
    ("backend", "mpi", "auto, nccl, gloo"),
    ("launcher", "mpirun", "torchrun, srun"),
    ("device", "tpu", "cuda, cpu"),
    ("partition", "gpu debug", "partition name"),
    ("account", "a;b", "letters, digits"),
    ("qos", "high\n#SBATCH --x", "letters, digits"),
    ("time_limit", "1h", "HH:MM:SS"),
    ("time_limit", "0", "at least 1 minute"),
    ("time_limit", "10:61:00", "minutes must be below 60"),
    ("time_limit", "400-00", "365 days"),
    ("constraint", "a100 ib", "node features"),
    ("gpu_type", "h100;rm -rf", "a GPU type"),
    ("gpu_type", " h100", "neither a space nor ':' at either end"),
    ("cpus_per_task", 0, "from 1 to 1024"),
    ("mem", "16GB", "16G"),
    ("mail_type", "END,BOGUS", "Slurm mail types, comma-separated, from NONE, BEGIN, END"),
    ("mail_type", "END FAIL", "comma-separated"),
    ("mail_user", "me@example.org --wrap=x", "an e-mail address"),
    ("epochs", 0, "from 1 to"),
    ("batch_per_gpu", 0, "from 1 to"),
    ("lr", float("nan"), "above 0"),
    ("lr", 0, "above 0"),
    ("lr_scaling", "sqrt", "none, linear"),
    ("base_batch", 0, "from 1 to"),
    ("optimizer", "adam", "sgd, adamw"),
    ("schedule", "linear", "none, step, cosine"),
    ("warmup_epochs", -1, "from 0 to"),
    ("precision", "fp8", "off, bf16, fp16"),
    ("workers", -1, "from 0 to 256"),
    ("decode", "nvjpeg", "auto, cpu, gpu"),
    ("decode", "gpu", "gpu is for the imagefolder dataset, not synthetic"),
    ("seed", -1, "from 0 to"),
    ("max_steps_per_epoch", 0, "from 1 to"),
    ("requeue", 1, "true or false"),
    ("signal_lead_sec", 70000, "from 0 to 65535"),
    ("telemetry_sec", 3601, "from 0 to 3600"),
    ("env_setup", ("module load a\nmodule load b",), "one shell line per item"),
    ("env_setup", ("#SBATCH --output=/etc/passwd",), "extra_sbatch"),
    ("env_setup", ("echo 'unclosed",), "not valid bash"),
    ("env_setup", ("if true; then",), "not valid bash"),
    ("env_setup", ("cat <<EOF",), "here-documents"),
    ("env_setup", ("module load x \\",), "join the next line"),
    ("env_setup", "module load x", "list of strings"),
    ("python", "python3 -u", "without spaces"),
    ("python", "", "must not be empty"),
    ("extra_sbatch", ("--exclusive\n#SBATCH --output=/x",), "--option=value"),
    ("extra_sbatch", ("--comment=a b",), "--option=value"),
    ("extra_sbatch", ("--comment=$(id)",), "--option=value"),
    ("extra_sbatch", ("-o",), "--option=value"),
    ("extra_sbatch", ("--output=/tmp/x",), "override --output"),
    ("extra_sbatch", ("--out=/tmp/x",), "override --output"),
    ("extra_sbatch", ("--chd=/",), "override --chdir"),
    ("extra_sbatch", ("--err=/x",), "override --error"),
    ("extra_sbatch", ("--nodes=9",), "override --nodes"),
    ("extra_sbatch", ("--array=1-3",), "override --array"),
    ("extra_trainer_args", ("--run-dir", "/elsewhere"), "run directory"),
    ("extra_trainer_args", ("--run=/x",), "run directory"),
    ("extra_trainer_args", ("",), "1-4096 characters"),
    ("extra_trainer_args", ("a\nb",), "newlines"),
    ("nccl_env", {"nccl_debug": "INFO"}, "upper-case"),
    ("nccl_env", {"NCCL DEBUG": "INFO"}, "upper-case"),
    ("nccl_env", {"PYTHONPATH": "/x"}, "set by the job script"),
    ("nccl_env", {"SLURM_PROCID": "0"}, "set by the job script"),
    ("nccl_env", {"NCCL_DEBUG": "INFO\nrm -rf ~"}, "newlines"),
    ("nccl_env", "NCCL_DEBUG=INFO", "must map NAME to value"),
    ("entry", "notebook", "trainer, script"),
    ("script", "-m a b", "-m package.module"),
    ("script", "--help", "-m package.module"),
    ("script", "train.py\n--x", "newlines"),
    ("script_args", "--name 'unclosed", "split into shell words"),
    ("script_args", "a\x00b", "control characters"),
    ("project_dir", "p\nq", "newlines"),
    ("code_mode", "copy", "snapshot, in-place"),
    ("observe", "maybe", "on, off"),
    ("snapshot_max_mb", 0, "from 1 to"),
    ("metrics", "nope", "epoch-line"),
    ("metrics", "regex:(unclosed", "regex"),
    ("metrics", "regex:loss (?P<zzz>\\d+)", "epoch"),
    ("metrics", "csv:", "csv"),
    ("metrics_columns", {"a": "not a column"}, "letters, digits and _"),
    ("metrics_columns", {"a b": "train_loss"}, "without spaces"),
    ("metrics_columns", (("a", "x"), ("b", "x")), "mapped twice"),
    ("samples_per_epoch", 0, "from 1 to"),
    ("max_steps", 0, "from 1 to"),
    ("environment", "docker", "python, venv, conda, modules, container"),
    ("modules", ("cuda 12",), "module name"),
    ("container_runtime", "docker", "empty or one of pyxis, apptainer, singularity, podman"),
    ("container_image", "nvcr.io#nvidia/pytorch:24.05 -py3", "without spaces"),
    ("container_mounts", ("data:/data",), "absolute path"),
    ("container_mounts", ("/a:/b:rx",), "ro or rw"),
]


@pytest.mark.parametrize(("field", "value", "words"), BAD)
def test_each_bad_value_is_named_with_what_is_allowed(field: str, value: Any, words: str) -> None:
    script = DESCRIPTIONS[field].applies == "script" or field == "entry"
    base = ExperimentSpec(entry="script", script="train.py") if script else ExperimentSpec()
    spec = dataclasses.replace(base, **{field: value})
    errors = validate(spec)
    assert fields_of(errors) == [field], errors
    assert words in errors[0].message
    assert str(errors[0]).startswith(f"{field}: ")
    with pytest.raises(SpecError):
        render_training(spec, "/r")


def test_every_field_has_a_bad_value_case() -> None:
    assert {f for f, _, _ in BAD} == set(FIELDS)


def test_message_says_what_is_allowed_and_what_was_given() -> None:
    (err,) = validate(ExperimentSpec(nodes=0))
    assert str(err) == "nodes: must be an integer from 1 to 1024, got 0"


def test_all_errors_come_at_once() -> None:
    spec = ExperimentSpec(
        name="", nodes=0, gpus_per_node=0, backend="x", time_limit="soon", mem="lots", epochs=0
    )
    assert fields_of(validate(spec)) == [
        "name",
        "nodes",
        "gpus_per_node",
        "backend",
        "time_limit",
        "mem",
        "epochs",
    ]


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"backend": "nccl", "device": "cpu"}, "backend", "needs device cuda"),
        ({"precision": "fp16", "device": "cpu", "backend": "gloo"}, "precision", "needs device"),
        ({"dataset": "imagefolder"}, "data_root", "required"),
        (
            {"model": "mlp", "dataset": "tabular", "data_root": "/d.csv", "task": "regression"},
            "target",
            "required",
        ),
        (
            {"model": "mlp", "dataset": "tabular", "data_root": "/d.csv", "target": "y"},
            "task",
            "regression",
        ),
        (
            {"dataset": "mnist", "data_root": "/data", "task": "regression"},
            "task",
            "classification",
        ),
        ({"target": "y"}, "target", "only used with"),
        (
            {"dataset": "pkg.m:f", "task": "regression", "num_classes": 10},
            "num_classes",
            "regression",
        ),
        ({"epochs": 3, "warmup_epochs": 3}, "warmup_epochs", "below epochs (3)"),
        # What the trainer's build_model refuses, refused at submit instead.
        (
            {"dataset": "tabular", "data_root": "/d.csv", "target": "y", "task": "regression"},
            "model",
            "simple_cnn needs C,H,W images, but dataset tabular gives rows of numbers; use mlp "
            "or pkg.module:function",
        ),
        (
            {
                "model": "resnet18",
                "dataset": "tabular",
                "data_root": "/d.csv",
                "target": "y",
                "task": "regression",
            },
            "model",
            "resnet18 needs C,H,W images",
        ),
        ({"synthetic_shape": "784"}, "model", "synthetic_shape 784 gives flat samples"),
        ({"model": "resnet18", "synthetic_shape": "16,32"}, "model", "a C,H,W synthetic_shape"),
        ({"model": "vit_b_16", "synthetic_shape": "2,32,32"}, "model", "1 or 3 channels"),
        ({"time_limit": "2", "signal_lead_sec": 120}, "signal_lead_sec", "shorter than the time"),
    ],
)
def test_cross_field_rules(changes: dict[str, Any], field: str, words: str) -> None:
    errors = validate(ExperimentSpec(**changes))
    assert fields_of(errors) == [field], errors
    assert words in errors[0].message


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {
            "model": "mlp",
            "dataset": "tabular",
            "data_root": "~/d.csv",
            "target": "speed",
            "task": "regression",
        },
        {
            "model": "mypkg.models:net",
            "dataset": "tabular",
            "data_root": "/d.csv",
            "target": "y",
            "task": "regression",
        },
        {"dataset": "mypkg.data:build", "task": "regression", "target": "y"},
        {"model": "resnet18", "dataset": "mypkg.data:build"},  # the shape is known at run time
        {"model": "mlp", "synthetic_shape": "784"},
        {"model": "simple_cnn", "synthetic_shape": "5,16,16"},  # any channel count
        {"model": "resnet18", "synthetic_shape": "3,32,32"},
        {"model": "resnet18", "synthetic_shape": ""},  # the trainer's default is 1,28,28
        {"model": "vit_b_16", "dataset": "cifar10", "data_root": "/data"},
        {"model": "resnet50", "dataset": "imagefolder", "data_root": "/imagenet"},
        {
            "model": "mypkg.models:net",
            "partition": "gpu,gpu-long",
            "constraint": "[rack1*2&rack2*2]",
        },
        {"extra_sbatch": ("--exclusive", "--dependency=afterok:123", "--mail-user=a@b.org")},
        {"extra_sbatch": ("--nodelist=n[1-3]", "--gres-flags=enforce-binding", "--comment=x")},
        {"env_setup": ("if [ -f ~/.env ]; then", "  source ~/.env", "fi", "x=$(cat <<<'a')")},
        {"env_setup": ("\tmodule load a # tab-indented",)},
        {"lr": 3e-4, "optimizer": "adamw", "device": "cpu", "backend": "gloo", "precision": "bf16"},
        {"time_limit": "1-12", "mem": "0", "signal_lead_sec": 0, "requeue": False},
    ],
)
def test_good_specs_pass(changes: dict[str, Any]) -> None:
    assert validate(ExperimentSpec(**changes)) == []


# --------------------------------------------------------------------------- time limits


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30", 30),
        ("0:30", 1),  # MM:SS rounds up, as Slurm does
        ("90:00", 90),
        ("01:00:00", 60),
        ("2-12", 3600),
        ("1-00:30", 1470),
        ("1-00:00:01", 1441),
        (" 10 ", 10),
    ],
)
def test_parse_time_limit(text: str, minutes: int) -> None:
    assert parse_time_limit(text) == minutes


@pytest.mark.parametrize("text", ["", "1h", "1:2:3:4", "-5", "1-", "INFINITE", "1-24", "٣"])
def test_parse_time_limit_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"HH:MM:SS|below|at least"):
        parse_time_limit_seconds(text)


def test_format_time_limit() -> None:
    assert format_time_limit(5) == "00:05:00"
    assert format_time_limit(1470) == "1-00:30:00"


# --------------------------------------------------------------------------- cluster checks

PARTS = [
    PartitionInfo(
        "debug",
        nodes=3,
        gpus_per_node=2,
        cpus_per_node=4,
        max_time_min=60,
        max_nodes=None,
        is_default=True,
    ),
    PartitionInfo("small", nodes=1, gpus_per_node=2, cpus_per_node=4, max_time_min=10, max_nodes=1),
    PartitionInfo(
        "cpu", nodes=8, gpus_per_node=0, cpus_per_node=32, max_time_min=None, max_nodes=4
    ),
]


def test_cluster_fit_passes() -> None:
    spec = ExperimentSpec(partition="debug", nodes=3, gpus_per_node=2, time_limit="59")
    assert validate_for_cluster(spec, PARTS) == []
    cpu = ExperimentSpec(partition="cpu", device="cpu", nodes=4, gpus_per_node=8, cpus_per_task=32)
    assert validate_for_cluster(cpu.replace(time_limit="30-00"), PARTS) == []


def test_unknown_partition_lists_the_real_ones() -> None:
    (err,) = validate_for_cluster(ExperimentSpec(partition="gpu"), PARTS)
    assert err.field == "partition" and "have: cpu, debug, small" in err.message


def test_cluster_limits_are_all_reported() -> None:
    spec = ExperimentSpec(partition="small", nodes=2, gpus_per_node=4, time_limit="00:30:00")
    errors = validate_for_cluster(spec, PARTS)
    assert fields_of(errors) == ["gpus_per_node", "nodes", "time_limit"]
    assert "has 2 GPUs per node, got 4" in errors[0].message
    assert "at most 1 nodes" in errors[1].message and "00:10:00" in errors[2].message


def test_default_partition_is_checked_when_none_is_named() -> None:
    errors = validate_for_cluster(ExperimentSpec(nodes=4, time_limit="2:00:00"), PARTS)
    assert fields_of(errors) == ["nodes", "time_limit"]


def test_gpu_runs_on_a_cpu_partition_and_cpu_overcommit_are_refused() -> None:
    errs = validate_for_cluster(ExperimentSpec(partition="cpu"), PARTS)
    assert fields_of(errs) == ["device"]
    srun = ExperimentSpec(partition="debug", launcher="srun", gpus_per_node=2, cpus_per_task=4)
    assert fields_of(validate_for_cluster(srun, PARTS)) == ["cpus_per_task"]


def test_no_partition_info_means_no_cluster_errors() -> None:
    assert validate_for_cluster(ExperimentSpec(partition="any"), []) == []


# --------------------------------------------------------------------------- forms


def test_form_text_converts_onto_a_base() -> None:
    base = ExperimentSpec(partition="gpu", python="~/venv/bin/python")
    spec, errors = spec_from_form(
        {
            "name": " r50 ",
            "nodes": "2",
            "gpus_per_node": "4",
            "lr": "",
            "num_classes": "",
            "requeue": "no",
            "env_setup": "module load pytorch\n\nsource ~/venv/bin/activate\n",
            "extra_trainer_args": "--momentum 0.9 --note 'two words'",
            "extra_sbatch": "--exclusive --mail-type=END",
            "nccl_env": "NCCL_SOCKET_IFNAME=ib0, NCCL_DEBUG=INFO",
        },
        base,
    )
    assert errors == []
    assert spec is not None
    assert (spec.name, spec.nodes, spec.gpus_per_node, spec.lr, spec.requeue) == (
        "r50",
        2,
        4,
        None,
        False,
    )
    assert spec.partition == "gpu" and spec.python == "~/venv/bin/python"
    assert spec.env_setup == ("module load pytorch", "source ~/venv/bin/activate")
    assert spec.extra_trainer_args == ("--momentum", "0.9", "--note", "two words")
    assert spec.nccl_env == (("NCCL_SOCKET_IFNAME", "ib0"), ("NCCL_DEBUG", "INFO"))


def test_form_collects_conversion_and_validation_errors_per_field() -> None:
    spec, errors = check_form(
        {
            "nodes": "two",
            "lr": "fast",
            "requeue": "maybe",
            "extra_trainer_args": "--note 'unclosed",
            "nccl_env": "NCCL_DEBUG",
            "gpus_per_node": "0",
            "name": "a b",
            "colour": "red",
        }
    )
    assert spec is None
    by_field = {e.field: e.message for e in errors}
    assert set(by_field) == {
        "nodes",
        "lr",
        "requeue",
        "extra_trainer_args",
        "nccl_env",
        "gpus_per_node",
        "name",
        "colour",
    }
    assert by_field["nodes"] == "must be an integer, got 'two'"
    assert "NAME=value" in by_field["nccl_env"] and by_field["colour"] == "unknown field"
    assert "from 1 to 128" in by_field["gpus_per_node"]
