"""Compose's form is generated from the spec's field descriptions: one row per field, in the
description's section, with the widget its description implies."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Checkbox, Input, Select, TextArea

from ddp_tui.spec import FIELD_SECTIONS, FIELDS, ExperimentSpec, PartitionInfo
from ddp_tui.spec.gpu_types import kinds_of_nodes
from ddp_tui.tui.form import (
    CUSTOM,
    FORM_FIELDS,
    FORM_SECTIONS,
    field_widgets,
    form_from_spec,
    gpu_type_options,
    partition_label,
)


def test_every_spec_field_has_a_row_from_its_description() -> None:
    assert [section for section, _ in FORM_SECTIONS] == list(FIELD_SECTIONS)
    assert list(FORM_FIELDS) == list(FIELDS)
    for name, row in FORM_FIELDS.items():
        assert row.label == FIELDS[name].label
    kinds = {name: row.kind for name, row in FORM_FIELDS.items()}
    assert kinds["model"] == kinds["dataset"] == "picker"
    assert (
        kinds["backend"] == "choice" and FORM_FIELDS["backend"].choices == FIELDS["backend"].choices
    )
    assert kinds["requeue"] == "bool" and kinds["env_setup"] == "lines"
    assert kinds["partition"] == "partition" and kinds["time_limit"] == "text"
    assert kinds["gpu_type"] == "gpu_type"
    # The model picker offers torchvision names beside the trainer's own models.
    assert FORM_FIELDS["model"].choices[:2] == FIELDS["model"].choices
    assert "resnet50" in FORM_FIELDS["model"].choices


class _FormApp(App[None]):
    def __init__(self, spec: ExperimentSpec) -> None:
        super().__init__()
        self.form = form_from_spec(spec)

    def compose(self) -> ComposeResult:
        part = PartitionInfo("gpu", nodes=2, gpus_per_node=4, cpus_per_node=8, max_time_min=60,
                             max_nodes=None, is_default=True)  # fmt: skip
        for row in FORM_FIELDS.values():
            yield from field_widgets(row, self.form[row.name], [part])


async def test_widgets_hold_the_spec_values() -> None:
    spec = ExperimentSpec(model="pkg.mod:net", requeue=False, env_setup=("a", "b"), lr=None)
    app = _FormApp(spec)
    async with app.run_test(size=(120, 200)):
        assert app.query_one("#f-model", Select).value == CUSTOM
        custom = app.query_one("#c-model", Input)
        assert custom.value == "pkg.mod:net" and custom.display
        assert app.query_one("#f-dataset", Select).value == "synthetic"
        assert not app.query_one("#c-dataset", Input).display
        assert app.query_one("#f-requeue", Checkbox).value is False
        assert app.query_one("#f-env_setup", TextArea).text == "a\nb"
        lr = app.query_one("#f-lr", Input)
        assert lr.value == "" and lr.placeholder == FIELDS["lr"].hint
        assert app.query_one("#f-backend", Select).value == "auto"


def test_partition_label() -> None:
    info = PartitionInfo("debug", 3, 2, 8, 60, None, is_default=True)
    assert partition_label(info) == "debug*  3 nodes  2 GPU/node  60 min"


def test_the_gpu_type_select_offers_the_chosen_partitions_types() -> None:
    nodes = [("n1", "gpu:a100:2", ["a100"]), ("n2", "gpu:4", ["gpu_h100"])]
    debug = PartitionInfo("debug", 2, 4, 8, 60, None, True, gpu_kinds=kinds_of_nodes(nodes))
    small = PartitionInfo("small", 1, 2, 8, 10, 1, gpu_kinds=kinds_of_nodes(nodes[:1]))
    untyped = PartitionInfo("cpu", 4, 0, 8, None, None)
    parts = [debug, small, untyped]
    assert gpu_type_options(parts, "") == [
        ("any GPU type", ""),
        ("A100 (a100, 1 node)", "a100"),
        ("H100 80GB (gpu_h100, 1 node, feature)", "feature:gpu_h100"),
        ("custom...", CUSTOM),
    ]
    assert gpu_type_options(parts, "small")[1:-1] == [("A100 (a100, 1 node)", "a100")]
    assert gpu_type_options(parts, "cpu") == [("any GPU type", ""), ("custom...", CUSTOM)]
    assert len(gpu_type_options(parts, "small,debug")) == 4  # each kind once
