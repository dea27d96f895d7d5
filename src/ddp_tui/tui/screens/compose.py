"""Compose: a form for every field of the spec, inline errors, a live sbatch preview, and
submit / sweep / preflight / save-script actions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Footer, Input, Label, Select, Static, TextArea

from ddp_tui.remote.submit.env_detect import DetectCache, DetectKey
from ddp_tui.remote.submit.plan import SubmitPlan, ValidationFailed
from ddp_tui.remote.submit.prequeue import (
    PythonCheckCache,
    PythonKey,
    PythonRecord,
    switch_python_check,
)
from ddp_tui.spec import ExperimentSpec, FieldError, check_form, convert_form, merge_errors
from ddp_tui.tui.cluster_io import Request
from ddp_tui.tui.form import (
    CUSTOM,
    FORM_SECTIONS,
    epochs_for_entry,
    errors_by_field,
    field_widgets,
    form_from_spec,
    gpu_type_options,
    runtime_options,
)
from ddp_tui.tui.form import FORM_FIELDS as FIELDS
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import (
    Notice,
    PreviewReady,
    RequestFailed,
    SubmitRejected,
    Submitted,
)
from ddp_tui.tui.modals import PathModal
from ddp_tui.tui.prequeue_notes import CheckedPreview, PythonCheckNote, partition_note
from ddp_tui.tui.screens.base import BaseScreen
from ddp_tui.tui.sweep_dialog import SweepDialog

if TYPE_CHECKING:
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.spec import PartitionInfo, Sweep


#: A preview's plan, the Python check's record, where it ran, and the container runtimes
#: detected on the spec's partition (None: not detected).
_Planned = tuple[SubmitPlan, "PythonRecord | None", str, "tuple[str, ...] | None"]


class ComposeScreen(BaseScreen):
    """Build an ExperimentSpec; ``spec`` pre-fills the form (defaults, or a run being edited)."""

    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit"),
        Binding("ctrl+g", "sweep", "Sweep"),
        Binding("ctrl+t", "preflight", "Preflight"),
        Binding("ctrl+o", "save_script", "Save script"),
        Binding("escape", "back", "Back"),
        # Shown beside the Python field when there is something to re-check.
        Binding("ctrl+r", "recheck_python", "Re-check python", show=False),
    ]
    DEFAULT_CSS = """
    ComposeScreen #partition-info {
        color: $text-muted;
        padding-left: 20;
        height: auto;
    }
    """

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
        #: The entry whose fields show: Epochs is adjusted only when Entry really changes.
        self.entry_shown = spec.entry
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
                for i, (section, fields) in enumerate(FORM_SECTIONS):
                    yield Static(section, classes="section", id=f"section-{i}")
                    for field in fields:
                        with Horizontal(classes="field-row", id=f"row-{field.name}"):
                            yield Label(field.label, classes="field-label")
                            yield from field_widgets(field, form[field.name], self.partitions)
                        yield Static("", id=f"e-{field.name}", classes="field-error")
                        if field.name == "partition":
                            yield Static("", id="partition-info")
                        if field.name == "python":
                            yield PythonCheckNote()
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

    def on_mount(self) -> None:
        self.query_one("#f-name", Input).focus()
        self.show_entry(self.initial.entry)
        self.show_partition_info()
        self.show_gpu_types()
        self.schedule_preview(0.0)

    def show_entry(self, entry: str) -> None:
        """Show only the fields of ``entry`` (the trainer's or a script's) and those of all;
        the hidden ones keep their values, and validation skips them as well."""
        self.entry_shown = entry
        for i, (_, fields) in enumerate(FORM_SECTIONS):
            for field in fields:
                if field.applies:
                    self.query_one(f"#row-{field.name}").display = field.applies == entry
                    if field.applies != entry:
                        self.query_one(f"#e-{field.name}").display = False
            # A section whose every field is the other entry's goes with them.
            shown = any(f.applies in ("", entry) for f in fields)
            self.query_one(f"#section-{i}").display = shown

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
        if isinstance(event, Select.Changed):
            name = (event.select.id or "").removeprefix("f-")
            if name in FIELDS and FIELDS[name].kind in ("picker", "gpu_type"):
                self.query_one(f"#c-{name}", Input).display = event.value == CUSTOM
            if name == "entry" and str(event.value) != self.entry_shown:
                self.show_entry(str(event.value))
                epochs = self.query_one("#f-epochs", Input)
                epochs.value = epochs_for_entry(str(event.value), epochs.value)
            if name == "partition":
                self.show_partition_info()
                self.show_gpu_types()
        if isinstance(event, Checkbox.Changed) and event.checkbox.id == "skip-python-check":
            self._skip_python = event.value  # applied with the next plan, on the I/O owner
            self.schedule_preview(0.0)
            return
        self.schedule_preview()

    def show_gpu_types(self) -> None:
        """Offer the chosen partition's GPU types (:func:`~ddp_tui.tui.form.gpu_type_options`),
        keeping the type given: one the partition lacks stays, as typed, for the plan to
        refuse by name."""
        select = self.query_one("#f-gpu_type", Select)
        custom = self.query_one("#c-gpu_type", Input)
        given = custom.value if select.value == CUSTOM else str(select.value or "")
        options = gpu_type_options(self.partitions, self.form_values()["partition"])
        offered = given in {value for _, value in options}
        # Offering what exists is not the user's change: no new preview for it.
        with select.prevent(Select.Changed), custom.prevent(Input.Changed):
            select.set_options(options)
            select.value = given if offered else CUSTOM
            custom.value = "" if offered else given
        custom.display = not offered

    def show_partition_info(self) -> None:
        """Idle nodes and GPUs per node of the chosen partition (see :func:`partition_note`)."""
        note = partition_note(self.partitions, self.form_values()["partition"])
        label = self.query_one("#partition-info", Static)
        label.update(Text(note))
        label.display = bool(note)

    def show_runtimes(self, found: tuple[str, ...] | None, partition: str) -> None:
        """The container runtime select with what the partition was detected to offer:
        found ones first, the others marked (:func:`~ddp_tui.tui.form.runtime_options`)."""
        choices = FIELDS["container_runtime"].choices
        options = runtime_options(choices, found, partition)
        if options == (self._runtime_options or runtime_options(choices, None, partition)):
            return  # as shown already (at first: as described)
        select = self.query_one("#f-container_runtime", Select)
        self._runtime_options = options
        value = select.value
        with select.prevent(Select.Changed):  # showing what exists is not the user's change
            select.set_options(options)
            select.value = value

    #: The container runtime select's options as last shown (None: as described).
    _runtime_options: list[tuple[str, str]] | None = None

    # -- the Python check -----------------------------------------------------

    #: A re-check asked for (ctrl+r), and a change of the skip box: both go with the next
    #: plan, to the I/O owner (the check's cache is its business).
    _recheck_python: bool = False
    _skip_python: bool | None = None

    def action_recheck_python(self) -> None:
        self._recheck_python = True
        self.schedule_preview(0.0)
        self.notify("Checking the job's python again...", markup=False)

    def _profile_name(self) -> str:
        from ddp_tui.config import BUILTIN_PROFILE

        profile = self.ddp_app.profile
        return profile.name if profile is not None else BUILTIN_PROFILE

    #: The newest preview asked for, and the newest shown: an older answer is stale.
    _preview_seq: int = 0
    _shown_seq: int = 0
    _preview_due: bool = False
    #: The plan the preview shows and the form it was made from: submit sends that plan
    #: while the form is unchanged, so what was previewed is what is submitted.
    _plan: SubmitPlan | None = None
    _plan_form: dict[str, str] | None = None
    #: The submit, sweep or preflight in flight ("" when none).
    _launching: str = ""

    def schedule_preview(self, delay: float = 0.3) -> None:
        # Typing fires a change per key; plan once the user pauses.
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_due = True
        # (A zero-delay Textual timer divides by zero; 10 ms is "now".)
        self._preview_timer = self.set_timer(max(delay, 0.01), self._start_preview)

    def _start_preview(self) -> None:
        self._preview_due = False
        self.update_preview(self.form_values())

    @property
    def preview_pending(self) -> bool:
        """A preview is scheduled or asked for and its plan is not shown yet."""
        return self._preview_due or self._shown_seq < self._preview_seq

    def update_preview(self, form: Mapping[str, str]) -> None:
        """Ask the I/O owner for the plan of ``form``: the spec is validated once, there,
        and the script rendered once. Fields that fail to convert keep the form's starting
        value, so the others are still checked against the cluster."""
        self._preview_seq += 1
        seq = self._preview_seq
        asked = dict(form)
        if self.ddp_app.io is None:  # the spec's own checks still apply
            _, errors = check_form(asked, self.initial)
            self.post_message(PreviewReady(seq, None, errors, asked, note="not connected yet"))
            return
        spec, errors = convert_form(asked, self.initial)
        recheck, skip = self._recheck_python, self._skip_python
        self._recheck_python, self._skip_python = False, None
        profile = self._profile_name()

        def plan(cluster: ClusterAPI) -> _Planned:
            key = PythonKey.of(profile, cluster.location, spec)
            switch_python_check(key, recheck=recheck, skip=skip)
            if recheck:
                cluster.recheck_environment(spec)
            planned = cluster.plan(spec)
            # After the plan, which may have detected them: what the partition offers.
            found = DetectCache().get(DetectKey(profile, cluster.location, spec.partition))
            runtimes = None if found is None else found.found_runtimes
            return planned, PythonCheckCache().get(key), cluster.location, runtimes

        def reply(answer: _Planned) -> PreviewReady:
            plan, record, where, runtimes = answer
            shown, errs = (
                (plan, plan.errors) if not errors else (None, merge_errors(errors, plan.errors))
            )
            return CheckedPreview(
                seq, shown, errs, asked, python=record, where=where, runtimes=runtimes
            )

        # A newer preview replaces a queued one, but not one that carries a switch.
        switched = recheck or skip is not None
        self.ask(Request("Preview", plan, reply, key=None if switched else "preview"))

    @on(PreviewReady)
    def _preview_ready(self, message: PreviewReady) -> None:
        if message.seq < self._shown_seq:
            return  # the plan of an older form, answered after a newer one
        self._shown_seq = message.seq
        plan = message.plan
        self._plan, self._plan_form = (plan, message.form) if plan is not None else (None, None)
        self.show_errors(message.errors)
        self.query_one(PythonCheckNote).show(message)
        if isinstance(message, CheckedPreview):
            self.show_runtimes(message.runtimes, message.form.get("partition", ""))
        if plan is not None and plan.warnings and plan.ok:
            summary = Text("Ready to submit (ctrl+s).", style="green")
            summary.append("".join(f"\n{w}" for w in plan.warnings), style="yellow")
            self.query_one("#form-summary", Static).update(summary)
        preview = self.query_one("#preview", Static)
        title = self.query_one("#preview-title", Static)
        if plan is not None and plan.ok:
            self.script = plan.script
            preview.update(Syntax(plan.script, "bash", theme="ansi_dark", word_wrap=False))
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

    def _checked_form(self) -> tuple[ExperimentSpec, SubmitPlan | None] | None:
        """The form's spec and, if the form is what the preview shows, its plan; None after
        showing why not (errors inline, not connected, busy)."""
        form = self.form_values()
        spec, errors = convert_form(form, self.initial)
        plan = self._plan if form == self._plan_form else None
        if plan is not None and not plan.ok:
            errors = list(plan.errors)
        if errors:
            self.show_errors(errors)
            self.focus_first_error()
            self.schedule_preview(0.0)  # adds the errors of the fields that converted
            names = ", ".join(sorted({e.field for e in errors}))
            self.notify(f"Fix these fields first: {names}", severity="error", markup=False)
            return None
        if self.ddp_app.io is None:
            self.notify("Not connected yet: wait for the header to say ok.", severity="warning")
            return None
        if self._busy:
            self.notify("Still submitting the previous request...", severity="warning")
            return None
        return spec, plan

    def launch(self, what: str, done: str, make: Callable[[ClusterAPI], list[RunView]]) -> None:
        """The one path of submit, sweep and preflight: ``make`` plans (unless it has the
        previewed plan) and submits on the I/O owner; ``Submitted`` or the refusal comes back."""
        self._busy = True
        self._launching = what
        # A plan is submitted at most once: whatever happens, the next submit plans afresh.
        self._plan = self._plan_form = None
        if not self.ask(Request(what, make, lambda runs: Submitted(runs, done), failed=_refused)):
            self._launch_ended()

    def _launch_ended(self) -> None:
        self._busy = False
        self._launching = ""
        self.schedule_preview(0.0)  # a fresh plan for the next submit

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        if checked := self._checked_form():
            spec, plan = checked
            self.launch(
                "Submit",
                "submitted",
                lambda cluster: [cluster.submit(plan or cluster.plan(spec))],
            )

    @on(Button.Pressed, "#sweep")
    def action_sweep(self) -> None:
        checked = self._checked_form()
        if checked is None:
            return
        spec = checked[0]

        def chosen(sweep: Sweep | None) -> None:
            if sweep is not None:
                self.launch(
                    "Sweep",
                    f"swept over {', '.join(sweep.fields)}",
                    lambda cluster: cluster.submit_sweep(
                        cluster.plan_sweep(spec, sweep, max_concurrent=sweep.max_concurrent)
                    ),
                )

        self.app.push_screen(SweepDialog(spec), chosen)

    @on(Button.Pressed, "#preflight")
    def action_preflight(self) -> None:
        if checked := self._checked_form():
            spec = checked[0]
            self.launch(
                "Preflight",
                "preflight submitted",
                lambda cluster: [cluster.submit(cluster.plan(spec, kind="preflight"))],
            )

    @on(Button.Pressed, "#save")
    def action_save_script(self) -> None:
        checked = self._checked_form()
        if checked is None:
            return
        spec, plan = checked

        def chosen(path: str | None) -> None:
            if path:
                self.ask(
                    Request(
                        "Save script",
                        lambda cluster: _save_script(plan or cluster.plan(spec), path),
                        lambda saved: Notice(f"Saved the script to {saved}"),
                        failed=_refused,
                    )
                )

        self.app.push_screen(
            PathModal("Save the sbatch script to (on this machine)", f"{spec.name}.sbatch"), chosen
        )

    def action_back(self) -> None:
        self.dismiss(None)

    @on(SubmitRejected)
    def _rejected(self, message: SubmitRejected) -> None:
        if self._launching:
            self._launch_ended()
        self.show_errors(message.errors)
        self.focus_first_error()
        names = ", ".join(sorted({e.field for e in message.errors}))
        self.notify(f"The cluster refused the spec: {names}", severity="error", markup=False)

    @on(RequestFailed)
    def _failed(self, message: RequestFailed) -> None:
        # Not stopped: it bubbles on to the app, which shows it.
        if message.what == self._launching:
            self._launch_ended()

    @on(Submitted)
    def _submitted(self, message: Submitted) -> None:
        self._busy = False
        self._launching = ""
        self.ddp_app.runs_submitted(message.runs, message.what)
        self.dismiss(None)


def _refused(error: Exception) -> SubmitRejected | None:
    """A plan with errors comes back as the errors, to show by their fields."""
    return SubmitRejected(error.errors) if isinstance(error, ValidationFailed) else None


def _save_script(plan: SubmitPlan, path: str) -> str:
    """Write the plan's script to ``path`` on this machine (on the I/O owner's thread)."""
    if not plan.ok:
        raise ValidationFailed(plan.errors)
    target = Path(path).expanduser()
    target.write_text(plan.script, encoding="utf-8")
    return str(target.resolve())
