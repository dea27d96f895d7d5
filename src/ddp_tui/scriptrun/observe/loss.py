"""The training loss from the inside, and the samples and tokens of a loop with no DataLoader.

**The loss.** ``torch.autograd.backward`` (which ``Tensor.backward`` calls) is patched: a 0-dim
tensor that requires grad is the scalar the script trains on. Its detached value is kept on its
device, never read per step: :class:`LossMeter` reads the device once, when a ``step`` record is
written (at most once a second) and at exit (a CPU loss is read at once: no device to wait for).
The rule that makes it equal what the script prints:

- *One optimizer step's loss is the sum of the scalars backward() was called on since the
  previous step.* A script that accumulates gradients over ``k`` micro-steps divides each
  micro-batch's loss by ``k`` (nanoGPT, the Hugging Face Trainer, Accelerate): the sum is the
  mean full-batch loss, which is the ``loss * k`` the script prints, averaged over its micro-steps.
- *A loss scaled by a GradScaler is divided by the scale it was multiplied by* (the scale is
  read from the ``scale()`` call that made the tensor; the division stays on the device).
  A step that the scaler skips (inf/NaN gradients: no optimizer step) still closes its
  micro-steps, so its loss counts in the window as the script's own iteration does.
- A record's ``loss`` is the mean over the ``loss_steps`` steps since the previous record.

**Samples and tokens.** The first module called with gradients enabled that holds trainable
parameters is the model (a DDP/FSDP wrapper, or the model itself): one forward pre-hook on it sees
its input, the first tensor among its arguments. Its dimension 0 is the batch; an integer tensor
of 2+ dimensions is token ids, and ``dim0 * dim1`` are its tokens. Forwards under ``no_grad`` (an
evaluation) are not training samples. Where a DataLoader fed the step, its batches are the samples
(:mod:`.state`), never both; where a DataLoader fed the first steps and the input holds no tokens,
the hook has nothing to add and takes itself off.

Nothing here imports torch: the patches get torch's modules from the import hook (:mod:`.hooks`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import Observer

_FOLD_AT = 256  # closed steps' values summed into one on the device, to hold few tensors
_SCALE = "_ddp_tui_scale"  # set on a tensor a GradScaler made: the scale it multiplied by


def _sum(values: list[Any]) -> Any:
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


class LossMeter:
    """The loss values of one window of optimizer steps, kept where they were computed.

    ``fold`` sums a list of values into one (on the device, for tensors); ``read`` turns one into
    a float (for a tensor, the one host-device synchronisation of the window).
    """

    def __init__(
        self,
        fold: Callable[[list[Any]], Any] = _sum,
        read: Callable[[Any], float] = float,
    ) -> None:
        self.fold = fold
        self.read = read
        self.open: list[Any] = []  # micro-steps since the last optimizer step
        self.closed: list[Any] = []  # values of the window's finished steps
        self.steps = 0  # finished steps in the window
        self.seen = False  # a step was ever preceded by an observed backward

    def backward(self, value: Any) -> None:
        self.open.append(value)
        if len(self.open) >= _FOLD_AT:  # many micro-steps, or a loop with no torch.optim step
            self.open = [self.fold(self.open)]

    def step(self) -> bool:
        """Close the micro-steps since the last step; False when there were none (a second
        optimizer stepping after the same backward, or a backward torch did not show us)."""
        if not self.open:
            return False
        self.seen = True
        self.closed += self.open
        self.open = []
        self.steps += 1
        if len(self.closed) >= _FOLD_AT:
            self.closed = [self.fold(self.closed)]
        return True

    def window(self) -> tuple[float | None, int]:
        """The mean step loss over the window's finished steps, and how many; starts the next
        window. Micro-steps of an unfinished step stay for it."""
        steps, values = self.steps, self.closed
        self.steps, self.closed = 0, []
        if not steps:
            return None, 0
        return self.read(self.fold(values)) / steps, steps


# -- the model's input ---------------------------------------------------------------------
def first_tensor(value: Any, depth: int = 0) -> Any:
    """The first tensor (anything with a ``shape``) in a value, a tuple, a list or a mapping."""
    if getattr(value, "shape", None) is not None:
        return value
    if depth > 2:
        return None
    if isinstance(value, (tuple, list)):
        items: Any = value
    elif isinstance(value, Mapping):
        items = value.values()
    else:
        return None
    for item in items:
        found = first_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


_IDS: dict[Any, bool] = {}  # dtype -> whether an input of it is token ids (asked once each)


def input_size(tensor: Any) -> tuple[int | None, int | None]:
    """(samples, tokens) of a model's input: dim 0, and dim0*dim1 for integer ids of 2+ dims."""
    shape = getattr(tensor, "shape", None)
    if not shape:  # none, or a 0-dim tensor
        return None, None
    dtype = tensor.dtype
    ids = _IDS.get(dtype)
    if ids is None:
        ids = _IDS[dtype] = not (
            dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool"
        )
    if ids and len(shape) >= 2:
        return int(shape[0]), int(shape[0]) * int(shape[1])
    return int(shape[0]), None


# -- the patches ---------------------------------------------------------------------------
# Each hook first asks torch.compiler.is_compiling(): a hook that torch.compile traces (a model
# compiled in place with ``model.compile()``, or called inside a compiled function) is then a
# no-op that dynamo folds away. Traced for real, our bookkeeping would break the user's graph
# (dynamo cannot trace a hook handle's removal) or specialise it on our counters.
_SEARCH_STEPS = 3  # optimizer steps after which a model not found is no longer looked for
# torch warns at each call of a torch.compile'd module while any global hook is registered: ours
# is, until the model is found, and the warning would be ddp-tui's noise in the script's output.
_COMPILE_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"


def patch_autograd(module: ModuleType, obs: Observer) -> None:
    """``torch.autograd.backward``: the scalar a training step calls backward() on."""
    original = module.backward
    torch = module.torch  # half-imported now: its functions are looked up when called

    def fold(values: list[Any]) -> Any:
        """Many values in one kernel (stack promotes mixed dtypes), summed in float32 at least;
        a CPU loss's floats in Python."""
        tensors = [v for v in values if type(v) is not float]
        floats = sum(v for v in values if type(v) is float) if len(tensors) < len(values) else 0.0
        if not tensors:
            return floats
        stacked = torch.stack(tensors)
        return stacked.sum(dtype=torch.promote_types(stacked.dtype, torch.float32)) + floats

    obs.loss.fold = fold
    keep = obs.loss.backward

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if "loss" not in obs.off and not torch.compiler.is_compiling():
            try:
                _observe_backward(tensors, keep)
            except Exception as exc:
                obs.failed("loss", exc)
        return original(tensors, *args, **kwargs)

    backward.__doc__ = original.__doc__
    backward.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(module, "backward", backward)  # noqa: B010 (a module of torch)


def _observe_backward(tensors: Any, keep: Callable[[Any], None]) -> None:
    if type(tensors) in (tuple, list):
        if len(tensors) != 1:
            return
        tensors = tensors[0]
    if not getattr(tensors, "requires_grad", False) or tensors.dim() != 0:
        return  # not a scalar being trained on (a GradientEdge, a vector with its gradient)
    scale = getattr(tensors, _SCALE, None)  # not __dict__: that would give every loss a dict
    if scale is not None:
        value = tensors.detach().float() / scale  # on the device: no synchronisation
    elif tensors.is_cpu:
        # No device to wait for: a float is cheaper to keep than a tensor held alive.
        keep(tensors.item())
        return
    else:
        value = tensors.detach()
    keep(value.item() if value.is_cpu else value)


def patch_grad_scaler(module: ModuleType, obs: Observer) -> None:
    """``GradScaler.scale`` marks the tensor it scales with its scale; ``GradScaler.step`` that
    skips the optimizer's step (inf/NaN gradients) still ends the script's iteration."""
    cls = module.GradScaler
    scale, step = cls.scale, cls.step
    torch = module.torch

    def scaled(self: Any, outputs: Any) -> Any:
        result = scale(self, outputs)
        if result is outputs or "loss" in obs.off or torch.compiler.is_compiling():
            return result
        try:
            if getattr(result, "shape", None) is not None and not len(result.shape):
                result.__dict__[_SCALE] = self._scale.to(result.device)
        except Exception as exc:
            obs.failed("loss", exc)
        return result

    def stepped(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        before = obs.optimizer_steps
        result = step(self, optimizer, *args, **kwargs)
        if obs.optimizer_steps == before:
            obs.guard("loss", obs.skipped_step)
        return result

    scaled.__doc__, stepped.__doc__ = scale.__doc__, step.__doc__
    cls.scale, cls.step = scaled, stepped


def patch_modules(module: ModuleType, obs: Observer) -> None:
    """Find the model: a global forward pre-hook until the first module called with gradients
    enabled that holds trainable parameters, then one pre-hook on that module alone (every
    module's call takes torch's slow path while a global hook is registered). The search ends
    after the first few optimizer steps, found or not."""
    torch = module.torch  # half-imported now: its functions are looked up when called
    handles: list[Any] = []  # the global hook's, while it searches
    ours: list[Any] = []  # the model's hook's
    warnings.filterwarnings("ignore", message=_COMPILE_WARNING)
    quiet = warnings.filters[0]

    def stop_searching() -> None:
        for handle in handles:
            handle.remove()
        handles.clear()
        if quiet in warnings.filters:
            warnings.filters.remove(quiet)  # type: ignore[attr-defined]  # a list at run time
            warnings._filters_mutated()  # type: ignore[attr-defined]  # as filterwarnings does

    def count(args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> None:
        try:
            found = args[0] if args else None  # the common case: model(x)
            if getattr(found, "shape", None) is None:
                found = first_tensor(args) if args else None
            if found is None and kwargs:
                found = first_tensor(kwargs)
            samples, tokens = input_size(found)
            obs.forward_input(samples, tokens)
        except Exception as exc:
            obs.failed("forward", exc)

    def model_input(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if torch.compiler.is_compiling() or "forward" in obs.off or not torch.is_grad_enabled():
            return
        if not obs.input_wanted:  # a DataLoader's batches say it all: stop paying for the hook
            for handle in ours:
                handle.remove()
            return
        count(args, kwargs)

    def any_module(model: Any, args: tuple[Any, ...]) -> None:
        if torch.compiler.is_compiling() or "forward" in obs.off:
            return
        try:
            if obs.optimizer_steps >= _SEARCH_STEPS:
                found = None  # no model called with gradients: stop looking
            elif not torch.is_grad_enabled() or not any(
                p.requires_grad for p in model.parameters()
            ):
                return
            else:
                found = model
            # torch copied the hooks before calling them: removing ours here is safe.
            stop_searching()
            if found is None:
                return
            ours.append(found.register_forward_pre_hook(model_input, with_kwargs=True))
        except Exception as exc:
            obs.failed("forward", exc)
            return
        # A global pre-hook gets no kwargs: a model called as ``model(input_ids=...)`` (Hugging
        # Face) has its first input uncounted; its own hook sees the keywords from then on.
        count(args, {})

    handles.append(module.register_module_forward_pre_hook(any_module))


#: Module name -> its patch (called by :mod:`.hooks` once torch has imported the module).
PATCHES: dict[str, Callable[[ModuleType, Observer], None]] = {
    "torch.autograd": patch_autograd,
    "torch.amp.grad_scaler": patch_grad_scaler,
    "torch.nn.modules.module": patch_modules,
}
