"""Lightning, the Hugging Face Trainer and Accelerate, seen through their own hooks.

- **Lightning** (``lightning.pytorch`` and ``pytorch_lightning``): every ``Trainer`` gets one more
  callback, appended after its own ``__init__``. Its training epochs drive the epochs, with the
  epoch's logged metrics (``callback_metrics``: train and, since Lightning 2 validates before
  ``on_train_epoch_end``, validation). ``test``, ``validate`` and ``predict`` are phases, never
  epochs.
- **The Hugging Face Trainer**: a ``TrainerCallback`` added after ``Trainer.__init__``; its epochs
  drive the epochs, and its log records (train and eval) are the metrics, by the epoch they were
  logged in.
- **Accelerate**: what ``Accelerator()`` decided: its distributed type and process count.

The callback classes are made when the framework is imported, from its own base class.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .state import Observer


def _after_init(cls: Any, then: Callable[[Any], None], obs: Observer, hook: str) -> None:
    """Wrap ``cls.__init__`` so that ``then(instance)`` runs after it, guarded."""
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        obs.guard(hook, lambda: then(self))

    cls.__init__ = __init__


# -- Lightning -----------------------------------------------------------------------------
def _epoch_values(metrics: dict[str, Any]) -> dict[str, Any]:
    """Lightning's ``x_epoch`` is the epoch's value of a metric logged on step and epoch;
    ``x_step`` is one step's and is left out."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if key.endswith("_step"):
            continue
        out[key[: -len("_epoch")] if key.endswith("_epoch") else key] = value
    return out


def _lightning_callback(base: type, obs: Observer) -> type:
    class DdpTuiObserver(base):  # type: ignore[misc]
        """ddp-tui's observer (added by ddp-tui's wrapper; it changes nothing)."""

        def __init__(self) -> None:
            super().__init__()
            self._phase_start = 0.0

        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            obs.guard("lightning", lambda: self._start(trainer))

        def _start(self, trainer: Any) -> None:
            total = trainer.num_training_batches
            steps = int(total) if isinstance(total, (int, float)) and math.isfinite(total) else None
            obs.epoch_start(int(trainer.current_epoch), "lightning", steps)

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            obs.guard(
                "lightning", lambda: obs.epoch_end(_epoch_values(dict(trainer.callback_metrics)))
            )

        def _phase_begin(self) -> None:
            self._phase_start = time.time()

        def _phase_end(self, name: str, trainer: Any) -> None:
            obs.phase(name, self._phase_start, _epoch_values(dict(trainer.callback_metrics)))

        def on_test_start(self, trainer: Any, pl_module: Any) -> None:
            obs.guard("lightning", self._phase_begin)

        def on_test_end(self, trainer: Any, pl_module: Any) -> None:
            obs.guard("lightning", lambda: self._phase_end("test", trainer))

        def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
            obs.guard("lightning", self._phase_begin)

        def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
            obs.guard("lightning", lambda: self._phase_end("predict", trainer))

    return DdpTuiObserver


def _patch_lightning(module: ModuleType, obs: Observer) -> None:
    # lightning.pytorch or pytorch_lightning
    package = module.__name__.rsplit(".trainer.trainer", 1)[0]
    callbacks = __import__(f"{package}.callbacks", fromlist=["Callback"])
    callback = _lightning_callback(callbacks.Callback, obs)

    def attach(trainer: Any) -> None:
        trainer.callbacks.append(callback())
        obs.framework = "lightning"
        obs.framework_info("lightning", package=package)

    _after_init(module.Trainer, attach, obs, "lightning")


# -- the Hugging Face Trainer --------------------------------------------------------------
def _hf_epoch(logged: Any) -> int | None:
    """HF's fractional epoch (0.5 = half the first, 1.0 = the first done) -> 0-based epoch."""
    try:
        value = float(logged)
    except (TypeError, ValueError):
        return None
    return max(math.ceil(value - 1e-9) - 1, 0)


def _hf_callback(base: type, obs: Observer) -> type:
    class DdpTuiObserver(base):  # type: ignore[misc]
        """ddp-tui's observer (added by ddp-tui's wrapper; it changes nothing)."""

        def on_epoch_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            obs.guard("transformers", lambda: self._begin(state, kw))

        def _begin(self, state: Any, kw: dict[str, Any]) -> None:
            loader = kw.get("train_dataloader")
            try:
                steps = len(loader) if loader is not None else None
            except TypeError:
                steps = None
            obs.epoch_start(round(float(state.epoch or 0.0)), "transformers", steps)

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            obs.guard("transformers", obs.epoch_end)

        def on_log(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            obs.guard("transformers", lambda: self._log(kw.get("logs") or {}))

        def _log(self, logs: dict[str, Any]) -> None:
            epoch = _hf_epoch(logs.get("epoch"))
            if epoch is None or "train_runtime" in logs:  # the run's summary: no epoch's
                return
            values = {k: v for k, v in logs.items() if k != "epoch"}
            evaluating = any(k.startswith("eval_") for k in values)
            obs.metrics(epoch, values, "eval" if evaluating else "train")

    return DdpTuiObserver


def _patch_transformers(module: ModuleType, obs: Observer) -> None:
    from transformers.trainer_callback import TrainerCallback  # the framework being imported

    callback = _hf_callback(TrainerCallback, obs)

    def attach(trainer: Any) -> None:
        trainer.add_callback(callback())
        obs.framework = "transformers"
        obs.framework_info("transformers")

    _after_init(module.Trainer, attach, obs, "transformers")


# -- Accelerate ----------------------------------------------------------------------------
def _patch_accelerate(module: ModuleType, obs: Observer) -> None:
    def record(accelerator: Any) -> None:
        kind = accelerator.distributed_type
        obs.framework_info(
            "accelerate",
            distributed_type=str(getattr(kind, "value", kind)),
            num_processes=int(accelerator.num_processes),
            process_index=int(accelerator.process_index),
            device=str(accelerator.device),
        )

    _after_init(module.Accelerator, record, obs, "accelerate")


PATCHES: dict[str, Callable[[ModuleType, Observer], None]] = {
    "lightning": _patch_lightning,
    "transformers": _patch_transformers,
    "accelerate": _patch_accelerate,
}
