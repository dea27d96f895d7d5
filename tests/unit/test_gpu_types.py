"""GPU types by name: the normaliser's table, the kinds of a partition's nodes, what a typed
name resolves to (any case, a plain name, an ambiguous one), the refusal that names what a
partition has, and how the job script asks for a type (a GRES type, or a feature AND-ed with
the spec's own constraint; untyped exactly as before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddp_tui.remote.backends.slurm.commands import SEP
from ddp_tui.remote.backends.slurm.parsers import parse_gpus, parse_sinfo, partitions_from_nodes
from ddp_tui.sbatch_templates import render_training, sbatch_directives
from ddp_tui.spec import ExperimentSpec, PartitionInfo, SpecError, validate, validate_for_cluster
from ddp_tui.spec.cluster_fit import with_gpu_type_resolved
from ddp_tui.spec.gpu_types import (
    GpuKind,
    gres_gpus,
    kinds_of_nodes,
    node_kinds,
    normalise,
    resolve_gpu_type,
    split_gpu_type,
)
from tests.fixtures.slurm_cluster import ClusterLayout, SlurmCluster

# (raw GRES type or feature, plain name); the memory comes from the name, else from a model
# sold in one size only (an A100 was sold with 40 and 80 GB, a V100 with 16 and 32).
TABLE = [
    ("a100", "A100"),
    ("a100_40gb", "A100 40GB"),
    ("a100-sxm4-40gb", "A100 40GB"),
    ("nvidia_a100-sxm4-40gb", "A100 40GB"),
    ("nvidia_a100-pcie-40gb", "A100 40GB"),
    ("a100_80gb", "A100 80GB"),
    ("a100-sxm4-80gb", "A100 80GB"),
    ("nvidia_a100_80gb_pcie", "A100 80GB"),
    ("h100", "H100 80GB"),
    ("h100_80gb", "H100 80GB"),
    ("nvidia_h100_80gb_hbm3", "H100 80GB"),
    ("h100-sxm5-80gb", "H100 80GB"),
    ("H100", "H100 80GB"),
    ("h100_nvl", "H100 NVL 94GB"),
    ("nvidia_h100_nvl", "H100 NVL 94GB"),
    ("h200", "H200 141GB"),
    ("nvidia_h200", "H200 141GB"),
    ("gh200", "GH200"),
    ("b200", "B200 180GB"),
    ("v100", "V100"),
    ("tesla_v100-sxm2-16gb", "V100 16GB"),
    ("v100_32gb", "V100 32GB"),
    ("v100s", "V100S 32GB"),
    ("l40s", "L40S 48GB"),
    ("l40", "L40 48GB"),
    ("a40", "A40 48GB"),
    ("a30", "A30 24GB"),
    ("a10", "A10 24GB"),
    ("rtx_a6000", "RTX A6000 48GB"),
    ("a6000", "RTX A6000 48GB"),
    ("nvidia_rtx_a6000", "RTX A6000 48GB"),
    ("rtx6000ada", "RTX 6000 Ada 48GB"),
    ("rtx_6000_ada", "RTX 6000 Ada 48GB"),
    ("quadro_rtx_8000", "Quadro RTX 8000 48GB"),
    ("rtx8000", "Quadro RTX 8000 48GB"),
    ("rtx3090", "RTX 3090 24GB"),
    ("geforce_rtx_3090", "RTX 3090 24GB"),
    ("rtx4090", "RTX 4090 24GB"),
    ("rtx2080ti", "RTX 2080 Ti 11GB"),
    ("nvidia_geforce_rtx_2080_ti", "RTX 2080 Ti 11GB"),
    ("t4", "T4 16GB"),
    ("tesla_t4", "T4 16GB"),
    ("p100", "P100"),
    ("k80", "K80"),
    ("mi250x", "MI250X 128GB"),
    ("mi250", "MI250 128GB"),
    ("mi300x", "MI300X 192GB"),
]


@pytest.mark.parametrize(("raw", "plain"), TABLE)
def test_the_table_names_each_type_plainly(raw: str, plain: str) -> None:
    kind = normalise(raw)
    assert kind is not None and kind.known
    assert (kind.raw, kind.plain, kind.source) == (raw, plain, "gres")
    # A feature that names a model is the same kind, and so is its gpu_ form.
    assert normalise(raw, "feature") == GpuKind(raw, kind.model, kind.memory_gb, "feature")
    gpu_form = normalise(f"gpu_{raw}", "feature")
    assert gpu_form is not None and gpu_form.plain == plain


def test_an_unknown_gres_type_is_offered_as_it_is_and_an_unknown_feature_is_none() -> None:
    assert normalise("tpu_v9") == GpuKind("tpu_v9", "tpu_v9", None, known=False)
    assert normalise("tpu_v9").plain == "tpu_v9"  # type: ignore[union-attr]
    # Features say much besides GPUs; and one that says only the memory is no kind of its own.
    for feature in ("ib", "intel", "skylake", "gpu80g", "80gb", ""):
        assert normalise(feature, "feature") is None


@given(st.text(max_size=40), st.sampled_from(["gres", "feature"]))
def test_the_normaliser_never_raises(raw: str, source: str) -> None:
    kind = normalise(raw, source)
    assert kind is None or (kind.raw == raw and kind.plain and kind.label and kind.words())


@pytest.mark.parametrize(
    ("gres", "items", "gpus"),
    [
        ("gpu:2", [("", 2)], 2),
        ("gpu:a100:4(S:0-1)", [("a100", 4)], 4),
        ("gpu:a100:4(S:0,1),gpu:v100:2", [("a100", 4), ("v100", 2)], 6),
        ("gpu:tesla:2,shard:8", [("tesla", 2)], 2),
        ("gpu:tesla", [("tesla", 1)], 1),
        ("mps:100,gpu:1", [("", 1)], 1),
        ("(null)", [], 0),
    ],
)
def test_gres_gpus_and_the_count_sinfo_reads(
    gres: str, items: list[tuple[str, int]], gpus: int
) -> None:
    assert gres_gpus(gres) == items
    assert parse_gpus(gres) == gpus


def test_a_nodes_kinds_come_from_its_gres_types_else_from_its_features() -> None:
    # Typed GRES: the type; a feature of the same GPU is not a second kind.
    (typed,) = node_kinds("gpu:a100:2", ["a100", "ib"])
    assert (typed.raw, typed.source, typed.plain) == ("a100", "gres", "A100")
    # Untyped GRES: a feature naming a model is the kind; a memory feature says its memory.
    (feature,) = node_kinds("gpu:4", ["gpu_a100", "gpu80g", "ib"])
    assert (feature.raw, feature.source, feature.plain) == ("gpu_a100", "feature", "A100 80GB")
    assert feature.request == "feature:gpu_a100"
    assert node_kinds("gpu:4", ["ib"]) == []  # untyped, and no feature names a GPU
    assert node_kinds("(null)", ["a100"]) == []  # no GPUs at all


def test_a_partitions_kinds_count_their_nodes() -> None:
    kinds = kinds_of_nodes(
        [
            ("n1", "gpu:a100:2", ["a100"]),
            ("n2", "gpu:a100:2", ["a100"]),
            ("n3", "gpu:h100:2", ["h100"]),
            ("n4", "gpu:2", ["gpu_l40s"]),
            ("n5", "gpu:2", []),
        ]
    )
    assert [(k.label, k.request) for k in kinds] == [
        ("A100 (a100, 2 nodes)", "a100"),
        ("H100 80GB (h100, 1 node)", "h100"),
        ("L40S 48GB (gpu_l40s, 1 node, feature)", "feature:gpu_l40s"),
    ]
    assert [k.words() for k in kinds] == [
        "a100 (A100, 2 nodes)",
        "h100 (H100 80GB, 1 node)",
        "gpu_l40s (L40S 48GB, 1 node, feature)",
    ]


KINDS = kinds_of_nodes(
    [
        ("g1", "gpu:a100_40gb:4", []),
        ("g2", "gpu:a100_80gb:4", []),
        ("g3", "gpu:nvidia_h100_80gb_hbm3:8", []),
        ("g4", "gpu:4", ["gpu_l40s"]),
    ]
)


@pytest.mark.parametrize(
    ("asked", "raw"),
    [
        ("a100_40gb", "a100_40gb"),  # exact
        ("A100_80GB", "a100_80gb"),  # another case: Slurm itself refuses it
        ("A100 80GB", "a100_80gb"),  # the plain name
        ("a100-80g", "a100_80gb"),  # the plain name, written otherwise
        ("H100", "nvidia_h100_80gb_hbm3"),  # the model alone, where the partition has one
        ("h100 80GB", "nvidia_h100_80gb_hbm3"),
        ("L40S", "gpu_l40s"),  # a feature's kind
        ("feature:gpu_l40s", "gpu_l40s"),
    ],
)
def test_what_a_user_types_resolves_to_the_raw_type(asked: str, raw: str) -> None:
    found = resolve_gpu_type(asked, KINDS)
    assert isinstance(found, GpuKind) and found.raw == raw


def test_a_name_that_means_several_types_is_ambiguous_and_an_absent_one_is_none() -> None:
    found = resolve_gpu_type("A100", KINDS)
    assert isinstance(found, tuple)
    assert [k.raw for k in found] == ["a100_40gb", "a100_80gb"]
    assert resolve_gpu_type("h200", KINDS) == ()
    assert resolve_gpu_type("A100 64GB", KINDS) == ()
    assert resolve_gpu_type("feature:gpu_h200", KINDS) == ()


def test_an_exact_gres_type_wins_over_a_feature_of_the_same_name() -> None:
    kinds = kinds_of_nodes([("a", "gpu:a100:2", []), ("b", "gpu:2", ["a100"])])
    assert [k.source for k in kinds] == ["gres", "feature"]
    found = resolve_gpu_type("a100", kinds)
    assert isinstance(found, GpuKind) and found.source == "gres"


# -- the test cluster's layout (tests/fixtures/slurm_cluster.py), as sinfo prints it ------

SINFO = "".join(
    SEP.join([node, part, "up", "idle", "4", "4000", gres, limit, size, feature]) + "\n"
    for node, part, gres, limit, size, feature in [
        ("n1", "debug*", "gpu:a100:2", "1:00:00", "1-infinite", "a100"),
        ("n1", "small", "gpu:a100:2", "10:00", "1", "a100"),
        ("n2", "debug*", "gpu:a100:2", "1:00:00", "1-infinite", "a100"),
        ("n3", "debug*", "gpu:h100:2(S:0)", "1:00:00", "1-infinite", "h100,ib"),
    ]
)


def _partitions() -> dict[str, PartitionInfo]:
    return {p.name: p for p in partitions_from_nodes(parse_sinfo(SINFO))}


def test_sinfo_features_and_the_partitions_gpu_kinds() -> None:
    nodes = {(n.name, n.partition): n for n in parse_sinfo(SINFO)}
    assert nodes["n3", "debug"].features == ("h100", "ib")
    assert nodes["n3", "debug"].gpus == 2
    parts = _partitions()
    assert [(k.raw, k.nodes) for k in parts["debug"].gpu_kinds] == [("a100", 2), ("h100", 1)]
    assert [(k.raw, k.nodes) for k in parts["small"].gpu_kinds] == [("a100", 1)]


def _spec(**changes: object) -> ExperimentSpec:
    return ExperimentSpec(time_limit="00:05:00").replace(**changes)


def test_a_type_the_partition_lacks_is_refused_naming_what_it_and_the_cluster_have() -> None:
    parts = list(_partitions().values())
    (error,) = validate_for_cluster(_spec(gpu_type="h100", partition="small"), parts)
    assert error.field == "gpu_type"
    assert error.message == (
        "h100 is not in partition small, which has a100 (A100, 1 node); the cluster has "
        "a100 (A100) in debug and small, and h100 (H100 80GB) in debug"
    )
    (error,) = validate_for_cluster(_spec(gpu_type="v100"), parts)  # the default partition
    assert error.message.startswith(
        "v100 is not in partition debug, which has a100 (A100, 2 nodes) and h100 (H100 80GB, "
        "1 node); the cluster has"
    )
    # More nodes than have the type: Slurm refuses it without saying why.
    (error,) = validate_for_cluster(_spec(gpu_type="h100", nodes=2), parts)
    assert (error.field, error.message) == (
        "nodes",
        "1 node of the partition have h100 (H100 80GB), got 2",
    )


def test_an_untyped_cluster_says_it_names_no_types() -> None:
    untyped = [PartitionInfo("gpu", 2, 4, 8, None, None, is_default=True)]
    (error,) = validate_for_cluster(_spec(gpu_type="h100"), untyped)
    assert error.message == (
        "h100 is not in partition gpu, whose GPUs have no type; no partition of this "
        "cluster names a GPU type: leave gpu_type empty"
    )


def test_an_ambiguous_name_is_refused_naming_the_candidates() -> None:
    part = PartitionInfo("gpu", 4, 4, 8, None, None, is_default=True, gpu_kinds=KINDS)
    (error,) = validate_for_cluster(_spec(gpu_type="A100"), [part])
    assert error.message == (
        "A100 matches a100_40gb (A100 40GB, 1 node) and a100_80gb (A100 80GB, 1 node) in "
        "partition gpu; a job asks for one GPU type (Slurm cannot take either of two): name "
        "one of them"
    )


def test_the_plan_holds_the_type_as_the_cluster_names_it() -> None:
    parts = list(_partitions().values())
    for asked in ("A100", "a100", "A100 "[:-1]):
        spec = _spec(gpu_type=asked, partition="small")
        assert validate_for_cluster(spec, parts) == []
        assert with_gpu_type_resolved(spec, parts).gpu_type == "a100"
    assert with_gpu_type_resolved(_spec(gpu_type="H100 80GB"), parts).gpu_type == "h100"
    # Absent: unchanged, for validate_for_cluster to refuse by name.
    absent = _spec(gpu_type="h100", partition="small")
    assert with_gpu_type_resolved(absent, parts) is absent


def test_a_gpu_type_needs_cuda() -> None:
    assert [str(e) for e in validate(_spec(gpu_type="h100", device="cpu", backend="gloo"))] == [
        "gpu_type: a GPU type needs device cuda"
    ]


def _directives(**changes: object) -> list[str]:
    return [
        d
        for d in sbatch_directives(_spec(**changes), "/r")
        if d.startswith(("--gres", "--constraint"))
    ]


def test_the_job_asks_for_a_gres_type_or_a_feature() -> None:
    assert _directives() == ["--gres=gpu:1"]  # untyped: as before
    assert _directives(gpu_type="a100", gpus_per_node=2) == ["--gres=gpu:a100:2"]
    # A feature's kind: untyped GPUs, the feature AND-ed with the spec's own constraint.
    assert _directives(gpu_type="feature:gpu_a100") == ["--constraint=gpu_a100", "--gres=gpu:1"]
    assert (
        _directives(gpu_type="feature:gpu_a100", constraint="ib")[0] == "--constraint=ib&gpu_a100"
    )
    assert (
        _directives(gpu_type="feature:gpu_a100", constraint="a100|h100")[0]
        == "--constraint=(a100|h100)&gpu_a100"
    )
    assert split_gpu_type("feature:gpu_a100") == ("", "gpu_a100")


def test_a_typed_script_differs_from_an_untyped_one_in_its_gres_line_alone() -> None:
    # The untyped script itself is held by the golden files (tests/unit/test_templates.py).
    spec = _spec()
    typed = render_training(spec.replace(gpu_type="h100"), "/r")
    assert typed.replace("--gres=gpu:h100:1", "--gres=gpu:1") == render_training(spec, "/r")


def test_a_plain_name_no_plan_resolved_is_refused_where_it_meets_the_sbatch_lines() -> None:
    spec = _spec(gpu_type="H100 80GB")
    assert validate(spec) == []  # a plain name is a good value: a plan resolves it
    with pytest.raises(SpecError, match="gpu_type: 'H100 80GB' is not a type as the cluster"):
        render_training(spec, "/r")


def test_the_test_clusters_gres_are_typed_and_an_untyped_one_is_not_reused(
    tmp_path: Path,
) -> None:
    # The configuration tests/fixtures/slurm_cluster.py writes (no daemon is started here).
    cluster = SlurmCluster(ClusterLayout(root=str(tmp_path)))
    (tmp_path / "etc").mkdir()
    cluster._write_configs()
    conf = (tmp_path / "etc" / "slurm.conf").read_text()
    for node, kind in (("n1", "a100"), ("n2", "a100"), ("n3", "h100")):
        assert f"NodeName={node} " in conf
        line = next(ln for ln in conf.splitlines() if ln.startswith(f"NodeName={node} "))
        assert f" Gres=gpu:{kind}:2 Features={kind} " in line
    assert "AccountingStorageTRES=gres/gpu\n" in conf  # sacct's usage stays untyped
    gres = (tmp_path / "etc" / "gres.conf").read_text()
    assert f"NodeName=n3 Name=gpu Type=h100 File={tmp_path}/dev/n3/nvidia[0-1]" in gres
    # A cluster brought up by hand before the types (a layout.json without them) loads, but
    # is not taken as configured as now, so a session brings up a typed one.
    cluster._save_layout()
    assert cluster.configured_as_now()
    layout = json.loads((tmp_path / "layout.json").read_text())
    del layout["gpu_types"]
    (tmp_path / "layout.json").write_text(json.dumps(layout))
    old = SlurmCluster.load(tmp_path)
    assert old.layout.gpu_type("n3") == "h100" and not old.configured_as_now()
