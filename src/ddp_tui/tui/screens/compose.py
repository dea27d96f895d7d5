"""Compose: a form for every field of the spec, inline errors, a live sbatch preview, and
submit / sweep / preflight / save-script actions."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Footer, Input, Label, Select, Static, TextArea

from ddp_tui.remote.cluster import ValidationFailed
from ddp_tui.spec import (
    BACKENDS,
    BUILTIN_DATASETS,
    DEVICES,
    LAUNCHERS,
    LR_SCALINGS,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    TASKS,
    ExperimentSpec,
    FieldError,
    spec_from_form,
)
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import PreviewReady, SubmitRejected, Submitted
from ddp_tui.tui.modals import PathModal, SweepModal, SweepRequest
from ddp_tui.tui.screens.base import BaseScreen

if TYPE_CHECKING:
    from ddp_tui.remote.scheduler import PartitionInfo

CUSTOM = "__custom__"

#: Models the trainer builds by name; any other torchvision classifier or pkg.mod:fn is "custom".
BUILTIN_MODELS: tuple[str, ...] = (
    "mlp",
    "simple_cnn",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "mobilenet_v3_small",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
)


@dataclass(frozen=True)
class FieldDef:
    """One form field: the spec field it sets, its label, its widget kind and a hint."""

    name: str
    label: str
    kind: str  # "text" | "choice" | "bool" | "lines" | "model" | "dataset" | "partition"
    hint: str = ""
    choices: tuple[str, ...] = ()


SECTIONS: tuple[tuple[str, tuple[FieldDef, ...]], ...] = (
    (
        "What to train",
        (
            FieldDef("name", "Name", "text", "letters, digits, _ . -"),
            FieldDef("model", "Model", "model"),
            FieldDef("dataset", "Dataset", "dataset"),
            FieldDef("data_root", "Data root", "text", "directory or file (imagefolder, tabular)"),
            FieldDef("download", "Download data", "bool"),
            FieldDef("task", "Task", "choice", choices=TASKS),
            FieldDef("target", "Target column", "text", "tabular: the column to predict"),
            FieldDef("num_classes", "Classes", "text", "empty: from the dataset"),
            FieldDef("synthetic_samples", "Synthetic samples", "text", "empty: trainer default"),
            FieldDef("synthetic_val_samples", "Synthetic val", "text", "empty: trainer default"),
            FieldDef("synthetic_shape", "Synthetic shape", "text", "C,H,W e.g. 1,28,28"),
        ),
    ),
    (
        "Size and launch",
        (
            FieldDef("nodes", "Nodes", "text", "1 or more"),
            FieldDef("gpus_per_node", "GPUs per node", "text", "processes per node on CPU"),
            FieldDef("backend", "Backend", "choice", choices=BACKENDS),
            FieldDef("launcher", "Launcher", "choice", choices=LAUNCHERS),
            FieldDef("device", "Device", "choice", choices=DEVICES),
        ),
    ),
    (
        "Slurm resources",
        (
            FieldDef("partition", "Partition", "partition"),
            FieldDef("account", "Account", "text", "empty: your default"),
            FieldDef("qos", "QOS", "text", "empty: default"),
            FieldDef("time_limit", "Time limit", "text", "HH:MM:SS or D-HH:MM:SS"),
            FieldDef("constraint", "Constraint", "text", "node features, e.g. a100&ib"),
            FieldDef("cpus_per_task", "CPUs per task", "text"),
            FieldDef("mem", "Memory", "text", "e.g. 64G; empty: default"),
        ),
    ),
    (
        "Optimisation",
        (
            FieldDef("epochs", "Epochs", "text"),
            FieldDef("batch_per_gpu", "Batch per GPU", "text"),
            FieldDef("lr", "Learning rate", "text", "empty: 0.05 for sgd, 1e-3 for adamw"),
            FieldDef("lr_scaling", "LR scaling", "choice", choices=LR_SCALINGS),
            FieldDef("base_batch", "Base batch", "text", "for linear scaling; empty: none"),
            FieldDef("optimizer", "Optimizer", "choice", choices=OPTIMIZERS),
            FieldDef("schedule", "Schedule", "choice", choices=SCHEDULES),
            FieldDef("warmup_epochs", "Warmup epochs", "text"),
            FieldDef("precision", "Precision", "choice", choices=PRECISIONS),
            FieldDef("workers", "Loader workers", "text"),
            FieldDef("seed", "Seed", "text"),
            FieldDef("max_steps_per_epoch", "Max steps/epoch", "text", "empty: whole epoch"),
        ),
    ),
    (
        "Preemption",
        (
            FieldDef("requeue", "Requeue on timeout", "bool"),
            FieldDef("signal_lead_sec", "Signal lead (s)", "text", "checkpoint this early"),
        ),
    ),
    (
        "Environment",
        (
            FieldDef("env_setup", "Setup lines", "lines", "e.g. module load pytorch"),
            FieldDef("python", "Python", "text", "python3 or a venv's python"),
            FieldDef("extra_sbatch", "Extra #SBATCH", "text", "e.g. --exclusive"),
            FieldDef("extra_trainer_args", "Extra trainer args", "text", "e.g. --compile"),
            FieldDef("nccl_env", "NCCL env", "text", "NAME=value ..."),
        ),
    ),
)


def _sections() -> tuple[tuple[str, tuple[FieldDef, ...]], ...]:
    """SECTIONS limited to the spec's fields, plus any field the spec has gained since."""
    names = {f.name for f in dataclasses.fields(ExperimentSpec)}
    known = {f.name for _, fields in SECTIONS for f in fields}
    sections = [(title, tuple(f for f in fields if f.name in names)) for title, fields in SECTIONS]
    extra = tuple(
        FieldDef(f.name, f.name.replace("_", " ").capitalize(), "text")
        for f in dataclasses.fields(ExperimentSpec)
        if f.name not in known
    )
    if extra:
        sections.append(("Other", extra))
    return tuple((title, fields) for title, fields in sections if fields)


FORM_SECTIONS = _sections()
FIELDS: dict[str, FieldDef] = {f.name: f for _, fields in FORM_SECTIONS for f in fields}


def form_from_spec(spec: ExperimentSpec) -> dict[str, str]:
    """The text of every form field for ``spec``; ``spec_from_form`` reads it back."""
    form: dict[str, str] = {}
    for f in dataclasses.fields(spec):
        value: Any = getattr(spec, f.name)
        if f.name == "env_setup":
            form[f.name] = "\n".join(value)
        elif f.name == "nccl_env":
            form[f.name] = " ".join(f"{k}={shlex.quote(v)}" for k, v in value)
        elif isinstance(value, tuple):
            form[f.name] = shlex.join(value)
        elif isinstance(value, bool):
            form[f.name] = "yes" if value else "no"
        elif value is None:
            form[f.name] = ""
        else:
            form[f.name] = str(value)
    return form


def errors_by_field(errors: Iterable[FieldError]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for error in errors:
        found.setdefault(error.field, []).append(error.message)
    return found


def partition_label(info: PartitionInfo) -> str:
    """``debug*  3 nodes  2 GPU/node  60 min``: the limits Compose checks against."""
    limit = "no time limit" if info.max_time_min is None else f"{info.max_time_min} min"
    default = "*" if info.is_default else ""
    return f"{info.name}{default}  {info.nodes} nodes  {info.gpus_per_node} GPU/node  {limit}"


class ComposeScreen(BaseScreen):
    """Build an ExperimentSpec; ``spec`` pre-fills the form (defaults, or a run being edited)."""

    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit"),
        Binding("ctrl+g", "sweep", "Sweep"),
        Binding("ctrl+t", "preflight", "Preflight"),
        Binding("ctrl+o", "save_script", "Save script"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(
        self,
        spec: ExperimentSpec,
        *,
        title: str = "Compose",
        partitions: Sequence[PartitionInfo] = (),
    ) -> None:
        super().__init__()
        self.initial = spec
        self.title_text = title
        self.partitions = list(partitions)
        self.errors: dict[str, list[str]] = {}
        self.script: str | None = None
        self._preview_timer: Timer | None = None
        self._busy = False

    # -- layout ---------------------------------------------------------------

    def compose(self) -> ComposeResult:
        form = form_from_spec(self.initial)
        yield StatusHeader(self.title_text)
        with Horizontal(id="compose-body"):
            with VerticalScroll(id="form"):
                for section, fields in FORM_SECTIONS:
                    yield Static(section, classes="section")
                    for field in fields:
                        with Horizontal(classes="field-row"):
                            yield Label(field.label, classes="field-label")
                            yield from self._field_widgets(field, form[field.name])
                        yield Static("", id=f"e-{field.name}", classes="field-error")
                with Horizontal(id="actions"):
                    yield Button("Submit", variant="primary", id="submit")
                    yield Button("Sweep...", id="sweep")
                    yield Button("Preflight", id="preflight")
                    yield Button("Save script...", id="save")
            with Vertical(id="preview-pane"):
                yield Static("job.sbatch", id="preview-title")
                with VerticalScroll(id="preview-scroll"):
                    yield Static("", id="preview")
                yield Static("", id="form-summary", markup=False)
        yield Footer()

    def _field_widgets(self, field: FieldDef, value: str) -> Iterable[Widget]:
        wid = f"f-{field.name}"
        if field.kind == "choice":
            options = [(choice, choice) for choice in field.choices]
            if value not in field.choices:
                options.append((value, value))
            yield Select(options, value=value, allow_blank=False, id=wid, compact=True)
        elif field.kind == "bool":
            yield Checkbox("", value=value == "yes", id=wid, compact=True)
        elif field.kind == "lines":
            area = TextArea(value, id=wid, compact=True, soft_wrap=False, classes="lines")
            area.show_line_numbers = False
            yield area
        elif field.kind in ("model", "dataset"):
            builtins = BUILTIN_MODELS if field.kind == "model" else BUILTIN_DATASETS
            custom = value not in builtins
            options = [(name, name) for name in builtins] + [("custom...", CUSTOM)]
            with Vertical(classes="picker"):
                yield Select(
                    options,
                    value=CUSTOM if custom else value,
                    allow_blank=False,
                    id=wid,
                    compact=True,
                )
                placeholder = (
                    "torchvision name or pkg.module:function"
                    if field.kind == "model"
                    else "pkg.module:function"
                )
                custom_input = Input(
                    value if custom else "",
                    placeholder=placeholder,
                    id=f"c-{field.name}",
                    compact=True,
                )
                custom_input.display = custom
                yield custom_input
        elif field.kind == "partition":
            options = [("(cluster default)", "")]
            options += [(partition_label(p), p.name) for p in self.partitions]
            if value not in {v for _, v in options}:
                options.append((value, value))
            yield Select(options, value=value, allow_blank=False, id=wid, compact=True)
        else:
            yield Input(value, placeholder=field.hint, id=wid, compact=True)

    def on_mount(self) -> None:
        self.query_one("#f-name", Input).focus()
        self.schedule_preview(0.0)

    # -- reading the form -----------------------------------------------------

    def form_values(self) -> dict[str, str]:
        """The text of every field, as ``spec_from_form`` takes it."""
        values: dict[str, str] = {}
        for name, field in FIELDS.items():
            widget = self.query_one(f"#f-{name}")
            if isinstance(widget, Select):
                value = widget.value
                if value == CUSTOM:
                    values[name] = self.query_one(f"#c-{name}", Input).value
                else:
                    values[name] = "" if value is Select.NULL else str(value)
            elif isinstance(widget, Checkbox):
                values[name] = "yes" if widget.value else "no"
            elif isinstance(widget, TextArea):
                values[name] = widget.text
            elif isinstance(widget, Input):
                values[name] = widget.value
            del field
        return values

    def show_errors(self, errors: Sequence[FieldError]) -> None:
        """Put each error beside its field (errors for unknown fields go to the summary)."""
        self.errors = errors_by_field(errors)
        for name in FIELDS:
            label = self.query_one(f"#e-{name}", Static)
            messages = self.errors.get(name, [])
            label.update(Text("\n".join(f"↳ {m}" for m in messages)))
            label.display = bool(messages)
            self.query_one(f"#f-{name}").set_class(bool(messages), "-invalid-field")
        stray = [
            f"{field}: {'; '.join(msgs)}"
            for field, msgs in self.errors.items()
            if field not in FIELDS
        ]
        summary = self.query_one("#form-summary", Static)
        if self.errors:
            names = ", ".join(sorted(self.errors))
            summary.update(Text(f"{len(errors)} problem(s): {names}", style="bold red"))
            if stray:
                summary.update(
                    Text(
                        "\n".join([f"{len(errors)} problem(s): {names}", *stray]), style="bold red"
                    )
                )
        else:
            summary.update(Text("Ready to submit (ctrl+s).", style="green"))

    def focus_first_error(self) -> None:
        for name in FIELDS:
            if name in self.errors:
                self.query_one(f"#f-{name}").focus()
                return

    # -- live preview ---------------------------------------------------------

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Checkbox.Changed)
    @on(TextArea.Changed)
    def _field_changed(self, event: Any) -> None:
        if isinstance(event, Select.Changed) and event.select.id in ("f-model", "f-dataset"):
            name = (event.select.id or "").removeprefix("f-")
            custom = self.query_one(f"#c-{name}", Input)
            custom.display = event.value == CUSTOM
        self.schedule_preview()

    def schedule_preview(self, delay: float = 0.3) -> None:
        # Typing fires a change per key; render once the user pauses.
        if self._preview_timer is not None:
            self._preview_timer.stop()
        # (A zero-delay Textual timer divides by zero; 10 ms is "now".)
        self._preview_timer = self.set_timer(max(delay, 0.01), self._start_preview)

    def _start_preview(self) -> None:
        self.update_preview(self.form_values())

    @work(thread=True, exclusive=True, exit_on_error=False, group="preview", description="preview")
    def update_preview(self, form: Mapping[str, str]) -> None:
        spec, errors = spec_from_form(form, self.initial)
        cluster = self.ddp_app.cluster
        if cluster is None:
            self.post_message(PreviewReady(None, errors, note="not connected yet"))
            return
        if spec is None:
            # Still check the fields that did convert against the partition's limits.
            failed = {e.field for e in errors}
            partial, _ = spec_from_form(
                {k: v for k, v in form.items() if k not in failed}, self.initial
            )
            if partial is not None:
                with self.ddp_app.cluster_lock:
                    more = cluster.validate(partial)
                errors = errors + [e for e in more if e.field not in failed]
            self.post_message(PreviewReady(None, errors))
            return
        with self.ddp_app.cluster_lock:
            errors = cluster.validate(spec)
            script = cluster.render_script(spec)
        self.post_message(PreviewReady(script, errors))

    @on(PreviewReady)
    def _preview_ready(self, message: PreviewReady) -> None:
        self.show_errors(message.errors)
        preview = self.query_one("#preview", Static)
        title = self.query_one("#preview-title", Static)
        if message.script is not None:
            self.script = message.script
            preview.update(Syntax(message.script, "bash", theme="ansi_dark", word_wrap=False))
            title.update("job.sbatch")
        elif self.script is None:
            preview.update(
                Text(message.note or "Fix the fields marked in red to see the script.", style="dim")
            )
        else:
            title.update(
                Text("job.sbatch (last valid form; fix the fields in red)", style="yellow")
            )

    # -- actions --------------------------------------------------------------

    def _checked_spec(self) -> ExperimentSpec | None:
        """The spec of the form, or None after showing every error inline."""
        spec, errors = spec_from_form(self.form_values(), self.initial)
        if spec is None:
            self.show_errors(errors)
            self.focus_first_error()
            self.schedule_preview(0.0)  # adds the partition limits of the fields that parsed
            names = ", ".join(sorted({e.field for e in errors}))
            self.notify(f"Fix these fields first: {names}", severity="error", markup=False)
            return None
        if self.ddp_app.cluster is None:
            self.notify("Not connected yet: wait for the header to say ok.", severity="warning")
            return None
        if self._busy:
            self.notify("Still submitting the previous request...", severity="warning")
            return None
        return spec

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        if spec := self._checked_spec():
            self._busy = True
            self.submit(spec)

    @on(Button.Pressed, "#sweep")
    def action_sweep(self) -> None:
        spec = self._checked_spec()
        if spec is None:
            return

        def chosen(request: SweepRequest | None) -> None:
            if request is not None:
                self._busy = True
                self.sweep(spec, request)

        self.app.push_screen(SweepModal(), chosen)

    @on(Button.Pressed, "#preflight")
    def action_preflight(self) -> None:
        if spec := self._checked_spec():
            self._busy = True
            self.preflight(spec)

    @on(Button.Pressed, "#save")
    def action_save_script(self) -> None:
        spec = self._checked_spec()
        if spec is None:
            return

        def chosen(path: str | None) -> None:
            if path:
                self.save_script(spec, path)

        self.app.push_screen(
            PathModal("Save the sbatch script to (on this machine)", f"{spec.name}.sbatch"), chosen
        )

    def action_back(self) -> None:
        self.dismiss(None)

    @work(thread=True, exit_on_error=False, group="submit", description="Submit")
    def submit(self, spec: ExperimentSpec) -> None:
        cluster = self.ddp_app.require_cluster()
        try:
            with self.ddp_app.cluster_lock:
                run = cluster.submit(spec)
        except ValidationFailed as error:
            self.post_message(SubmitRejected(error.errors))
            return
        finally:
            self._busy = False
        self.post_message(Submitted([run], "submitted"))

    @work(thread=True, exit_on_error=False, group="submit", description="Sweep")
    def sweep(self, spec: ExperimentSpec, request: SweepRequest) -> None:
        cluster = self.ddp_app.require_cluster()
        try:
            with self.ddp_app.cluster_lock:
                runs = cluster.submit_sweep(spec, request.sizes, dimension=request.dimension)
        except ValidationFailed as error:
            self.post_message(SubmitRejected(error.errors))
            return
        finally:
            self._busy = False
        self.post_message(Submitted(runs, f"sweep over {request.dimension}"))

    @work(thread=True, exit_on_error=False, group="submit", description="Preflight")
    def preflight(self, spec: ExperimentSpec) -> None:
        cluster = self.ddp_app.require_cluster()
        try:
            with self.ddp_app.cluster_lock:
                run = cluster.preflight(spec)
        except ValidationFailed as error:
            self.post_message(SubmitRejected(error.errors))
            return
        finally:
            self._busy = False
        self.post_message(Submitted([run], "preflight submitted"))

    @work(thread=True, exit_on_error=False, group="save", description="Save script")
    def save_script(self, spec: ExperimentSpec, path: str) -> None:
        cluster = self.ddp_app.require_cluster()
        with self.ddp_app.cluster_lock:
            script = cluster.render_script(spec)
        target = Path(path).expanduser()
        target.write_text(script, encoding="utf-8")
        self.app.call_from_thread(
            self.notify, f"Saved the script to {target.resolve()}", markup=False
        )

    @on(SubmitRejected)
    def _rejected(self, message: SubmitRejected) -> None:
        self.show_errors(message.errors)
        self.focus_first_error()
        names = ", ".join(sorted({e.field for e in message.errors}))
        self.notify(f"The cluster refused the spec: {names}", severity="error", markup=False)

    @on(Submitted)
    def _submitted(self, message: Submitted) -> None:
        self.ddp_app.runs_submitted(message.runs, message.what)
        self.dismiss(None)
